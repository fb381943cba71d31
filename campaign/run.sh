#!/usr/bin/env bash
# The campaign's full-budget runs (issue 22): the README's own command, at full budget, with real APPO,
# run from a frozen clone of one commit (<study>.commit) so that edits in the work tree never reach a running trial.
#   campaign/run.sh weekend|ceiling [--resume [--until-decided]|--dry-run]
# The run folders live in campaign/results/ (tracked until the results are shipped: they are how a run
# resumes in a later session on a fresh machine); each session's start, stop and concurrent load go to
# campaign/sessions.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
study="$1"; shift
# each study runs from the commit in <study>.commit (set when it first starts; its resumes keep it)
[ -f "$here/$study.commit" ] || git -C "$repo" rev-parse HEAD > "$here/$study.commit"
commit="$(cat "$here/$study.commit")"
src="$here/src-$commit"  # the frozen clone, beside this script (git-ignored)
if [ ! -d "$src" ]; then
  git clone -q "$repo" "$src" && git -C "$src" checkout -q "$commit"
fi
export PYTHONPATH="$src" WANDB_MODE=offline
cd "$src"
echo "$(date -u +%FT%TZ) $study $* start (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$here/sessions.log"
set +e
"$repo/.venv/bin/python" -m bilevel_tune.study "$study" --inner appo --scan 21 \
  --results "$here/results" --name "$study-appo" --wandb offline "$@"
rc=$?
echo "$(date -u +%FT%TZ) $study $* exit $rc" >> "$here/sessions.log"
exit $rc
