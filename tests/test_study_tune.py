"""The study under real Ray Tune with the analytic inner loop: the whole weekend grid, a killed actor, resume."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bilevel_tune.cli.main import main
from bilevel_tune.core import metrics, outer
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.analytic import AnalyticLoop
from bilevel_tune.planning import calibration
from bilevel_tune.report import outputs, plots
from bilevel_tune.study_data.definition import Study, load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import SUMMARY_FILES, TENSORBOARD_DIR, json_safe, trial_name
from bilevel_tune.study_data.run_store import open_store
from bilevel_tune.study_data.trial_plan import TrialPlan
from bilevel_tune.tune_edge.trainable import Seeds, candidate_rules, searched_values

from .study_helpers import (
    kill_inner_actor_after,
    raw_generation_lines,
    study_args,
    study_process,
    trial_records,
    wait_for,
)

pytestmark = pytest.mark.ray
ANALYTIC = {"inner": "analytic", "wandb": "disabled"}


def test_the_weekend_grid_runs_under_tune(ray_cluster, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BILEVEL_CACHE_DIR", str(tmp_path / "cache"))
    settings = load_study("weekend").with_budget("quick").with_overrides(inner="analytic")
    assert calibration.overheads("disabled", settings)[1] == "overheads of the 2-core reference machine"
    assert main(study_args(tmp_path, "--quick", **ANALYTIC, outer_iters=4)) == 0
    # a complete fresh run teaches the next dry run with these settings its overheads
    assert calibration.overheads("disabled", settings)[1].startswith("overheads: the median of this machine's runs")
    run = tmp_path / "run"
    records = trial_records(run)
    study_record = json.loads((run / "study.json").read_text())
    assert len(records) == 8
    for name, (generations, final) in records.items():
        assert [g[metrics.GENERATION] for g in generations] == [0, 1, 2, 3], name
        assert final is not None and np.isfinite(final[metrics.FINAL + "best"])
        trial_dir = run / name
        assert len(list(trial_dir.glob("checkpoint_*"))) >= 1
        assert (trial_dir / "progress.csv").read_text().count("\n") == 1 + 4 + 1  # header, 4 generations, final
        assert not list(trial_dir.glob("events.out.tfevents.*")), "Tune's own TensorBoard logger is off"
        # the trial ran from its plan, which its params.json shows whole: seeds, optimiser, loop, world, rules
        plan = json.loads((trial_dir / "params.json").read_text())[metrics.TRIAL]
        recorded = Study.from_record(study_record)
        assert plan == json_safe(TrialPlan.of(recorded, compile_design(recorded).cell_of(generations[0])).to_dict())
        assert plan["seeds"]["final"] == Seeds(plan["cell"]["seed"], 1, recorded.budget.final_eval_seeds).final
        assert plan["inner"]["loop"] == "analytic" and plan["inner"]["config"]["world_kind"] == "fresh-water"
        assert generations[0][metrics.SETTINGS] == plan["settings"] and plan["name"] == name.rsplit("_", 2)[0]
    boards = {p.name for p in (run / TENSORBOARD_DIR).iterdir()}
    assert boards == {trial_name(load_study("weekend"), r[0][0]) for r in records.values()} | {"summary"}
    study = json.loads((run / "study.json").read_text())
    assert study["study"]["name"] == "weekend" and study["provenance"]["versions"]["ray"]
    numerics = study["sessions"][0]["numerics"]  # what decides the last bits beside the code (benchmarks/numerics.py)
    assert numerics["blas"] and all(name.startswith("openblas ") for name in numerics["blas"]) and numerics["simd"]
    out = capsys.readouterr().out
    assert "8 finished, 0 errored, 0 interrupted of 8 trials" in out and "## Answers" in out and "ceiling 0.2500" in out
    figures = ("best_so_far_evaluations", "best_so_far_wall", "final_pairs", "effects", "ceiling", "grid_heatmap")
    for f in (*SUMMARY_FILES, "generations.csv.gz", *(f"plots/{name}.png" for name in figures)):
        assert (run / f).is_file(), f
    assert "SHORT RUN (budget quick, outer_iters=4)" in (run / "summary.md").read_text()

    # the search, where it happened: the searched rules' plane in physical units, with the mean's path
    figure = plots.plot_population(outputs.summarise(open_store(run)))
    assert figure._suptitle.get_text().endswith("study weekend · inner loop analytic · budget quick, outer_iters=4")
    planes = [ax for ax in figure.axes if ax.get_xlabel() == "min_demand_frac" and ax.get_ylabel() == "fixed_quota"]
    assert len(planes) == 4
    for ax in planes:
        assert ax.get_xlim() == (0.0, 0.35) and ax.get_ylim() == (0.6, 0.95)
        assert any(line.get_label() == "search mean's path" for line in ax.get_lines())
    lines = [ax for ax in figure.axes if ax.get_xlabel() == "min_demand_frac" and ax.get_ylabel() == "objective"]
    assert len(lines) == 4 and all(0.0 <= x <= 0.35 for ax in lines for x in ax.collections[0].get_offsets()[:, 0])

    # missing and crashed trials are reported, not dropped
    names = sorted(records)
    (run / names[0] / "generations.jsonl").unlink()
    crashed = run / names[1] / "generations.jsonl"
    crashed.write_text("".join(crashed.read_text().splitlines(keepends=True)[:2]))
    trials = outputs.summarise(open_store(run)).trials
    assert len(trials) == 8
    assert sorted(trials["status"]) == ["complete"] * 6 + ["missing", "running or crashed"]
    assert "Not complete: 2 trial(s)" in outputs.render(outputs.summarise(open_store(run)))


def expected_trajectory(study, population, params, seed, generations):
    """The same run of the study's optimiser, in-process and uninterrupted."""
    loop = AnalyticLoop(InnerLoopConfig.from_study(study))
    seeds = Seeds(seed, study.budget.eval_episodes, study.budget.final_eval_seeds)
    optimizer, settings = outer.chosen(study)
    state = optimizer.init(settings, population, len(params), seed)
    trajectory = []
    for _ in range(generations):
        candidates = optimizer.ask(state)
        loop.reset(candidate_rules(study, params, candidates), seeds.generation(state.generation), range(population))
        objectives = [o.objective for o in loop.evaluate(seeds.evaluation)]
        state, m = optimizer.tell(state, candidates, objectives)
        trajectory.append((m[metrics.BEST_OBJECTIVE], state.sigma, tuple(state.mean)))
    return trajectory


