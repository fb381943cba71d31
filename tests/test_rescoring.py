"""Re-scoring a finished run: more final seeds (finals.csv), the incumbents of earlier moments (anytime.csv), where
each row's noise is, what the answers needed, and the bad input each option refuses — the pure parts without Ray,
then a quick analytic study re-scored end to end."""

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from bilevel_tune.cli.options import UsageError
from bilevel_tune.cli.rescoring import Budget, TrialRun, parse_budgets
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.run_folder import Cell
from bilevel_tune.study_data.run_store import open_store
from bilevel_tune.verdicts import family, noise

WEEKEND = load_study("weekend")


def test_budgets_are_counts_or_fractions_and_anything_else_is_one_line():
    assert parse_budgets("1/8,1/4, 1000") == (
        Budget("1/8", fraction=Fraction(1, 8)), Budget("1/4", fraction=Fraction(1, 4)), Budget("1000", count=1000))
    assert parse_budgets("") == ()
    assert [b.evaluations(4800) for b in parse_budgets("1/8,1/1,1000")] == [600, 4800, 1000]
    for bad, said in (("0", "must be above zero"), ("x", "neither an integer nor a fraction"),
                      ("3/2", "a fraction above 1"), ("1/0", "neither an integer nor a fraction")):  # fmt: skip
        with pytest.raises(UsageError, match=said):
            parse_budgets(bad)


def _trial(population: int, generations: int) -> TrialRun:
    """A trial whose best so far improves at generations 2 and 5, its search mean walking up by 0.01 a generation."""
    rows = []
    best = -1.0
    for g in range(generations):
        found = {2: 0.5, 5: 0.6}.get(g, 0.1 * g / generations)
        best = max(best, found)
        rows.append({"trial": "t", "generation": g, "evaluations": (g + 1) * population, "best_so_far": best,
                     "generation_best": found, "generation_best/min_demand_frac": 0.01 * g,
                     "mean/min_demand_frac": 0.1 + 0.01 * g})  # fmt: skip
    cell = Cell(population, ("min_demand_frac",), 42, generations)
    fixed = {"fixed_quota": 0.85}
    return TrialRun(cell, "t", generations * population, pd.DataFrame(rows), fixed,
                    {**fixed, "min_demand_frac": 0.99}, {**fixed, "min_demand_frac": 0.98})  # fmt: skip


def test_an_incumbent_is_read_at_the_last_generation_at_or_before_its_evaluations():
    run = _trial(population=4, generations=8)
    best, mean = run.incumbent(17)  # generations 0..3 (16 evaluations): the best of generation 2, the mean of 3
    assert best == {"fixed_quota": 0.85, "min_demand_frac": 0.02} and mean["min_demand_frac"] == pytest.approx(0.13)
    best, mean = run.incumbent(31)  # generations 0..6: the best found at 5
    assert best["min_demand_frac"] == 0.05 and mean["min_demand_frac"] == pytest.approx(0.16)
    assert run.incumbent(32) == (run.best, run.mean)  # the whole budget: the trial's own final rules


def _scores(effect: float, run_sd: float, eval_sd: float, seeds: int, finals: int, shared: float, rng):
    """Two groups' scores by run seed and final seed: y = μ + run noise + re-evaluation noise, whose share
    `shared` the groups' final seeds have in common."""
    a, b = ((100, ("x",), ()), (101, ("x",), ()))
    out = {a: {}, b: {}}
    for s in range(seeds):
        common = rng.normal(0, eval_sd, finals)
        for g, mu in ((a, 0.0), (b, effect)):
            r = rng.normal(0, run_sd / np.sqrt(2))
            own = rng.normal(0, eval_sd, finals)
            e = np.sqrt(shared) * common + np.sqrt(1 - shared) * own
            out[g][s] = {j: mu + r + e[j] for j in range(finals)}
    return a, b, out


