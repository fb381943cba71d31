#!/usr/bin/env bash
# The held-out step that ship-stage.sh left for later (HELDOUT=later), on a shipped run whose stages have ended:
#   setsid docs/results/heldout-later.sh RUN > runs/heldout-RUN.out 2>&1 &
# scores docs/results/RUN's finished trials by the held-out learners (`--reevaluate … --learners`, LEARNERS,
# default ppo,analytic,frozen; only the jobs not yet scored), at idle CPU priority (SCHED_IDLE: it takes only the
# cycles nothing else wants), from a frozen worktree of HEAD so edits in the work tree never reach its workers. Jobs
# already scored on a copy beside a running stage (runs/heldout/RUN) are adopted first (`run_history.adopt_held_out`,
# as a re-ship adopts them: the rows of trials whose final rules they scored, and their sessions).
# The summary, robustness.csv and run.md's held-out section are rebuilt when every job is scored; then the README's
# quotes and the notebook. Stopped, it resumes where it stopped: commit docs/results/RUN only after "done" in
# runs/heldout-RUN.log.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: heldout-later.sh RUN" >&2; exit 2; }
run="$1"
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$repo"
shipped="docs/results/$run" copy="runs/heldout/$run"
[ -f "$shipped/study.json" ] || { echo "heldout-later.sh: no shipped result $shipped with a study.json" >&2; exit 2; }
log() { echo "$(date -u +%FT%TZ) $*" >> "runs/heldout-$run.log"; }
commit="$(git rev-parse HEAD)"
frozen="$repo/.frozen/$commit"
[ -d "$frozen" ] || git worktree add -q --detach "$frozen" "$commit"

if [ -f "$copy/heldout.csv" ]; then
  log "adopting $copy's scored jobs"
  .venv/bin/python - "$shipped" "$copy" <<'PY'
import sys

from bilevel_tune.report.run_history import adopt_held_out
from bilevel_tune.study_data import run_lock

shipped, copy = sys.argv[1:]
try:  # neither folder in a session's hands meanwhile (a step still scoring the copy is refused in one line)
    with run_lock.held(copy, fresh=False, out=print), run_lock.held(shipped, fresh=False, out=print):
        print(f"adopted {adopt_held_out(shipped, copy)} row(s) of scored jobs")
except run_lock.LockError as err:
    print(f"heldout-later.sh: {err}", file=sys.stderr)
    sys.exit(2)
PY
  mv "$copy" "$copy.adopted-$(date -u +%Y%m%dT%H%M%SZ)"
fi

log "reevaluate (commit ${commit:0:7})"
(cd "$frozen" && PYTHONPATH="$frozen" WANDB_MODE=disabled chrt -i 0 "$repo/.venv/bin/python" -m bilevel_tune.study \
  --reevaluate "$repo/$shipped" --learners "${LEARNERS:-ppo,analytic,frozen}")
log "quotes and notebook"
"$here/refresh-quotes.sh"
log "done"
