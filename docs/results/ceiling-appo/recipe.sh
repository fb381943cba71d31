#!/usr/bin/env bash
# How ceiling-appo was run: the ceiling study at its full budget with real APPO,
# from a clone of one commit (so edits in the work tree never reach a running trial),
# stopped with Ctrl-C between sessions and resumed:
#   docs/results/ceiling-appo/recipe.sh --dry-run   # the plan (dryrun.txt is the one it printed)
#   docs/results/ceiling-appo/recipe.sh             # the first session
#   docs/results/ceiling-appo/recipe.sh --resume    # each later one
#   Its first four sessions ran at d5c4ef5, the rest at 19fe808 (run.md says why); COMMIT=<sha> picks one.
#   Continued in stages from 2026-12-04 (stage 1's raw folder restored from 7f1efb7 as runs/ceiling-appo, run.md
#   says how, and how a stage in progress is restored from history): stage 2 from 2026-12-05 at bcdf4e5, from its
#   07:15 session on and all of stage 3 at c3074b5 (the campaign's frozen commit, with the margin), by
#   COMMIT=c3074b5e42329e4550fd2b14096e4ab1bb1376e9 setsid nice -n 19 runs/chain.sh   (run.md: the chain)
#   i.e. docs/results/ceiling-appo/recipe.sh --resume --until-decided --declare-margin 0.01, then the weekend's
# The run folder lands in runs/ceiling-appo (git-ignored); sessions.log here is the log this recipe kept (then named campaign/run.sh): each session's start, exit
# and what else ran on the machine.
set -euo pipefail
commit="${COMMIT:-19fe808cffefaaaf87029c4b0b67a25d105746a5}"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git -C "$repo" worktree add -q --detach "$frozen" "$commit"
mkdir -p "$repo/runs"
echo "$(date -u +%FT%TZ) ceiling $* start (commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$repo/runs/sessions.log"
cd "$frozen"
status=0
PYTHONPATH="$frozen" WANDB_MODE=offline "$repo/.venv/bin/python" -m bilevel_tune.study ceiling --inner appo --scan 21 \
  --results "$repo/runs" --name ceiling-appo --wandb offline "$@" || status=$?
echo "$(date -u +%FT%TZ) ceiling $* exit $status" >> "$repo/runs/sessions.log"
exit $status
