#!/usr/bin/env bash
# How fishery-analytic was run: the fishery study at its full budget with the analytic inner loop, until decided,
# from a clone of one commit (so edits in the work tree never reach a running trial):
#   docs/results/fishery-analytic/recipe.sh   # one session, stages of 2 seeds until decided or 6
# The run folder lands in runs/fishery-analytic (git-ignored).
set -euo pipefail
commit="${COMMIT:-d408a8118ec373650fc4d1b02f5318e0948369fd}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
mkdir -p "$repo/runs"
echo "$(date -u +%FT%TZ) fishery $* start (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$repo/runs/sessions.log"
cd "$frozen"
status=0
PYTHONPATH="$frozen" WANDB_MODE=disabled nice -n 19 "$repo/.venv/bin/python" -m bilevel_tune.study fishery --inner analytic --scan 21 --until-decided \
  --results "$repo/runs" --name fishery-analytic --wandb disabled "$@" || status=$?
echo "$(date -u +%FT%TZ) fishery $* exit $status" >> "$repo/runs/sessions.log"
exit $status
