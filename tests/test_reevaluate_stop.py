"""A held-out step stopped with Ctrl-C says what it scored: the jobs its record holds, not the steps that returned.
It drives the real CLI in a subprocess, as a user would."""

import re
import shutil
import signal
from pathlib import Path

import pandas as pd
import pytest

from .study_helpers import REPO, interrupt, study_process, wait_for

pytestmark = pytest.mark.ray

SHIPPED = REPO / "docs" / "results" / "weekend-analytic"  # 24 finished trials of the analytic loop, 3 final seeds
STOPPED = re.compile(r"^re-evaluation: (\d+) job\(s\) scored, (\d+) failed, in [\d:]+; resume with: (.+)$")


def scored_jobs(run: Path) -> int:
    path = run / "heldout.csv"
    return len(pd.read_csv(path).groupby(["trial", "learner"])) if path.is_file() else 0


def test_a_held_out_step_stopped_midway_counts_the_jobs_it_scored(tmp_path):
    run = tmp_path / "weekend-analytic"
    shutil.copytree(SHIPPED, run)
    proc = study_process(["--reevaluate", str(run), "--learners", "ppo", "--num-cpus", "2", "--wandb", "disabled"])
    wait_for(lambda: scored_jobs(run) >= 1, timeout=240)  # the run's own loop first (fast), then PPO's (slow)
    out = interrupt(proc, signal.SIGINT)
    assert proc.returncode == 130, out[-3000:]
    match = STOPPED.match(out.strip().splitlines()[-1])
    assert match, out[-3000:]
    assert int(match[1]) == scored_jobs(run) >= 1 and match[2] == "0"
    jobs = int(re.search(r"^held-out: (\d+) job\(s\)", out, re.M)[1])
    counted = [int(k) for k in re.findall(rf"; (\d+) of {jobs}\)$", out, re.M)]
    assert counted == list(range(1, len(counted) + 1)) and len(counted) >= 1, "each job's line counts it"
    assert match[3].endswith(f"--reevaluate {run} --learners ppo")
