#!/usr/bin/env bash
# How weekend-appo was run: the weekend study at its full budget with real APPO,
# from a clone of one commit (so edits in the work tree never reach a running trial),
# stopped with Ctrl-C between sessions and resumed:
#   COMMIT=b0b640d009c796c03d836800b0647b219d373752 docs/results/weekend-appo/recipe.sh --dry-run  # dryrun.txt
#   COMMIT=b0b640d009c796c03d836800b0647b219d373752 docs/results/weekend-appo/recipe.sh            # 2 seeds
#   COMMIT=b0b640d009c796c03d836800b0647b219d373752 docs/results/weekend-appo/recipe.sh --resume   # twice
#   docs/results/weekend-appo/recipe.sh --resume --until-decided  # at 7f5d369: stages of 2 seeds, up to 6
#   Stages 4-6 (the 12-seed plan): from 5bb538b's raw folder (restored as runs/weekend-appo), after the ceiling's
#   continuation, by runs/chain.sh (ceiling-appo/run.md) at the campaign's frozen commit, c3074b5:
#   COMMIT=c3074b5e42329e4550fd2b14096e4ab1bb1376e9 docs/results/weekend-appo/recipe.sh --resume --until-decided \
#     --extend-plan 12 --declare-margin 0.01
# The run folder lands in runs/weekend-appo (git-ignored); sessions.log here is the log this recipe kept (then named campaign/run.sh): each session's start, exit
# and what else ran on the machine.
set -euo pipefail
commit="${COMMIT:-7f5d36914cf30663f8d23fe0f4467ac1d65b0590}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
mkdir -p "$repo/runs"
echo "$(date -u +%FT%TZ) weekend $* start (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$repo/runs/sessions.log"
cd "$frozen"
status=0
PYTHONPATH="$frozen" WANDB_MODE=offline "$repo/.venv/bin/python" -m bilevel_tune.study weekend --inner appo --scan 21 \
  --results "$repo/runs" --name weekend-appo --wandb offline "$@" || status=$?
echo "$(date -u +%FT%TZ) weekend $* exit $status" >> "$repo/runs/sessions.log"
exit $status
