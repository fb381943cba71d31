#!/usr/bin/env bash
# How optimizers-analytic was run: the optimizers study (studies/optimizers.toml: ES, CMA-ES, BO and random search at
# 200 inner-loop evaluations a run, 1-D and 2-D, a 21-point rules scan) at its full budget with the analytic inner
# loop, until decided, from a clone of one commit (so edits in the work tree never reach a running trial):
#   COMMIT=... docs/results/optimizers-analytic/recipe.sh   # one session, stages of 2 seeds until decided or 6
# The shipped run adds Optuna's TPE to the grid (2026-12-06, from 7cbd506):
#   COMMIT=7cbd506 docs/results/optimizers-analytic/recipe.sh --grid optimizer=es,cma,bo,random,optuna
# The run folder lands in runs/optimizers-analytic (git-ignored).
set -euo pipefail
commit="${COMMIT:?set COMMIT to the commit to run}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
mkdir -p "$repo/runs"
echo "$(date -u +%FT%TZ) optimizers $* start (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$repo/runs/sessions.log"
cd "$frozen"
status=0
PYTHONPATH="$frozen" WANDB_MODE=disabled nice -n 19 "$repo/.venv/bin/python" -m bilevel_tune.study optimizers --inner analytic --until-decided \
  --results "$repo/runs" --name optimizers-analytic --wandb disabled "$@" || status=$?
echo "$(date -u +%FT%TZ) optimizers $* exit $status" >> "$repo/runs/sessions.log"
exit $status
