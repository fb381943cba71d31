"""`--status RUN_DIR`: where a run stands, read from its folder alone — the stage and the last look, who holds the
folder, each trial's generation, and when the stage's look comes at the trials' own pace. The run folder here is
written by the runner's own writers (session_log, staging), its trials' records line by line as a trial writes them."""

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest

from bilevel_tune.cli import reevaluation, session_log, staging
from bilevel_tune.cli.main import main
from bilevel_tune.cli.options import RunOptions
from bilevel_tune.cli.status import show_status
from bilevel_tune.core import metrics
from bilevel_tune.planning.plan import hms, make_plan
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import GENERATIONS_FILE, KIND_FINAL, trial_name, write_json
from bilevel_tune.study_data.run_store import append_record

from .study_helpers import REPO, held_store, write_trial_records
from .test_plan import MODEL

NOW = dt.datetime(2026, 12, 5, 20, 0, tzinfo=dt.timezone.utc)
PACE = {("min_demand_frac",): 2.0, ("min_demand_frac", "fixed_quota"): 3.0}  # seconds a generation, by mechanism


@pytest.fixture
def run_in_stage_2(tmp_path):
    """Population 1 of the weekend in stages: stage 1 finished and looked at (every row open), stage 2 begun — its
    1-D trials one finished and one at generation 100, its 2-D ones not started."""
    study = load_study("weekend").with_overrides(populations=(1,))
    run_dir = tmp_path / "weekend-run"
    options = RunOptions(study="weekend", until_decided=True)
    with held_store(run_dir, fresh=True) as store:
        plan = make_plan(compile_design(study).stage_cells(1), study.budget, 2, MODEL)
        session_log.record_start(study, store, plan, options, "disabled")
        noise = {(1, 42): 0.02, (1, 7): -0.01}  # 2-D − 1-D by seed: one up, one down, nothing decided
        for cell in compile_design(study).stage_cells(1):
            final = 0.4 + noise.get((len(cell.optimize_params) - 1, cell.seed), 0.0)
            write_trial_records(run_dir, study, cell, 50, PACE[cell.optimize_params], final=final)
        store.refresh()
        decisions = staging.decide_run(study, store)
        staging.record_decisions(store, study, decisions)
        grown = staging.advance(study, store, decisions)
    assert grown is not None, "two seeds decide nothing: stage 2 begins"
    one_d = [c for c in compile_design(grown).stage_cells(2) if len(c.optimize_params) == 1]
    write_trial_records(run_dir, grown, one_d[0], 1000, 2.0, final=0.41)
    write_trial_records(run_dir, grown, one_d[1], 100, 2.0)
    resume = RunOptions(study="weekend", until_decided=True, resume=True)
    with held_store(run_dir) as store:
        plan = make_plan(compile_design(grown).stage_cells(2)[1:], grown.budget, 2, MODEL)
        session_log.record_start(grown, store, plan, resume, "disabled")
    return run_dir, grown


def _lines(run_dir, **kwargs):
    lines = []
    show_status(run_dir, out=lines.append, now=NOW, **kwargs)
    return lines


def test_a_stage_under_way_its_trials_and_when_its_look_comes(run_in_stage_2):
    run_dir, study = run_in_stage_2
    names = [trial_name(study, c) for c in compile_design(study).stage_cells(2)]
    lock = run_lock.acquire(run_dir, out=lambda line: None)
    try:
        lines = _lines(run_dir)
    finally:
        lock.release()
    seeds = ", ".join(map(str, compile_design(study).stage_seeds(2)))
    assert lines[0] == f"weekend-run: study weekend (appo inner loop, budget full), stage 2 of 3 (seeds {seeds})"
    assert lines[1].startswith("the last look: stage 1 at ") and lines[1].endswith(": 0 of 1 rows decided, 1 not")
    assert lines[2] == f"a session holds it (pid {os.getpid()} on host {socket.gethostname()}, since {lock.me['started_utc']})"
    assert lines[3] == "stage 2's trials: 1 of 4 finished, 1 under way, 2 not started"
    by_name = {line.split()[0]: line for line in lines[4:8]}
    assert by_name[names[0]].endswith(" finished")
    assert by_name[names[1]].endswith("generation 100 of 1000, 2.0 s a generation, 0:30:00 left")
    for two_d in names[2:]:  # the 2-D cell's pace, from stage 1's trials (3.0 s): 1000 generations
        assert by_name[two_d].endswith("not started, about 0:50:00 (its cell's latest pace in this run, 3.0 s a generation)")
    # two CPUs: the 1-D trial under way (1800 s) beside a 2-D one (3000 s); the other 2-D one starts at 1800 s;
    # one shard each: (1800 + 3000 + 3000) s of one CPU = 2.17 core-hours
    assert lines[8] == (
        "stage 2 ends (its look) after about 1:20:00 more of running (about 2026-12-05 21:20 UTC if it runs on), "
        "on 2 CPUs as the last plan runs them: about 2.17 core-hours more"
    )


