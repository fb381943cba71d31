"""What a user meets around a run: exit status and last line, resume, a stale cluster record, /tmp, W&B and TensorBoard.

Each test drives the real CLI in a subprocess, as a user or a scheduler would.
"""

import json
import os
import re
import shlex
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from bilevel_tune.core import metrics
from bilevel_tune.runtime.lifecycle import SCRATCH_PREFIX
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.run_folder import TENSORBOARD_DIR, trial_name

from .study_helpers import (
    FAKE_KEY,
    command_process,
    curve_points,
    files_containing,
    interrupt,
    study_args,
    study_process,
    tensorboard_run,
    trial_records,
    wait_for,
)

pytestmark = pytest.mark.ray
ANALYTIC = {"inner": "analytic"}
LAST_LINE = re.compile(
    r"^(\d+) finished, (\d+) errored, (\d+) interrupted of (\d+) trials in [\d:]+; resume with: (.+)$"
)
RAYS_OWN = {"ray", "_ray_lockfiles"}  # Ray's own folders in /tmp, kept on purpose (logs of every session)


def last_line(out: str) -> str:
    return out.strip().splitlines()[-1]


def wandb_run_ids(trial_dir: Path) -> list[str]:
    """The W&B run id of every session's offline run in a trial folder (dirs are offline-run-<time>-<id>)."""
    return [p.name.rsplit("-", 1)[1] for p in sorted(trial_dir.glob("wandb/offline-run-*"))]


def test_ctrl_c_exits_130_with_a_resume_command_that_resumes_with_its_new_session_options(tmp_path):
    generations = 50  # Ctrl-C lands at 5: the first trial is mid-run, the second not started
    args = study_args(
        tmp_path, "--quick", **ANALYTIC, wandb="offline", cpus_per_trial=1, population=16,
        optimize_params="min_demand_frac", seed="42,7", outer_iters=generations, max_concurrent=1,
    )  # fmt: skip
    proc = study_process(args)
    wait_for(lambda: any(len(g) >= 5 for g, _ in trial_records(tmp_path / "run").values()), timeout=180)
    out = interrupt(proc, signal.SIGINT)
    assert proc.returncode == 130, out[-3000:]
    match = LAST_LINE.match(last_line(out))
    assert match and int(match[3]) >= 1 and match[4] == "2", last_line(out)
    command = shlex.split(match[5])
    assert command[command.index("--cpus-per-trial") + 1] == "1" and command[command.index("--wandb") + 1] == "offline"

    # a study option cannot change on resume: one line, nothing run
    refused = study_process([*command[3:], "--outer-iters", "5"])
    said, _ = refused.communicate(timeout=120)
    assert refused.returncode == 2 and said.strip().count("\n") == 0 and "--outer-iters would change it" in said

    # session options can: more shards this time
    command[command.index("--cpus-per-trial") + 1] = "2"
    resumed = command_process(command)
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out[-3000:]
    assert "Failed to fetch metrics" not in out, "the trial that never started is no warning when restored"
    assert re.match(r"2 finished, 0 errored, 0 interrupted of 2 trials in [\d:]+; results: ", last_line(out))
    records = trial_records(tmp_path / "run")
    for rows, final in records.values():
        assert [r[metrics.GENERATION] for r in rows] == list(range(generations)) and final is not None
    interrupted = [name for name, (rows, _) in records.items() if {r[metrics.SHARDS] for r in rows} == {1, 2}]
    assert interrupted, "the trial that was interrupted must resume with two shards"
    ids = wandb_run_ids(tmp_path / "run" / interrupted[0])
    assert len(ids) >= 2 and len(set(ids)) == 1, f"a resumed trial continues its own W&B run: {ids}"
    stopped = sorted((tmp_path / "run" / interrupted[0]).glob("wandb/offline-run-*"))[0] / "logs" / "debug.log"
    assert "finishing run" in stopped.read_text(), "the stopped session's W&B run ended, its end in the run folder"
    board = tmp_path / "run" / TENSORBOARD_DIR / trial_name(load_study("weekend"), records[interrupted[0]][0][0])
    assert len(list(board.glob("events.*"))) == 2, "one event file per session"
    steps = [step for step, _ in curve_points(tensorboard_run(board), "objective/this_generation")]
    assert steps == list(range(generations)), "TensorBoard's curve continues across sessions, each generation once"
    record = json.loads((tmp_path / "run" / "study.json").read_text())
    sessions = record["sessions"]
    assert [(s["resume"], s["cpus_per_trial"]) for s in sessions] == [(False, 1), (True, 2)], sessions
    assert [(s["exit_code"], s["finished"] + s["errored"] + s["interrupted"]) for s in sessions] == [(130, 2), (0, 2)]
    assert all(s["wall_s"] > 0 for s in sessions), "each session's end and wall time are on record"
    assert record["plan"] == sessions[0]["plan"], "the run's plan stays its first session's; a resume keeps its own"


