#!/usr/bin/env bash
# Keep a real-APPO run folder in history at a hand-in or a stage's look, so nothing is left only on one machine:
#   docs/results/keep-run.sh RUN "MESSAGE" BASE_COMMIT BASE_PATH [OVERLAY_COMMIT ...]
# commits what runs/RUN holds beyond the base and the overlays named (restore-run.sh --overlay: trial folders and
# checkpoints, Tune's state, study.json and a manifest) with MESSAGE, removes it from the tree again in the next
# commit, then restores the folder in a scratch clone (restore-run.sh with the new overlay last) and checks it
# against runs/RUN file by file. Prints the new overlay's commit: name it last when you next restore or keep.
# RUN_ROOT names another folder holding runs/RUN (a copy taken at a stage's look), as for restore-run.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(git -C "$here" rev-parse --show-toplevel)"
[ $# -ge 4 ] || { echo "usage: keep-run.sh RUN MESSAGE BASE_COMMIT BASE_PATH [OVERLAY_COMMIT ...]" >&2; exit 2; }
run="$1" msg="$2"; shift 2
live="${RUN_ROOT:-$repo}/runs/$run"
[ -d "$live" ] || { echo "keep-run.sh: no run folder $live" >&2; exit 2; }
# the overlay's commit must hold the run folder and nothing else
git -C "$repo" diff --cached --quiet || { echo "keep-run.sh: changes are staged in $repo; commit or unstage them first" >&2; exit 2; }

list="$(mktemp)" scratch="$(mktemp -d)"
trap 'rm -rf "$list" "$scratch"' EXIT
"$here/restore-run.sh" --overlay "$run" "$@" > "$list"
echo "$(wc -l < "$list") files, $(cd "${RUN_ROOT:-$repo}" && xargs -a "$list" du -cb | tail -1 | cut -f1) bytes"
(cd "${RUN_ROOT:-$repo}" && GIT_DIR="$repo/.git" GIT_WORK_TREE="${RUN_ROOT:-$repo}" xargs -a "$list" git add -f)
git -C "$repo" commit -q -m "$msg"
overlay="$(git -C "$repo" rev-parse HEAD)"
git -C "$repo" rm -r -q --cached "runs/$run"
git -C "$repo" commit -q -m "campaign: $run's overlay leaves the tree again (kept in history at ${overlay:0:7})"
echo "overlay $overlay"

# W&B's and TensorBoard's mirrors are not kept, the lock is the session's own, empty folders carry nothing
files() { (cd "$1" && find . -type f ! -name .session.lock ! -name .manifest ! -path '*/wandb/*' \
  ! -path './tensorboard/*' -print0 | sort -z | xargs -0 -r sha256sum); }
git clone -q "$repo" "$scratch/clone"
(cd "$scratch/clone" && RUN_ROOT= docs/results/restore-run.sh "$run" "$@" "$overlay" > /dev/null)  # the clone's own runs/
if diff <(files "$scratch/clone/runs/$run") <(files "$live") > "$scratch/differences"; then
  echo "restored in a scratch clone: identical to $live ($(files "$live" | wc -l) files)"
else
  echo "keep-run.sh: the folder restored from ${overlay:0:7} differs from $live:" >&2
  head -20 "$scratch/differences" >&2
  exit 1
fi