def test_the_plans_last_stage_says_its_look_ends_the_run(run_in_stage_2):
    run_dir, _ = run_in_stage_2
    record = json.loads((run_dir / "study.json").read_text())
    record["study"]["decide"]["max_seeds"] = 4  # two seeds a stage: stage 2 is the plan's last
    write_json(run_dir / "study.json", record)
    lines = _lines(run_dir)
    assert ", stage 2 of 2 (seeds " in lines[0]
    assert lines[-1].startswith("stage 2 ends (its look, the plan's last) after about 1:20:00 more of running")


def test_between_sessions_no_clock_time_and_a_dead_sessions_lock_named(run_in_stage_2):
    run_dir, _ = run_in_stage_2
    assert _lines(run_dir)[2] == "no session holds it"
    assert "more of running, on 2 CPUs" in _lines(run_dir)[-1], "no session: no clock time for the look"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_json(run_dir / run_lock.RUN_LOCK, {"host": socket.gethostname(), "pid": int(gone.stdout), "beat": 3})
    assert _lines(run_dir)[2].startswith(f"its lock names a session that is gone (pid {int(gone.stdout)} ")
    assert _lines(run_dir)[2].endswith(": the next --resume takes it over")


def test_a_lock_from_another_host_is_judged_by_its_heartbeat(run_in_stage_2):
    run_dir, _ = run_in_stage_2
    lock = run_dir / run_lock.RUN_LOCK
    write_json(lock, {"host": "node-2", "pid": 4242, "started_utc": "2026-12-05T19:00:00+00:00", "beat": 7})
    held, line = run_lock.holder(run_dir)
    assert held and line.startswith("a session on another host holds it (pid 4242 on host node-2, since 2026-12-05")
    stopped = lock.stat().st_mtime - 2 * run_lock.STALE_AFTER_S
    os.utime(lock, (stopped, stopped))
    held, line = run_lock.holder(run_dir)
    assert not held and line.startswith("its lock, from another host, has not beaten for 6")
    assert line.endswith(": that session looks gone")


def test_a_run_at_its_plans_end_and_a_shipped_folder_mid_run():
    ended = _lines(REPO / "docs" / "results" / "ceiling-appo")
    assert ended[0].endswith("stage 3 of 3 (seeds 1671, 6578)")
    assert ended[2] == "the run has ended: stage 3 was its last look (the plan's end)"
    early = _lines(REPO / "docs" / "results" / "fishery-analytic")
    assert early[1].endswith("16 of 16 rows decided, 0 not")
    assert early[2] == "the run has ended: stage 2 was its last look (every row decided)"


def test_a_stage_whose_trials_all_finished_with_no_look_yet(run_in_stage_2):
    run_dir, study = run_in_stage_2
    for cell in compile_design(study).stage_cells(2):
        if not list(run_dir.glob(f"{trial_name(study, cell)}_*")):
            write_trial_records(run_dir, study, cell, 1000, 3.0, final=0.42)
    under_way = compile_design(study).stage_cells(2)[1]
    who = {metrics.POPULATION: 1, metrics.OPTIMIZE_PARAMS: list(under_way.optimize_params), metrics.SEED: under_way.seed}
    records = next(run_dir.glob(f"{trial_name(study, under_way)}_*")) / GENERATIONS_FILE
    append_record(records, {metrics.KIND: KIND_FINAL, metrics.FINAL_BEST: 0.41, **who})  # it ends at once (a test's shortcut)
    lines = _lines(run_dir)
    assert lines[3] == "stage 2's trials: 4 of 4 finished, 0 under way, 0 not started"
    assert lines[-1].startswith("stage 2's trials have all finished, with no look recorded: a run without")
    lock = run_lock.acquire(run_dir, out=lambda line: None)
    try:
        assert _lines(run_dir)[-1] == "stage 2's trials have all finished: its look comes as the session ends them"
    finally:
        lock.release()