def test_sigterm_exits_143_and_says_how_to_resume(tmp_path):
    args = study_args(tmp_path, "--quick", **ANALYTIC, wandb="disabled", population=16, seed=1, outer_iters=400)
    proc = study_process(args)
    wait_for(lambda: any(len(g) >= 3 for g, _ in trial_records(tmp_path / "run").values()), timeout=180)
    out = interrupt(proc, signal.SIGTERM)
    assert proc.returncode == 143, out[-3000:]
    assert LAST_LINE.match(last_line(out)), last_line(out)


@pytest.fixture
def stale_cluster_record():
    """/tmp/ray/ray_current_cluster naming a cluster that died (ray start's record, left behind)."""
    record = Path("/tmp/ray/ray_current_cluster")
    saved = record.read_text() if record.exists() else None
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("127.0.0.1:1")
    yield record
    if saved is None:
        record.unlink(missing_ok=True)
    else:
        record.write_text(saved)


def test_a_stale_cluster_record_does_not_capture_the_study_and_a_resume_without_tunes_state_is_one_line(
    tmp_path, stale_cluster_record
):
    """The study starts its own Ray beside a stale record. Then Tune's state gone while a trial has no final record:
    nothing to restore it from, one line, exit 2. (A finished stage's folder needs no Tune state: its resume only
    rewrites the summary.)"""
    args = study_args(tmp_path, "--quick", **ANALYTIC, wandb="disabled", population=2, seed=1, outer_iters=2)
    first = study_process(args)
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0, out[-3000:]
    assert "Failed to connect" not in out and "127.0.0.1:1" not in out

    (tmp_path / "run" / "tuner.pkl").unlink()
    shutil.rmtree(next((tmp_path / "run").glob("*_2d_seed1_*")))  # a trial that never started
    again = study_process(study_args(tmp_path, "--resume"))
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 2 and out.strip().count("\n") == 0, out
    assert "holds no restorable Tune experiment (no tuner.pkl)" in out and "Traceback" not in out


def test_joining_a_cluster_is_asked_for_explicitly_and_probed_first(tmp_path, stale_cluster_record):
    args = study_args(tmp_path, "--quick", **ANALYTIC, wandb="disabled")
    for env, named in ({"RAY_ADDRESS": "127.0.0.1:1"}, "RAY_ADDRESS=127.0.0.1:1"), ({}, "--address auto"):
        proc = study_process([*args, "--address", "auto"] if not env else args, env=env)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 2 and out.strip().count("\n") == 0, out
        assert named in out and "cannot connect to a Ray cluster" in out and "127.0.0.1:1" in out
    assert not (tmp_path / "run").exists()


def _tmp_entries() -> set[str]:
    return {p.name for p in Path("/tmp").iterdir()}


