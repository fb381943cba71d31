#!/usr/bin/env bash
# How optimizers-appo was run: the optimizers study (studies/optimizers.toml: ES, CMA-ES, BO and random search at
# 200 inner-loop evaluations a run, 1-D and 2-D, a 21-point rules scan) at its full budget with real APPO, until
# decided, from a clone of one commit (so edits in the work tree never reach a running trial):
#   COMMIT=<sha> docs/results/optimizers-appo/recipe.sh --dry-run   # the plan (dryrun.txt is the one it printed)
#   COMMIT=<sha> docs/results/optimizers-appo/recipe.sh             # one session, stages of 2 seeds until decided or 6
#   COMMIT=<sha> docs/results/optimizers-appo/recipe.sh --resume    # after a stop
# The run folder lands in runs/optimizers-appo (git-ignored); run.md names the commit and the sessions.
set -euo pipefail
commit="${COMMIT:?set COMMIT to the commit to run}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
mkdir -p "$repo/runs"
echo "$(date -u +%FT%TZ) optimizers-appo $* start (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$repo/runs/sessions.log"
cd "$frozen"
status=0
PYTHONPATH="$frozen" WANDB_MODE=offline "$repo/.venv/bin/python" -m bilevel_tune.study optimizers --inner appo --until-decided \
  --results "$repo/runs" --name optimizers-appo --wandb offline "$@" || status=$?
echo "$(date -u +%FT%TZ) optimizers-appo $* exit $status" >> "$repo/runs/sessions.log"
exit $status