def test_a_folder_without_trial_records_says_so(run_in_stage_2, tmp_path):
    run_dir, _ = run_in_stage_2
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "study.json").write_bytes((run_dir / "study.json").read_bytes())
    assert _lines(shipped)[-1].startswith("no trial records here (a shipped folder keeps the run's tables")


def test_a_folder_of_runs_shows_each(run_in_stage_2):
    run_dir, _ = run_in_stage_2
    lines = _lines(run_dir.parent)
    assert lines == _lines(run_dir), "one run under the folder: its status, as asked of it"
    shutil.copytree(REPO / "docs" / "results" / "fishery-analytic", run_dir.parent / "fishery-analytic")
    both = _lines(run_dir.parent)
    assert both[0].startswith("fishery-analytic: study fishery") and both[both.index("") + 1] == lines[0]


def test_the_command_line(run_in_stage_2, capsys, tmp_path):
    run_dir, _ = run_in_stage_2
    assert main(["--status", str(run_dir)]) == 0
    assert "stage 2's trials: 1 of 4 finished" in capsys.readouterr().out
    before = sorted(p.stat().st_mtime_ns for p in run_dir.rglob("*"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--status", str(empty)]) == 2
    message = f"--status {empty}: not a run folder, nor a folder of runs (no study.json in it)"
    assert capsys.readouterr().err == f"bilevel_tune.study: error: {message}\n"
    (empty / "study.json").write_text("{not json")
    assert main(["--status", str(empty)]) == 2
    assert "its study.json does not read as a run's (JSONDecodeError" in capsys.readouterr().err
    assert main(["weekend", "--status", str(run_dir)]) == 2
    assert "drop the study 'weekend'" in capsys.readouterr().err
    assert sorted(p.stat().st_mtime_ns for p in run_dir.rglob("*")) == before, "--status writes nothing"


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(run_in_stage_2):
    run_dir, _ = run_in_stage_2
    command = [sys.executable, "-m", "bilevel_tune.study", "--status", str(run_dir)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.close()  # as `| head -0` would, before the command prints anything
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()


# -- the held-out step: its jobs by learner, when the rest end, or how to resume it ----------------------------
def test_a_finished_held_out_step_says_so():
    lines = _lines(REPO / "docs" / "results" / "fishery-analytic")
    assert lines[-1] == (
        "held-out step: 96 of 96 jobs scored (analytic (its own) 24 of 24, appo 24 of 24, ppo 24 of 24, frozen 24 of "
        "24): every finished trial under every learner"
    )


@pytest.fixture
def held_out_midway(tmp_path):
    """fishery-analytic's held-out step as if stopped midway: ppo's jobs of 10 trials left, frozen's all, and its
    last session logged by the step's own writer with two jobs scored (it has not ended)."""
    run_dir = tmp_path / "fishery-analytic"
    shutil.copytree(REPO / "docs" / "results" / "fishery-analytic", run_dir)
    rows = pd.read_csv(run_dir / "heldout.csv", keep_default_na=False, na_values=[""])
    trials = sorted(rows["trial"].unique())
    dropped = (rows["learner"] == "frozen") | ((rows["learner"] == "ppo") & rows["trial"].isin(trials[:10]))
    kept = rows[~dropped]
    kept.to_csv(run_dir / "heldout.csv", index=False)
    entry = {"learners": list(rows["learner"].unique()), "started_utc": NOW.isoformat(), "jobs": 34, "cpus": 2,
             "scored": 0, "failed": 0}  # fmt: skip
    scored = SimpleNamespace(error=None, cpu_s=1.0)
    with held_store(run_dir) as store, pytest.raises(KeyboardInterrupt), reevaluation.logged_session(store, entry) as job_done:
        job_done(scored)
        job_done(scored)
        logged = json.loads((run_dir / "study.json").read_text())["reevaluations"][-1]
        assert logged["scored"] == 2 and "ended_utc" not in logged, "each job logged as it is scored"
        raise KeyboardInterrupt
    data = json.loads((run_dir / "study.json").read_text())
    assert data["reevaluations"][-1]["scored"] == 2 and data["reevaluations"][-1]["ended_utc"]
    data["reevaluations"][-1].pop("ended_utc")  # as a session killed outright leaves it
    write_json(run_dir / "study.json", data)
    ppo_s = kept[kept["learner"] == "ppo"].drop_duplicates("trial")["job_seconds"].median()
    return run_dir, ppo_s


def test_a_held_out_step_stopped_midway_says_how_to_resume(held_out_midway):
    run_dir, _ = held_out_midway
    lines = _lines(run_dir)
    assert lines[-2] == (
        "held-out step: 62 of 96 jobs scored (analytic (its own) 24 of 24, appo 24 of 24, ppo 14 of 24, frozen 0 of "
        "24)"
    )
    assert lines[-1] == (
        f"it stopped with 34 job(s) left: python -m bilevel_tune.study --reevaluate {run_dir} resumes it (its "
        "learners are recorded)"
    )


def test_a_held_out_step_under_way_times_what_it_can(held_out_midway):
    run_dir, ppo_s = held_out_midway
    lock = run_lock.acquire(run_dir, out=lambda line: None)
    try:
        lines = _lines(run_dir)
        assert lines[-1] == (
            f"its session since 2026-12-05 20:00 UTC goes on, 2 job(s) at once: ppo's 10 left about "
            f"{hms(10 * ppo_s / 2)} ({ppo_s:.0f} s a job); not timed yet: frozen's 24 (none scored)"
        )
        rows = pd.read_csv(run_dir / "heldout.csv", keep_default_na=False, na_values=[""])
        frozen = rows[rows["learner"] == "appo"].assign(learner="frozen", job_seconds=30.0)
        pd.concat([rows, frozen]).to_csv(run_dir / "heldout.csv", index=False)  # frozen's jobs scored, 30 s each
        end = NOW + dt.timedelta(seconds=10 * ppo_s / 2)
        assert _lines(run_dir)[-1] == (
            f"its session since 2026-12-05 20:00 UTC goes on, 2 job(s) at once: ppo's 10 left about "
            f"{hms(10 * ppo_s / 2)} ({ppo_s:.0f} s a job); done about {end:%Y-%m-%d %H:%M} UTC if it runs on"
        )
    finally:
        lock.release()


def test_a_packed_trial_runs_faster_once_its_pools_shorter_searches_end():
    """weekend-confirm's stage on 2 CPUs: six population-1 trials ride along a pair of population 16 (38 lakes a
    block); once the pair's 75 generations end, the six run on in blocks of 6 lakes, at that block's price."""
    from bilevel_tune.cli.status import TrialProgress, pool_left

    price = lambda lakes: 2.0 + 0.3 * lakes  # noqa: E731 - seconds a generation of a block of this many lakes
    rider = TrialProgress("pop1", 250, 10, False, 21.7, 21.7)
    host = TrialProgress("pop16", 75, 10, False, 21.7, 21.7)
    mates = [(rider, 1)] * 6 + [(host, 16)] * 2
    assert pool_left(host, mates, price) == pytest.approx(65 * 21.7)
    assert pool_left(rider, mates, price) == pytest.approx(65 * 21.7 + 175 * 21.7 * price(6) / price(38))
    alone = [(rider, 1)] * 6  # the pair gone: its own pace throughout
    assert pool_left(rider, alone, price) == pytest.approx(240 * 21.7)
    from dataclasses import replace

    from bilevel_tune.planning import packing

    study = load_study("weekend-confirm").with_overrides(populations=(1, 16), seeds=(1206, 2026, 56))
    study = replace(study, inner="tests.inner_loops:LakesLoop")  # a loop that packs, without RLlib's imports

    cells = compile_design(study).stage_cells(1)
    plan = make_plan(cells, study.budget, 2, MODEL, packs=packing.packs_of(study, cells, cpus=2))
    recorded = plan.to_dict(study)["trials"]
    pools = {t["pool"] for t in recorded if "packed" in t}
    assert pools == {0, 1, 2} and all(("pool" in t) == ("packed" in t) for t in recorded)