def test_a_second_ctrl_c_stops_at_once_loses_nothing_and_leaves_nothing_in_tmp(tmp_path):
    """The hardest stop a user makes, with real APPO and W&B writing temporary files: still nothing in /tmp."""
    real_tmp = {"TMPDIR": "/tmp", "RAY_TMPDIR": "/tmp"}  # the test session has a scratch TMPDIR; here, the real one
    before = _tmp_entries()
    args = study_args(
        tmp_path, "--quick", inner="appo", wandb="offline", population=2, optimize_params="fixed_quota", seed=1,
        outer_iters=200,
    )  # fmt: skip
    proc = study_process(args, env=real_tmp)
    wait_for(lambda: any(len(g) >= 2 for g, _ in trial_records(tmp_path / "run").values()), timeout=300)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    assert LAST_LINE.match(last_line(out)), last_line(out)
    ((rows, _),) = trial_records(tmp_path / "run").values()
    assert [r[metrics.GENERATION] for r in rows] == list(range(len(rows))), "every recorded generation is whole"
    left = _tmp_entries() - before - RAYS_OWN
    assert left == set(), f"debris in /tmp: {sorted(left)}"
    assert not [p for p in Path("/tmp").glob(f"{SCRATCH_PREFIX}*") if p.name not in before]


def test_the_summary_reaches_wandb_and_tensorboard_reads_every_trials_curve_and_the_key_lands_nowhere(tmp_path):
    args = study_args(
        tmp_path, "--quick", **ANALYTIC, wandb="offline", population="1,2", optimize_params="min_demand_frac", seed=1,
        outer_iters=3,
    )  # fmt: skip
    proc = study_process(args, env={"WANDB_API_KEY": FAKE_KEY})
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    run = tmp_path / "run"
    # the key: neither in the output nor in any file of the run folder (Tune's pickled experiment included)
    assert FAKE_KEY not in out and (run / "tuner.pkl").is_file()
    assert files_containing(tmp_path, FAKE_KEY.encode()) == []
    (summary_run,) = run.glob("wandb/offline-run-*")
    tables = [p for p in summary_run.glob("files/media/table/summary/*.table.json")]
    images = [p for p in summary_run.glob("files/media/images/summary/*.png")]
    assert {t.name.split("_")[0] for t in tables} >= {"answers", "grid", "trials", "cells"}
    assert len(images) == len(list((run / "plots").glob("*.png"))) >= 3, "every figure"
    assert b"verdicts" in next(summary_run.glob("*.wandb")).read_bytes()
    sync = next(line for line in out.splitlines() if "wandb sync" in line).split("wandb sync ", 1)[1].split()
    matched = {str(p) for pattern in sync for p in Path("/").glob(pattern.lstrip("/"))}
    assert matched == {str(p) for p in run.glob("**/wandb/offline-run-*")}, "the sync command names every W&B run"
    for trial_dir in [p.parent for p in run.glob("*/generations.jsonl")]:
        rows = [json.loads(line) for line in (trial_dir / "generations.jsonl").read_text().splitlines()]
        generations = [r for r in rows if r[metrics.KIND] == "generation"]
        board = run / TENSORBOARD_DIR / trial_name(load_study("weekend"), generations[0])
        logged = curve_points(tensorboard_run(board), "objective/this_generation")
        assert logged == [(r[metrics.GENERATION], pytest.approx(r[metrics.OBJECTIVE], rel=1e-6)) for r in generations]


def test_scratch_folders_of_dead_runs_are_swept_and_live_ones_kept(tmp_path):
    from bilevel_tune.runtime.lifecycle import Scratch

    dead = tmp_path / f"{SCRATCH_PREFIX}{2**22 + 12345}-abc"  # above Linux's default pid_max: nobody's
    alive = tmp_path / f"{SCRATCH_PREFIX}{os.getppid()}-abc"
    for folder in (dead, alive):
        (folder / "wandb-media").mkdir(parents=True)
    Scratch.sweep(str(tmp_path))
    assert not dead.exists() and alive.exists()


