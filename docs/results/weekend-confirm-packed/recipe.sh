#!/usr/bin/env bash
# How weekend-confirm-packed runs (issue 69, item 4): weekend-confirm's stage 1 — its 12 trials, seeds 1206, 2026 and
# 56, its full budget, real APPO — again with [runtime] pack = auto (the default: its 6 population-1 trials one lake
# pool, its 6 population-16 trials three pools of two), from a clone of one frozen commit, then two of its trials
# alone (one of each population, with `--set runtime.pack=off`, as one study: its equal-budget re-evaluation needs
# both) so that packed and unpacked are priced alike:
#   setsid docs/results/weekend-confirm-packed/recipe.sh > runs/weekend-confirm-packed.out 2>&1 &
#   setsid docs/results/weekend-confirm-packed/recipe.sh --resume > runs/weekend-confirm-packed.out 2>&1 &  # resumed
#   ALONE=no COMMIT=a819656 RESULTS=runs/packed32 setsid docs/results/weekend-confirm-packed/recipe.sh ...  # packed only
# The shipped folder is a819656's packed stage (runs/packed32); its two trials alone ran at 57fa130, whose unpacked
# trials run the code a819656 runs. The run folders land in runs/ (git-ignored); runs/sessions.log keeps each
# session's start and exit.
set -euo pipefail
commit="${COMMIT:-a819656}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
commit="$(git -C "$repo" rev-parse "$commit")"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
results="$repo/${RESULTS:-runs}"
mkdir -p "$results"
cd "$frozen"
study() {  # NAME, then the study's options; a failed study still lets the next one run
  local name="$1"
  shift
  echo "$(date -u +%FT%TZ) $name $* start (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$repo/runs/sessions.log"
  PYTHONPATH="$frozen" WANDB_MODE=offline "$repo/.venv/bin/python" -m bilevel_tune.study weekend-confirm \
    --results "$results" --wandb offline "$@" || status=$?
  echo "$(date -u +%FT%TZ) $name $* exit $status" >> "$repo/runs/sessions.log"
}
status=0
study packed --name weekend-confirm-packed "$@"
[ "${ALONE:-yes}" = no ] && exit $status
# one trial of each population alone (one cell each, seed 1206), at one CPU each as the shipped stage ran them
study alone --name weekend-confirm-alone --population 1,16 --optimize-params min_demand_frac --seed 1206 \
  --set runtime.pack=off --cpus-per-trial 1 "$@"
exit $status
