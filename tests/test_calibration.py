"""Calibration: probes of the real inner loop, cached per machine and settings, and overheads learned from runs."""

import json

import pytest

from bilevel_tune.planning import calibration
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("BILEVEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration, "machine_load", lambda: 0.0)  # a quiet machine, whatever ran before
    return tmp_path / "cache" / calibration.STORE_FILE


@pytest.mark.long
def test_a_probe_is_measured_once_then_read_from_the_store(store):
    study = load_study("weekend").with_budget("quick").with_overrides(inner="analytic")
    first, how = calibration.inner_loop_figures(study, thread_cap=1, busy_cpus=2)
    assert how.startswith("probed now") and store.is_file()
    # fitted lines, never negative (how small the analytic loop's train is depends on the machine's load)
    assert first["evaluate_per_candidate_s"] > 0 and min(v for v in first.values() if isinstance(v, float)) >= 0
    again, how = calibration.inner_loop_figures(study, thread_cap=1, busy_cpus=2)
    assert how.startswith("cached probe") and again == first
    other = study.with_overrides(populations=[4])  # other settings, another probe
    assert calibration.inner_loop_figures(other, 1, 2, probe_if_missing=False)[0] is None


def test_a_probe_that_runs_past_its_time_leaves_the_plan_to_work_alone_and_says_why(store, monkeypatch, capsys):
    from bilevel_tune.cli.main import main

    monkeypatch.setattr(calibration, "PROBE_TIMEOUT_S", 0.01)  # a machine so busy the probe cannot finish
    study = load_study("weekend").with_budget("quick").with_overrides(inner="analytic")
    figures, how = calibration.inner_loop_figures(study, thread_cap=1, busy_cpus=2)
    assert figures is None and how.startswith("not calibrated: the calibration probe took over 0.01 s")
    assert not store.is_file()  # nothing cached: the next dry run probes again
    assert main(["weekend", "--quick", "--inner", "analytic", "--dry-run"]) == 0  # a plan, no traceback
    out = capsys.readouterr().out
    assert "by work alone: not calibrated: the calibration probe took over" in out and "\nETA " not in out
    assert out.strip().splitlines()[-1] == "no ETA: this machine has no figures for these settings"


def test_overheads_come_from_the_real_runs_of_this_machine_with_these_settings(store):
    quick = load_study("weekend").with_budget("quick")
    assert calibration.overheads("offline", quick)[1] == "overheads of the 2-core reference machine"
    calibration.learn_overheads(
        "offline", quick, {"launch_s": 7.0, "finish_s": 4.0, "trial_overhead_s": 2.5, "report_s": 0.1}
    )
    learned, how = calibration.overheads("offline", quick)
    assert learned == {"launch_s": 7.0, "finish_s": 4.0, "trial_overhead_s": 2.5, "report_s": 0.1}
    assert how.startswith("overheads: the median of this machine's runs")
    assert calibration.overheads("disabled", quick)[1] == "overheads of the 2-core reference machine"
    full = load_study("weekend")  # 150-day seasons, bigger networks: a tiny run's start says nothing of theirs
    assert calibration.overheads("offline", full)[1] == "overheads of the 2-core reference machine"
    assert calibration.overheads("offline", quick.with_overrides(seeds=[3]))[0] == learned  # the grid is not a setting
    assert json.loads(store.read_text())["overheads"]


def test_one_odd_run_does_not_move_the_eta_the_median_of_the_last_runs_does(store):
    quick = load_study("weekend").with_budget("quick")
    for overhead in (12.0, 14.0, 13.0, 87.0):  # a run under load (or with a slow start) among ordinary ones
        calibration.learn_overheads(
            "offline", quick, {**dict.fromkeys(calibration.OVERHEAD_KEYS, 1.0), "trial_overhead_s": overhead}
        )
    learned, how = calibration.overheads("offline", quick)
    assert learned["trial_overhead_s"] == 13.5 and "4 runs" in how
    for _ in range(calibration.OVERHEAD_HISTORY):
        calibration.learn_overheads(
            "offline", quick, {**dict.fromkeys(calibration.OVERHEAD_KEYS, 1.0), "trial_overhead_s": 20.0}
        )
    assert calibration.overheads("offline", quick)[0]["trial_overhead_s"] == 20.0  # only the last runs count


def test_a_store_of_the_release_before_the_history_still_reads(store):
    quick = load_study("weekend").with_budget("quick")
    key = calibration._overheads_key("offline", quick)
    flat = {"launch_s": 7.0, "finish_s": 4.0, "trial_overhead_s": 2.5, "report_s": 0.1, "measured": "2026-11-30 12:00"}
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps({"overheads": {key: flat}}))
    assert calibration.overheads("offline", quick)[0]["trial_overhead_s"] == 2.5
    calibration.learn_overheads("offline", quick, {**flat, "trial_overhead_s": 3.5})
    assert calibration.overheads("offline", quick)[0]["trial_overhead_s"] == 3.0