def test_the_noise_split_recovers_the_run_and_re_evaluation_variances_it_was_drawn_with():
    a, b, scores = _scores(0.01, run_sd=0.004, eval_sd=0.01, seeds=400, finals=16, shared=0.7,
                           rng=np.random.default_rng(3))  # fmt: skip
    split = noise.split(family.Comparison("population", a, b), scores, recorded=3)
    eval_var = 2 * 0.01**2 * (1 - 0.7)  # the shared part cancels in B − A
    assert split.eval_var == pytest.approx(eval_var, rel=0.05)
    assert split.run_var == pytest.approx(0.004**2, rel=0.25)
    assert split.effect == pytest.approx(0.01, abs=0.001)
    assert split.correlation == pytest.approx(0.7, abs=0.05)
    assert split.eval_share == pytest.approx((eval_var / 3) / (0.004**2 + eval_var / 3), abs=0.05)
    # Cochran: a costly run and a cheap final seed buy final seeds until the re-evaluation's part is small
    assert noise.final_seeds_for(split, cost_run=1000, cost_eval=2) > 16 > noise.final_seeds_for(split, 10, 2)


def test_one_final_seed_splits_nothing():
    a, b, scores = _scores(0.0, 0.01, 0.01, seeds=4, finals=1, shared=0.5, rng=np.random.default_rng(0))
    assert noise.split(family.Comparison("population", a, b), scores, recorded=1) is None


