#!/usr/bin/env bash
# Restore a real-APPO run folder kept in history, as a stage in progress was left at a hand-in:
#   docs/results/restore-run.sh RUN BASE_COMMIT BASE_PATH [OVERLAY_COMMIT ...]
# BASE_COMMIT's BASE_PATH is the folder as an earlier stage left it (ceiling-appo: 7f1efb7
# campaign/results/ceiling-appo); each OVERLAY_COMMIT's runs/RUN holds only what changed since the base and the
# overlays before it, applied in order, with runs/RUN/.manifest listing every file the folder held then, so a file
# the run moved or removed since (a stage's Tune state set aside) is removed again by the last one's; W&B's offline
# runs and TensorBoard's files, mirrors of the records, are not kept. The folder lands in runs/RUN.
# Write an overlay with:  docs/results/restore-run.sh --overlay RUN BASE_COMMIT BASE_PATH [OVERLAY_COMMIT ...]
# (prints the files to add: those of runs/RUN not already in the base and the overlays named). RUN_ROOT names
# another folder holding runs/RUN (a copy taken at a stage's look while the run goes on), default the repository.
set -euo pipefail
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "${RUN_ROOT:-$repo}"
export GIT_DIR="$repo/.git"
if [ "${1:-}" = "--overlay" ]; then
  run="$2" base="$3" path="$4"; shift 4
  # W&B's offline runs and TensorBoard's files mirror the records: not kept (stage 1's folder kept none either)
  (cd "runs/$run" && find . -type f ! -name .session.lock ! -name .manifest ! -path '*/wandb/*' \
     ! -path './tensorboard/*' | sed 's|^\./||' | sort) > "runs/$run/.manifest"
  known=/tmp/restore-run-known.$$
  # $known: each file as the restore leaves it, the last overlay's blob over the earlier ones' and the base's
  { git ls-tree -r "$base" "$path/" | awk -v p="$path/" '{sub(p, "", $4); print $3, $4}'
    for overlay in "$@"; do
      git ls-tree -r "$overlay" "runs/$run/" | awk -v p="runs/$run/" '{sub(p, "", $4); print $3, $4}'
    done; } | awk '{ blob = $1; sub(/^[^ ]+ /, ""); last[$0] = blob } END { for (f in last) print last[f], f }' > "$known"
  while read -r file; do
    blob="$(git hash-object "runs/$run/$file")"
    grep -qxF "$blob $file" "$known" || echo "runs/$run/$file"
  done < "runs/$run/.manifest"
  echo "runs/$run/.manifest"
  rm -f "$known"
  exit 0
fi
run="$1" base="$2" path="$3"; shift 3
[ ! -e "runs/$run" ] || { echo "runs/$run exists: move it aside first" >&2; exit 2; }
mkdir -p "runs/$run"
depth=$(echo "$path" | tr -cd '/' | wc -c)
git archive "$base" "$path" | tar -x --strip-components="$depth" -C runs
shopt -s dotglob; [ "$(basename "$path")" = "$run" ] || mv "runs/$(basename "$path")"/* "runs/$run"/
for overlay in "$@"; do git archive "$overlay" "runs/$run" | tar -x -C .; done
if [ $# -gt 0 ]; then
  (cd "runs/$run" && find . -type f ! -name .manifest ! -path '*/wandb/*' ! -path './tensorboard/*' | sed 's|^\./||' |
     sort) | comm -23 - <(sort "runs/$run/.manifest") |
    while read -r extra; do rm -f "runs/$run/$extra"; done
  find "runs/$run" -mindepth 1 -type d -empty -delete  # the checkpoints the run had already replaced
fi
echo "runs/$run restored ($(find "runs/$run" -type f | wc -l) files)"
