#!/usr/bin/env bash
# How weekend-confirm runs: the confirmatory weekend (studies/weekend-confirm.toml) with real APPO, until decided,
# from a clone of the one commit its plan was fixed at (edits in the work tree never reach a running trial), at low
# priority in a process group of its own, resumed in place each working day:
#   setsid nice -n 10 docs/results/weekend-confirm/recipe.sh > runs/weekend-confirm.out 2>&1 &
#   setsid nice -n 10 docs/results/weekend-confirm/recipe.sh --resume > runs/weekend-confirm.out 2>&1 &  # later days
# and beside it, per stage (ship, held-out learners, quotes, notebook):
#   setsid nice -n 10 docs/results/ship-stage.sh weekend-confirm STAGE > runs/ship-weekend-confirm.out 2>&1 &
# The run folder lands in runs/weekend-confirm (git-ignored); runs/sessions.log keeps each session's start and exit.
set -euo pipefail
commit="${COMMIT:-7a87755}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
commit="$(git -C "$repo" rev-parse "$commit")"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
mkdir -p "$repo/runs"
echo "$(date -u +%FT%TZ) weekend-confirm $* start (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$repo/runs/sessions.log"
cd "$frozen"
status=0
PYTHONPATH="$frozen" WANDB_MODE=offline "$repo/.venv/bin/python" -m bilevel_tune.study weekend-confirm --until-decided \
  --results "$repo/runs" --name weekend-confirm --wandb offline "$@" || status=$?
echo "$(date -u +%FT%TZ) weekend-confirm $* exit $status" >> "$repo/runs/sessions.log"
exit $status
