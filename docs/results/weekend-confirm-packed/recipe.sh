#!/usr/bin/env bash
# How weekend-confirm-packed runs (issue 69, item 4): weekend-confirm's stage 1 — its 12 trials, seeds 1206, 2026 and
# 56, its full budget, real APPO — again with [runtime] pack = auto (the default: on 2 CPUs its 6 population-1
# trials ride along one pair of population 16, 38 lakes a block, and the other 4 population-16 trials are two
# pools of two), from a clone of one frozen commit; then two of its trials alone (one of each population, with
# `--set runtime.pack=off`, as one study: its equal-budget re-evaluation needs both), so that packed and unpacked
# are priced alike, back to back on the same machine; then the packed stage's held-out step, batched:
#   setsid docs/results/weekend-confirm-packed/recipe.sh > runs/weekend-confirm-packed.out 2>&1 &
#   setsid docs/results/weekend-confirm-packed/recipe.sh --resume > runs/weekend-confirm-packed.out 2>&1 &  # resumed
#   ALONE=no HELDOUT=no COMMIT=a819656 RESULTS=runs/packed32 setsid docs/results/weekend-confirm-packed/recipe.sh ...
# (the second shipped run: population 16 in pairs, population 1 a pool of its own, its trials alone run before).
# The run folders land in $RESULTS (runs/ by default, git-ignored); runs/sessions.log keeps each session's start
# and exit.
set -euo pipefail
commit="${COMMIT:-5a8ffa3}"  # the shipped folder's (RESULTS=runs/riders)
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
commit="$(git -C "$repo" rev-parse "$commit")"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
results="$repo/${RESULTS:-runs}"
mkdir -p "$results"
cd "$frozen"
log() { echo "$(date -u +%FT%TZ) $* (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$repo/runs/sessions.log"; }
study() {  # NAME, then the study's options; a failed study still lets the next one run
  local name="$1"
  shift
  log "$name $* start"
  PYTHONPATH="$frozen" WANDB_MODE=offline "$repo/.venv/bin/python" -m bilevel_tune.study weekend-confirm \
    --results "$results" --wandb offline "$@" || status=$?
  log "$name $* exit $status"
}
status=0
study packed --name weekend-confirm-packed "$@"
if [ "${ALONE:-yes}" != no ]; then
  # one trial of each population alone (one cell each, seed 1206), at one CPU each as the shipped stage ran them
  study alone --name weekend-confirm-alone --population 1,16 --optimize-params min_demand_frac --seed 1206 \
    --set runtime.pack=off --cpus-per-trial 1 "$@"
fi
if [ "${HELDOUT:-yes}" != no ]; then
  log "held-out start"
  PYTHONPATH="$frozen" WANDB_MODE=offline "$repo/.venv/bin/python" -m bilevel_tune.study \
    --reevaluate "$results/weekend-confirm-packed" --learners analytic,frozen,ppo || status=$?
  log "held-out exit $status"
fi
exit $status
