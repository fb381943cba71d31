#!/usr/bin/env bash
# The campaign's re-scoring (issue "What each answer needed"), as it ran on 2026-12-06 from the frozen commit 7fe2727
# on this shipped folder: each trial's final rules on 16 final seeds (finals.csv), then its incumbents at 1/8, 1/4 and
# 1/2 of its budget and at 1,000 evaluations on its 3 final seeds (anytime.csv). Both resume where they stopped.
#   final seeds: 48 jobs, 0:24:09; anytime: 168 jobs (24 whole-budget incumbents copied from finals.csv), 0:12:33.
set -euo pipefail
commit="${COMMIT:-7fe27276423177d7f5137500bf6a53dc9e7d55af}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
cd "$frozen"
run="$repo/docs/results/weekend-appo"
PYTHONPATH="$frozen" WANDB_MODE=disabled "$repo/.venv/bin/python" -m bilevel_tune.study --reevaluate "$run" \
  --final-seeds 16 --wandb disabled --num-cpus 2
PYTHONPATH="$frozen" WANDB_MODE=disabled "$repo/.venv/bin/python" -m bilevel_tune.study --reevaluate "$run" \
  --at-evaluations 1/8,1/4,1/2,1000 --wandb disabled --num-cpus 2