@pytest.mark.ray
def test_a_quick_run_re_scored_on_more_final_seeds_and_at_half_its_budget(ray_cluster, tmp_path, capsys):
    """The confirmatory weekend's quick budget, one seed (population 1: 32 generations; 16: 3, whose second is 32
    evaluations): population 16's trials also re-score their incumbent at 32 evaluations in their own final
    re-evaluation (`[decide] equal_budget`), and a later `--at-evaluations 32` scores the same rules to the last bit."""
    from bilevel_tune.cli.main import main
    from bilevel_tune.study_data import run_lock
    from bilevel_tune.study_data.run_folder import read_records

    from .study_helpers import study_args

    args = study_args(tmp_path, "--quick", study="weekend-confirm", name="q", inner="analytic", wandb="disabled", seed=42)
    assert main(args) == 0
    run = tmp_path / "q"
    finals = pd.read_csv(run / "finals.csv")
    trials = pd.read_csv(run / "trials.csv")
    assert len(finals) == len(trials) * 2 * 2  # every trial, both rule sets, its 2 recorded final seeds
    by_trial = finals[finals["rules"] == "best-so-far"].groupby("trial")["value"].mean()
    names = trials["trial"].str.rsplit("_", n=2).str[0]
    assert np.allclose(names.map(by_trial), trials["final_objective"], rtol=0, atol=1e-15)
    answers = pd.read_csv(run / "answers.csv")
    assert answers["confirmatory"].all()
    equal = answers[answers["comparison"].str.endswith(", at equal evaluations (32 each)")]  # planned: in the family
    assert len(equal) == 3 and set(equal["evaluations per run A / B"]) == {"32 / 32"}
    larger = trials["population"] == 16
    assert (trials.loc[larger, "evaluations@32"] == 32).all() and trials.loc[~larger, "evaluations@32"].isna().all()
    recorded = {}
    for path in run.glob("*/generations.jsonl"):
        _, final = read_records(path)
        if final.get("final_at_evaluations"):
            recorded[path.parent.name.rsplit("_", 2)[0]] = final["final_at_evaluations"]["32"]
    assert len(recorded) == larger.sum()
    from bilevel_tune.cli.run_record import spent

    # 2 × 32 + 2 × 48 evaluations; 4 trials × 2 final seeds × 2 rule sets, and population 16's 2 × 2 × 2 at 32
    assert spent(open_store(run))[0].startswith("- farm trainings: 160 evaluations + 24 final re-evaluation trainings, 8 of them at "
                                    "smaller budgets (equal evaluations) = 184, over its 4 search trial(s)")
    assert "**Confirmatory**: its decision plan (fingerprint " in (run / "summary.md").read_text()
    capsys.readouterr()

    for bad, said in ((["--final-seeds", "1"], "--final-seeds 1 is below the 2 final seeds the run recorded"),
                      (["--at-evaluations", "33"], "33 evaluations is beyond trial"),
                      (["--at-evaluations", "1/8"], "less than one generation of trial"),
                      (["--at-evaluations", "x"], "is neither an integer nor a fraction")):  # fmt: skip
        assert main(["--reevaluate", str(run), *bad]) == 2
        assert said in capsys.readouterr().err
    with run_lock.held(run, fresh=False):
        assert main(["--reevaluate", str(run), "--final-seeds", "3"]) == 2
    assert "the run is still running (a session holds it" in capsys.readouterr().err
    assert not (run / "anytime.csv").exists()

    again = ["--reevaluate", str(run), "--final-seeds", "4", "--at-evaluations", "1/2,1/1,32", "--wandb", "disabled"]
    assert main(again) == 0
    out = capsys.readouterr().out
    # seeds 3 and 4 of each trial, then each trial at half its budget, and population 16's at 32 evaluations; at a
    # whole budget (population 1's at 32 too), copied from finals.csv
    assert "re-scoring: 10 job(s), 20 final seed(s) × 2 rule sets, on " in out and "6 incumbent(s) at a whole" in out
    finals = pd.read_csv(run / "finals.csv")
    assert len(finals) == len(trials) * 2 * 4 and not finals.duplicated(["trial", "rules", "final_seed"]).any()
    assert main(again) == 0  # resumed: every job ran, nothing is left
    assert "re-scoring: 0 job(s)" in capsys.readouterr().out
    anytime = pd.read_csv(run / "anytime.csv")
    assert len(anytime) == len(trials) * 3 * 2 * 2  # trials × budgets × rule sets × recorded final seeds
    for name, scored in recorded.items():  # the trial's own re-scoring at 32 evaluations, reproduced bit for bit
        mine = anytime[(anytime["trial"] == name) & (anytime["evaluations"] == 32)].sort_values("final_seed")
        for rules, key in (("best-so-far", "best"), ("search mean", "mean")):
            assert mine[mine["rules"] == rules]["value"].tolist() == scored[key]
    whole = anytime[(anytime["asked"] == "1/1") & (anytime["rules"] == "best-so-far")].groupby("trial")["value"].mean()
    assert np.allclose(names.map(whole), trials["final_objective"], rtol=0, atol=1e-15)  # copied from finals.csv
    summary = (run / "summary.md").read_text()
    assert "## What the answers needed" in summary and "**Exploratory**: the budgets were read after the run." in summary
    # read after the run at 32 evaluations each, the planned rows' scores again: the same answers
    assert "Equal-budget rows" in summary and "at equal evaluations (32 evaluations each): " in summary
    assert "## Where the noise is" in summary
    verdicts = json.loads((run / "verdicts.json").read_text())  # one run seed: the run's variance is not known
    assert {r["final_seeds"] for r in verdicts["noise"]} == {4} and verdicts["needed"]["exploratory"]
    planned = {c["comparison"]: c["effect"] for c in verdicts["answers"]["comparisons"]}
    read_after = [r for r in verdicts["needed"]["rows"] if r["comparison"].endswith("(32 each)")]
    assert len(read_after) == 3 and all(r["B − A [95 % CI]"] == f"{planned[r['comparison']]:+.4f}" for r in read_after)
    assert all(r["eval_var"] > 0 and r["run_var"] is None for r in verdicts["noise"])
    sessions = json.loads((run / "study.json").read_text())["reevaluations"]
    assert sessions[-1]["rescoring"] == {"final_seeds": 4, "at_evaluations": ["1/2", "1/1", "32"]}
    scored = [e for e in sessions if e.get("scored")]
    assert scored
    for entry in scored:  # each job's CPU seconds, OS-measured, beside their sum
        assert len(entry["job_core_s"]) == entry["scored"] and all(v > 0 for v in entry["job_core_s"].values())
        assert sum(entry["job_core_s"].values()) == pytest.approx(entry["core_s"], abs=0.1 * entry["scored"])


def test_a_budget_below_one_generation_of_a_trial_is_refused():
    from bilevel_tune.cli.rescoring import check_budgets

    small, large = _trial(population=1, generations=8), _trial(population=16, generations=8)
    check_budgets(parse_budgets("1/8,1/1"), [small, large])  # a generation of 16 at least, within both budgets
    with pytest.raises(UsageError, match="less than one generation of trial t \\(population 16\\); allowed: 16 or more"):
        check_budgets(parse_budgets("1/16"), [small, large])
    with pytest.raises(UsageError, match="9 evaluations is beyond trial t's budget of 8"):
        check_budgets(parse_budgets("9"), [small, large])