SCRATCH_RAY_SCRIPT = """
import json, os, tempfile, ray
from bilevel_tune.runtime import ray_init

@ray.remote(num_cpus=1)
def worker_tmp():
    path = tempfile.mkdtemp(prefix="torch-like-")  # what torch's inductor or any library would leave
    return path

with ray_init.scratch_ray(ray_init.RuntimeConfig(num_cpus=1, log_to_driver=False)):
    print(json.dumps({"worker": ray.get(worker_tmp.remote()), "driver": tempfile.gettempdir()}))
"""


def test_a_scripts_own_ray_keeps_every_temporary_file_in_a_scratch_that_goes(tmp_path):
    proc = command_process([sys.executable, "-c", SCRATCH_RAY_SCRIPT], env={"TMPDIR": str(tmp_path)})
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]
    seen = json.loads(out.strip().splitlines()[-1])
    scratch = Path(seen["driver"])
    assert scratch.parent == tmp_path and scratch.name.startswith(SCRATCH_PREFIX)
    assert Path(seen["worker"]).parent == scratch
    assert not scratch.exists() and list(tmp_path.iterdir()) == []


def test_an_optuna_run_resumes_after_ctrl_c_asking_what_an_uninterrupted_run_asks(tmp_path):
    """Optuna's TPE through the CLI (its options from --set), stopped by Ctrl-C and resumed: every generation's
    candidates are those of the same run made in-process without a stop, bit for bit."""
    import pandas as pd

    from bilevel_tune.core import outer
    from bilevel_tune.inner import InnerLoopConfig
    from bilevel_tune.inner.analytic import AnalyticLoop
    from bilevel_tune.tune_edge.trainable import Seeds, candidate_rules

    generations, settings = 40, ["optimizer=optuna", "optuna.sampler=tpe", "optuna.options=n_startup_trials=4"]
    args = study_args(
        tmp_path, "--quick", *(part for s in settings for part in ("--set", s)), **ANALYTIC, wandb="disabled",
        population=4, optimize_params="min_demand_frac", seed=42, outer_iters=generations,
    )  # fmt: skip
    proc = study_process(args)
    wait_for(lambda: any(len(g) >= 5 for g, _ in trial_records(tmp_path / "run").values()), timeout=180)
    out = interrupt(proc, signal.SIGINT)
    assert proc.returncode == 130, out[-3000:]
    ((rows, final),) = trial_records(tmp_path / "run").values()
    assert final is None and len(rows) < generations, "Ctrl-C must land mid-run"
    resumed = command_process(shlex.split(LAST_LINE.match(last_line(out))[5]))
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out[-3000:]
    ((rows, final),) = trial_records(tmp_path / "run").values()
    assert [r[metrics.GENERATION] for r in rows] == list(range(generations)) and final is not None

    study = load_study("weekend").with_budget("quick").with_overrides(
        populations=[4], seeds=[42], optimize_params=["min_demand_frac"], outer_iters=generations, inner="analytic",
        settings=dict(s.split("=", 1) for s in settings),
    )  # fmt: skip
    loop = AnalyticLoop(InnerLoopConfig.from_study(study))
    seeds = Seeds(42, study.budget.eval_episodes, study.budget.final_eval_seeds)
    optimizer, optimizer_settings = outer.chosen(study)
    state = optimizer.init(optimizer_settings, 4, 1, 42)
    for row in rows:
        candidates = optimizer.ask(state)
        assert row["candidates"] == candidates.tolist(), f"generation {row[metrics.GENERATION]} asked otherwise"
        rules = candidate_rules(study, ("min_demand_frac",), candidates)
        loop.reset(rules, seeds.generation(state.generation), range(4))
        state, _ = optimizer.tell(state, candidates, [o.objective for o in loop.evaluate(seeds.evaluation)])
    assert set(pd.read_csv(tmp_path / "run" / "trials.csv")["optimizer"]) == {"optuna"}