def test_a_killed_actor_retries_from_the_checkpoint_and_changes_nothing(ray_cluster, tmp_path):
    generations = 25
    args = study_args(
        tmp_path,
        **ANALYTIC,
        population=16,
        optimize_params="min_demand_frac,fixed_quota",
        seed=42,
        outer_iters=generations,
    )
    killer, killed = kill_inner_actor_after(tmp_path / "run", generations=3, timeout=120)
    assert main(args) == 0
    killer.join(timeout=5)
    ((name, (rows, final)),) = trial_records(tmp_path / "run").items()
    assert [r[metrics.GENERATION] for r in rows] == list(range(generations))  # no gap, no duplicate after dedup
    assert final is not None
    pids = {r[metrics.PID] for r in rows}
    assert killed["pid"] in pids and len(pids) == 2, "the retry must run in a new actor"
    study = load_study("weekend").with_overrides(
        populations=[16],
        seeds=[42],
        optimize_params=["min_demand_frac", "fixed_quota"],
        outer_iters=generations,
        inner="analytic",
    )
    expected = expected_trajectory(study, 16, ("min_demand_frac", "fixed_quota"), 42, generations)
    actual = [
        (r[metrics.BEST_OBJECTIVE], r[metrics.SIGMA], tuple(r[metrics.MEAN_RULE + p] for p in ("min_demand_frac", "fixed_quota")))
        for r in rows
    ]
    for (best_e, sigma_e, mean_u), (best_a, sigma_a, mean_phys) in zip(expected, actual):
        assert best_a == best_e and sigma_a == sigma_e
        assert tuple(searched_values(study, ("min_demand_frac", "fixed_quota"), mean_u).values()) == mean_phys
    raw = raw_generation_lines(tmp_path / "run" / name / "generations.jsonl")
    assert len(raw) >= generations  # the retried generation may be written twice; readers deduplicate


def test_failed_candidates_rank_worst_and_an_all_failed_trial_stops_alone(ray_cluster, tmp_path, capsys):
    args = study_args(
        tmp_path,
        inner="tests.inner_loops:NaNPolicyLoop",
        wandb="disabled",
        population="1,2",
        optimize_params="min_demand_frac",
        seed=3,
        outer_iters=6,
    )
    assert main(args) == 0
    by_population = {g[0]["population"]: (g, final) for g, final in trial_records(tmp_path / "run").values()}
    lonely, lonely_final = by_population[1]
    assert len(lonely) == 3 and all(g[metrics.FAILED] == 1 for g in lonely)
    assert "every candidate failed in 3 generations in a row" in lonely_final["stop_reason"]
    pair, pair_final = by_population[2]
    assert len(pair) == 6 and all(g[metrics.FAILED] == 1 for g in pair)  # candidate 0 fails every time, and is counted
    assert all(g["outcomes"][0]["failed"] and g["outcomes"][0]["objective"] is None for g in pair)
    assert all(
        g[metrics.BEST_OBJECTIVE] == max(h["outcomes"][1]["objective"] for h in pair[: i + 1]) for i, g in enumerate(pair)
    )
    assert pair_final is not None and "stop_reason" not in pair_final
    out = capsys.readouterr().out
    assert "stopped" in out and "every candidate failed" in out


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _lose_the_checkpoint_tunes_state_names(trial_dir: Path) -> str:
    """What a session killed mid-rotation leaves (Tune deletes a checkpoint before it saves the state that stops
    naming it): whichever checkpoint the saved state names is gone, and a newer one is there."""
    *older, newest = sorted(trial_dir.glob("checkpoint_*"))
    for checkpoint in older:
        shutil.rmtree(checkpoint)
    later = f"checkpoint_{int(newest.name.split('_')[1]) + 10:06d}"
    newest.rename(trial_dir / later)
    return later


