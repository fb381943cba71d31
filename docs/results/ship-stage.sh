#!/usr/bin/env bash
# A stage's end steps for a real-APPO run going on in runs/RUN (issue 44's list), started beside the run:
#   setsid nice -n 10 docs/results/ship-stage.sh RUN STAGE > runs/ship-RUN.out 2>&1 &
# waits for STAGE's look (study.json's stage log: decided, and the next stage recorded or the session gone — the
# plan's end), copies the folder at once to runs/looks/RUN-stageSTAGE/runs/RUN while the run goes on, ships the
# copy to docs/results/RUN with run.md's head as its notes, scores the new trials by the held-out learners
# (--reevaluate, only the jobs not yet run; HELDOUT=later leaves them for a quiet moment: a copy of the shipped
# folder scored at low priority, its heldout.csv and summary shipped together), regenerates the README's quotes and
# re-executes the notebook. AGAINST=PILOT compares its answers with PILOT's (`bilevel-summary --against`: kept as
# pilot.json, so later ships keep the comparison).
# Each step's start goes to runs/ship-RUN.log. Then keep the copy in history:
#   RUN_ROOT=runs/looks/RUN-stageSTAGE docs/results/keep-run.sh RUN "MESSAGE" BASE_COMMIT BASE_PATH [OVERLAY ...]
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: ship-stage.sh RUN STAGE" >&2; exit 2; }
run="$1" stage="$2"
here="$(cd "$(dirname "$0")" && pwd)"
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
python=.venv/bin/python
[ -f "runs/$run/study.json" ] || { echo "ship-stage.sh: no run folder runs/$run with a study.json" >&2; exit 2; }
log() { echo "$(date -u +%FT%TZ) $*" >> "runs/ship-$run.log"; }
looked() { "$python" - "runs/$run" "$stage" <<'PY'
import json, pathlib, sys
run, stage = pathlib.Path(sys.argv[1]), int(sys.argv[2])
try:
    stages = {entry["stage"]: entry for entry in json.loads((run / "study.json").read_text()).get("stages", [])}
except (OSError, ValueError):  # caught mid-write: ask again
    sys.exit(1)
decided = stages.get(stage, {}).get("decided_utc")
sys.exit(0 if decided and (stage + 1 in stages or not (run / ".session.lock").exists()) else 1)
PY
}

log "waiting for stage $stage's look"
until looked; do sleep 5; done
look="runs/looks/$run-stage$stage"
log "stage $stage looked at; copying the folder to $look"
rm -rf "$look" && mkdir -p "$look/runs" && cp -a "runs/$run" "$look/runs/"
awk -v head="# $run" '/^## What it answers/{exit} f; $0 == head {f=1}' "docs/results/$run/run.md" |
  sed '1{/^$/d}' > "$look/notes.md"
log "ship"
.venv/bin/bilevel-summary "$look/runs/$run" --ship "docs/results/$run" --notes "$look/notes.md" ${AGAINST:+--against "$AGAINST"} \
  > "$look/ship.out" 2>&1
if [ "${HELDOUT:-now}" = later ]; then  # the held-out step beside a running stage costs the run its cores
  log "reevaluate: later (HELDOUT=later)"
else
  log "reevaluate"
  WANDB_MODE=disabled "$python" -m bilevel_tune.study --reevaluate "docs/results/$run" \
    --learners ppo,analytic,frozen > "$look/reevaluate.out" 2>&1
fi
log "quotes and notebook"
"$here/refresh-quotes.sh" >> "$look/ship.out" 2>&1
log "done"