def test_an_unwritable_store_costs_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("BILEVEL_CACHE_DIR", str(blocker / "cache"))
    quick = load_study("weekend").with_budget("quick")
    calibration.learn_overheads("offline", quick, dict.fromkeys(calibration.OVERHEAD_KEYS, 1.0))
    assert calibration.overheads("offline", quick)[1] == "overheads of the 2-core reference machine"


@pytest.mark.ray
@pytest.mark.slow
def test_the_appo_probe_measures_real_shards(store):
    study = load_study("weekend").with_budget("quick").with_overrides(populations=[4])
    figures, how = calibration.inner_loop_figures(study, thread_cap=1, busy_cpus=2)
    assert how.startswith("probed now: 2 shard actor(s) at once, blocks of 1 and 4 candidates")
    # At the quick budget a batched block of 4 costs about what a block of 1 does: either line's slope may
    # fit to 0 within the noise (never below), so what must be measured is each line's total and the rebuild.
    lines = ("train_fixed_s", "train_per_candidate_s", "evaluate_fixed_s", "evaluate_per_candidate_s")
    assert all(figures[key] >= 0 for key in lines)
    assert figures["train_fixed_s"] + figures["train_per_candidate_s"] > 0
    assert figures["evaluate_fixed_s"] + figures["evaluate_per_candidate_s"] > 0
    assert figures["rebuild_s"] > 0


def test_trial_figures_recover_the_overhead_that_makes_the_schedule_last_as_long_as_the_fit():
    from bilevel_tune.core import metrics
    from bilevel_tune.planning.plan import CostModel, make_plan

    study = load_study("weekend").with_overrides(
        populations=[2], seeds=[1, 2], optimize_params=["fixed_quota"], outer_iters=3
    )
    cells = compile_design(study).cells
    plan = make_plan(cells, study.budget, 2, CostModel.by_work("test"), cpus_per_trial=1)

    def records(cell, seconds, final_s):
        rows = [{**cell.as_config(), metrics.GENERATION: g, metrics.SEC_PER_GEN: s} for g, s in enumerate(seconds)]
        return rows, {metrics.SEC_FINAL: final_s}

    # generation 0 starts the shards (4 s more than steady); reports add 0.5 s a generation
    trials = [
        (*records(cells[0], [5.0, 1.0, 1.0], 2.0), 5.0 + 1.0 + 1.0 + 2.0 + 3 * 0.5),
        (*records(cells[1], [6.0, 2.0, 2.0], 1.0), 6.0 + 2.0 + 2.0 + 1.0 + 3 * 0.5),
    ]
    inside = [t[2] - 4.0 for t in trials]  # a trial's own time without its shards' start
    figures = calibration.trial_figures(plan, trials, fit_wall=max(inside) + 7.0)  # both at once on 2 CPUs
    assert figures["trial_overhead_s"] == pytest.approx(7.0, abs=1e-6)
    assert figures["report_s"] == pytest.approx(0.5)
    assert calibration.trial_figures(plan, [([], None, 1.0)], fit_wall=10.0) is None  # a trial left no record


@pytest.mark.long
def test_a_probe_taken_on_a_busy_machine_says_so_and_a_quiet_machine_measures_again(store, monkeypatch):
    study = load_study("weekend").with_budget("quick").with_overrides(inner="analytic")
    monkeypatch.setattr(calibration, "machine_load", lambda: 1.6)  # another study holds the CPUs
    busy, how = calibration.inner_loop_figures(study, thread_cap=1, busy_cpus=2)
    assert busy["busy"] and "taken on a busy machine (load 1.6 per CPU): the ETA runs long" in how
    monkeypatch.setattr(calibration, "machine_load", lambda: 0.8)  # between the thresholds: keep what is known
    assert calibration.inner_loop_figures(study, 1, 2)[1].startswith("cached probe")
    monkeypatch.setattr(calibration, "machine_load", lambda: 0.1)  # quiet now: measure again, and keep that
    quiet, how = calibration.inner_loop_figures(study, 1, 2)
    assert how.startswith("probed now") and not quiet["busy"] and "busy" not in how
    assert calibration.inner_loop_figures(study, 1, 2)[1].startswith("cached probe")