def test_a_sigkilled_driver_resumes_from_the_newest_checkpoint_without_rerunning_finished_trials(tmp_path):
    generations = 100  # the second trial's run: the seconds in which the driver is killed
    args = study_args(
        tmp_path, "--quick", **ANALYTIC, population=16, optimize_params="min_demand_frac", seed="42,7",
        outer_iters=generations, max_concurrent=1,
    )  # fmt: skip
    proc = study_process(args)

    def one_finished_one_started():
        recs = trial_records(tmp_path / "run")
        finished = [n for n, (_, final) in recs.items() if final]
        started = [n for n, (g, final) in recs.items() if len(g) >= 5 and not final]  # Tune's state names one
        return (finished, started) if finished and started else None

    (finished,), (started,) = wait_for(one_finished_one_started, timeout=240, interval=0.05)
    lines_before = (tmp_path / "run" / finished / "generations.jsonl").read_text()
    proc.kill()  # SIGKILL the driver alone: no handler, no cleanup
    proc.communicate(timeout=60)
    newest = _lose_the_checkpoint_tunes_state_names(tmp_path / "run" / started)
    # Ray's fate sharing takes the embedded cluster down at once, but for its dashboard and
    # runtime-env agents, which notice ~90 s later; the resumed run starts a cluster of its own.
    resumed = study_process(study_args(tmp_path, "--resume", **ANALYTIC))
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out[-3000:]
    assert f"restoring from {newest}, nothing lost" in out, out[-3000:]
    assert (tmp_path / "run" / finished / "generations.jsonl").read_text() == lines_before, "a finished trial was rerun"
    for rows, final in trial_records(tmp_path / "run").values():
        assert [g[metrics.GENERATION] for g in rows] == list(range(generations)) and final is not None
    killed, resumed_session = json.loads((tmp_path / "run" / "study.json").read_text())["sessions"]
    assert "wall_s" not in killed and "ended_utc" not in killed, "a SIGKILLed session writes no end"
    assert (resumed_session["exit_code"], resumed_session["finished"]) == (0, 2) and resumed_session["wall_s"] > 0
    wait_for(lambda: not _group_alive(resumed.pid), timeout=60)


def test_an_unconfirmed_learner_stop_replaces_the_actor_every_generation(ray_cluster, tmp_path):
    args = study_args(
        tmp_path,
        inner="tests.inner_loops:UnconfirmedStopLoop",
        wandb="disabled",
        population=2,
        optimize_params="min_demand_frac",
        seed=5,
        outer_iters=2,
    )
    assert main(args) == 0
    ((rows, final),) = trial_records(tmp_path / "run").values()
    assert len({r[metrics.PID] for r in rows}) == 2, "each generation must run in a fresh actor"
    assert final is not None


def test_the_optimizers_study_runs_every_optimiser_under_tune_and_counts_evaluations_to_eps(ray_cluster, tmp_path):
    """The issue's quick run, cut to one mechanism and one seed: es, cma, bo and random, each trial to its end, and
    the summary's comparison at equal evaluations (optimizers.csv, its figure)."""
    args = study_args(tmp_path, "--quick", study="optimizers", optimize_params="min_demand_frac", seed=42, **ANALYTIC)
    assert main(args) == 0
    run = tmp_path / "run"
    trials = pd.read_csv(run / "trials.csv")
    assert sorted(trials["optimizer"]) == ["bo", "cma", "es", "random"]
    assert (trials["status"] == "complete").all() and (trials["evaluations"] == 12).all()
    assert (trials["optimizer_s"] > 0).all()
    table = pd.read_csv(run / "optimizers.csv")
    assert list(table["optimizer"]) == ["es", "cma", "bo", "random"] and "evaluations_to_eps" in table
    assert (table["seeds"] == 1).all() and table["incumbent_regret"].notna().all()
    from bilevel_tune.report.optimizers import scan_noise

    eps = float(table["eps"].iloc[0])  # the rules scan's own noise at its best (the margin where it has none)
    assert eps == (scan_noise(pd.read_csv(run / "scan.csv")) or 0.01)
    assert f"## Optimisers at equal evaluations (ε = {eps:g})" in (run / "summary.md").read_text()
    assert {"regret_1/16", "regret_1", "regret_auc"} <= set(table.columns)
    assert (run / "plots" / "optimizers.png").is_file()
