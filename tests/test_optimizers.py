"""The outer optimisers of docs/es.md through their one ask/tell contract (core/outer.py), and what a study checks of
them; the Tune run of the optimizers study is in test_study_tune.py."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from bilevel_tune.base.sections import BOSettings, CMASettings, ESSettings, OptunaSettings
from bilevel_tune.core import es, metrics, outer
from bilevel_tune.report import optimizers as report
from bilevel_tune.study_data.definition import Study, StudyError, load_study
from bilevel_tune.study_data.design import compile_design

TARGET = np.array([0.3, 0.7])
SETTINGS = {"es": ESSettings(), "cma": CMASettings(), "bo": BOSettings(initial=4, raw_samples=64, restarts=2),
            "random": None, "optuna": OptunaSettings()}  # fmt: skip  # Optuna's TPE
GENERATIONS = {"es": 30, "cma": 30, "bo": 4, "random": 30, "optuna": 8}  # BO fits a GP each generation: fewer


def quadratic(candidates):
    return -((np.asarray(candidates) - TARGET[: np.shape(candidates)[1]]) ** 2).sum(axis=1)


def run(name, dim=2, seed=42, population=4, generations=None, objective=quadratic, state=None):
    optimizer = outer.load(name)
    state = state or optimizer.init(SETTINGS[name], population, dim, seed)
    trajectory = []
    for _ in range(generations or GENERATIONS[name]):
        candidates = optimizer.ask(state)
        state, told = optimizer.tell(state, candidates, objective(candidates))
        trajectory.append((candidates, told))
    return state, trajectory


@pytest.mark.parametrize("name", list(outer.OPTIMIZERS))
def test_each_optimiser_asks_in_the_box_the_same_for_the_same_seed_and_moves_towards_the_optimum(name):
    state, trajectory = run(name)
    again, trajectory_again = run(name)
    other, _ = run(name, seed=7)
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(trajectory, trajectory_again))
    assert state.best_candidate == again.best_candidate and other.best_candidate != state.best_candidate
    for candidates, told in trajectory:
        assert candidates.shape == (4, 2) and np.all((candidates >= 0) & (candidates <= 1))
        assert set(told) >= {metrics.GENERATION, metrics.MEAN, metrics.BEST_OBJECTIVE, metrics.BEST_CANDIDATE, metrics.FAILED, metrics.ALL_FAILED}
    bests = [m[metrics.BEST_OBJECTIVE] for _, m in trajectory]
    assert bests == sorted(bests) and bests[-1] > quadratic(np.full((1, 2), 0.5))[0]
    assert np.linalg.norm(np.asarray(state.incumbent) - TARGET) < 0.25


@pytest.mark.parametrize("name", list(outer.OPTIMIZERS))
def test_a_state_restored_from_its_checkpoint_asks_what_the_uninterrupted_run_asks(name):
    """Tune keeps `to_dict` as JSON; a resumed trial continues from `from_dict` (CMA-ES rebuilt from its history)."""
    optimizer = outer.load(name)
    half = GENERATIONS[name] // 2
    whole, _ = run(name)
    state, _ = run(name, generations=half)
    if name == "cma":
        from bilevel_tune.core import cma_search

        cma_search._LIVE.clear()  # a new process: no live CMA object at hand
    restored = optimizer.from_dict(json.loads(json.dumps(state.to_dict())))
    assert np.array_equal(optimizer.ask(restored), optimizer.ask(state))
    resumed, _ = run(name, generations=GENERATIONS[name] - half, state=restored)
    assert resumed == whole


def test_the_es_through_the_contract_is_the_es_bit_for_bit():
    state, trajectory = run("es", population=16, generations=20)
    direct = es.init(es.ESConfig(population=16, **dataclasses.asdict(ESSettings())), 2, 42)
    for candidates, _ in trajectory:
        assert np.array_equal(es.ask(direct), candidates)
        direct, _ = es.tell(direct, candidates, quadratic(candidates))
    assert direct == state


@pytest.mark.parametrize("name", ["cma", "bo", "random", "optuna"])
def test_a_failed_candidate_is_counted_ranks_worst_and_never_becomes_the_best(name):
    def failing(candidates):
        f = quadratic(candidates)
        f[0] = np.nan  # the first of each generation fails
        return f

    state, trajectory = run(name, generations=6, objective=failing)
    assert state.failed_total == 6 and all(m[metrics.FAILED] == 1 for _, m in trajectory)
    assert all(not np.array_equal(state.best_candidate, c[0]) for c, _ in trajectory)
    nothing, (_, told) = run(name, generations=1, objective=lambda c: np.full(len(c), np.nan))[0], run(
        name, generations=1, objective=lambda c: np.full(len(c), np.nan)
    )[1][0]
    assert told[metrics.ALL_FAILED] and nothing.best_candidate is None and nothing.generation == 1


@pytest.mark.parametrize("sampler", ["tpe", "gp", "cmaes", "qmc", "random"])
def test_each_optuna_sampler_asks_the_same_for_the_same_history_and_resumes_from_its_checkpoint(sampler):
    """Optuna's study is rebuilt from the history each generation (the sampler seeded by seed and generation): three
    generations of four (12 trials: past TPE's and GP's 10 random start-up ones), then a restored state asks the same."""
    optimizer = outer.load("optuna")
    state = optimizer.init(OptunaSettings(sampler=sampler), 4, 2, 42)
    for _ in range(3):
        candidates = optimizer.ask(state)
        state, _ = optimizer.tell(state, candidates, quadratic(candidates))
    restored = optimizer.from_dict(json.loads(json.dumps(state.to_dict())))
    asked = optimizer.ask(restored)
    assert np.array_equal(asked, optimizer.ask(state)) and asked.shape == (4, 2) and ((asked >= 0) & (asked <= 1)).all()
    again = optimizer.init(OptunaSettings(sampler=sampler), 4, 2, 42)
    assert np.array_equal(optimizer.ask(again), np.array(state.history[0][0]))  # the same seed, the same first asks


def test_a_samplers_own_options_reach_it_and_survive_the_checkpoint():
    """[optuna] options are the sampler's keywords: TPE with 4 start-up trials asks by its model from the second
    generation of four, where the default's 10 random ones still ask at random."""
    optimizer = outer.load("optuna")
    runs = {}
    for options in ((), (("n_startup_trials", 4),)):
        state = optimizer.init(OptunaSettings(options=options), 4, 2, 42)
        candidates = optimizer.ask(state)
        state, _ = optimizer.tell(state, candidates, quadratic(candidates))
        runs[options] = state
    default, four = runs.values()
    assert np.array_equal(default.history[0][0], four.history[0][0]), "the same seed: the same random first asks"
    assert not np.array_equal(optimizer.ask(default), optimizer.ask(four))
    restored = optimizer.from_dict(json.loads(json.dumps(four.to_dict())))
    assert np.array_equal(optimizer.ask(restored), optimizer.ask(four))


@pytest.mark.parametrize("bo", [{"acquisition": "qLogEI"}, {"acquisition": "qUCB", "beta": 0.5, "noise": 1e-4}],
                         ids=["qLogEI", "qUCB-fixed-noise"])
def test_bo_takes_its_acquisition_and_noise_as_settings_and_stays_deterministic(bo):
    settings = BOSettings(initial=4, raw_samples=32, restarts=1, mc_samples=32, **bo)
    optimizer = outer.load("bo")

    def three(state=None):
        state = state or optimizer.init(settings, 4, 2, 42)
        for _ in range(3):  # the GP fitted twice, after the 4 uniform start-up points
            candidates = optimizer.ask(state)
            state, _ = optimizer.tell(state, candidates, quadratic(candidates))
        return state

    state = three()
    assert state == three() and state.settings["acquisition"] == bo["acquisition"]
    default = dataclasses.replace(settings, acquisition="qLogNEI", beta=0.2, noise=None)
    other = three(optimizer.init(default, 4, 2, 42))
    assert not np.array_equal(np.array(other.pending), np.array(state.pending))  # another acquisition asks otherwise
    with pytest.raises(StudyError, match="beta=0.5 is qUCB's exploration weight, and acquisition='qLogEI' takes none"):
        BOSettings(acquisition="qLogEI", beta=0.5)


def test_cma_searches_a_one_rule_mechanism():
    state, trajectory = run("cma", dim=1, generations=40)
    assert all(c.shape == (4, 1) for c, _ in trajectory)
    assert abs(state.incumbent[0] - 0.3) < 0.02


def test_the_optimizer_is_a_setting_and_an_axis_and_the_study_checks_what_each_can_run():
    weekend = load_study("weekend")
    assert weekend.outer.optimizer == "es" and compile_design(weekend).optimizers == ("es",)
    crossed = weekend.with_overrides(populations=[4], outer_iters=3, grid={"optimizer": "es,cma,bo,random"})
    assert compile_design(crossed).optimizers == ("es", "cma", "bo", "random") and len(compile_design(crossed).cells) == 2 * 2 * 4
    assert {dict(c.extra)["outer.optimizer"] for c in compile_design(crossed).cells} == {"es", "cma", "bo", "random"}
    assert weekend.with_overrides(populations=[4], outer_iters=3, settings={"optimizer": "bo"}).outer.optimizer == "bo"
    cases = {
        "optimizer 'cma' needs population ≥ 2, not 1": {"settings": {"optimizer": "cma"}},
        "outer.optimizer='nope' must be one of es, cma, bo, random": {"settings": {"optimizer": "nope"}},
        "bo.initial=3 is a setting of optimizer 'bo', and this study runs es": {"settings": {"bo.initial": "3"}},
        "budget.evaluations=0 must be an integer ≥ 1": {"settings": {"budget.evaluations": "0"}},
        "budget.evaluations=10 must be a multiple of population 16": {"settings": {"budget.evaluations": "10"}},
        "fits an exact GP to every evaluation, so a run makes at most 600 of them, not 4,800": {
            "populations": [16], "settings": {"optimizer": "bo"}},
    }  # fmt: skip
    for message, changes in cases.items():
        with pytest.raises(StudyError, match=message.replace("(", r"\(")):
            weekend.with_overrides(**changes)


def test_a_study_file_names_its_optimizer_at_the_top_or_in_outer_and_budgets_evaluations():
    study = Study.parse(
        {"name": "t", "optimizer": "random", "budget": {"evaluations": 8},
         "grid": {"population": [4], "optimize_params": [["min_demand_frac"]], "seed": [1]}}
    )  # fmt: skip
    assert study.outer.optimizer == "random" and compile_design(study).cells[0].generations == 2
    with pytest.raises(StudyError, match="optimizer is given twice"):
        Study.parse({"name": "t", "optimizer": "bo", "outer": {"optimizer": "es"}, "budget": {"generations": 2},
                     "grid": {"population": [4], "optimize_params": [["min_demand_frac"]], "seed": [1]}})  # fmt: skip
    quick = load_study("optimizers").with_budget("quick")
    assert {c.generations for c in compile_design(quick).cells} == {3} and compile_design(quick).optimizers == ("es", "cma", "bo", "random")


def test_evaluations_to_eps_counts_until_the_incumbent_stays_within_eps():
    def reached(regrets):
        run = pd.DataFrame({"generation": range(len(regrets)), "evaluations": [4 * (g + 1) for g in range(len(regrets))],
                            "incumbent_regret": regrets})  # fmt: skip
        return report.evaluations_to_eps(run, 0.01)

    assert reached([0.05, 0.005, 0.02, 0.004, 0.001]) == 16  # within at generation 1, out again, back for good at 3
    assert reached([0.0, 0.0]) == 4
    assert reached([0.0, 0.05]) == float("inf")


def test_a_users_optimiser_is_named_as_module_and_class_like_a_world_or_a_loop():
    user = "tests.user_optimizers:ShrinkingBox"
    study = load_study("weekend").with_overrides(populations=[4], outer_iters=3, settings={"optimizer": user})
    optimizer, settings = outer.chosen(study)
    assert compile_design(study).optimizers == (user,) and settings is None and type(optimizer).__name__ == "ShrinkingBox"
    state = optimizer.init(settings, 4, 2, 42)
    for _ in range(12):
        candidates = optimizer.ask(state)
        state, _ = optimizer.tell(state, candidates, quadratic(candidates))
    assert np.linalg.norm(np.asarray(state.incumbent) - TARGET) < 0.05
    crossed = study.with_overrides(grid={"optimizer": f"es,{user}"})
    from bilevel_tune.study_data.run_folder import trial_name

    assert {trial_name(crossed, c).rsplit("_", 1)[1] for c in compile_design(crossed).cells} == {"es", "ShrinkingBox"}
    for spec, message in {
        "tests.user_optimizers:NotAnOptimiser": "is not an outer optimiser: subclass bilevel_tune.core.outer",
        "tests.user_optimizers:Nowhere": "optimizer 'tests.user_optimizers:Nowhere' cannot be imported",
        "nope": "outer.optimizer='nope' must be one of es, cma, bo, random, optuna, or module:Class",
    }.items():
        with pytest.raises(StudyError, match=message):
            study.with_overrides(settings={"optimizer": spec})


def test_a_users_optimiser_is_summarised_with_its_own_rows(tmp_path):
    """The shipped optimizers study with its random search's runs renamed a user's optimiser: every table, no error."""
    import json
    import shutil

    import pandas as pd

    from bilevel_tune.summary import main

    from .study_helpers import REPO

    user = "tests.user_optimizers:ShrinkingBox"
    folder = tmp_path / "optimizers"
    shutil.copytree(REPO / "docs" / "results" / "optimizers-analytic", folder)
    record = json.loads((folder / "study.json").read_text())
    record["study"]["axes"] = [["outer.optimizer", ["es", "cma", "bo", user, "optuna"]]]
    (folder / "study.json").write_text(json.dumps(record))
    for name, kwargs in (("trials.csv", {}), ("generations.csv.gz", {"compression": "gzip"})):
        table = pd.read_csv(folder / name)
        for column in ("outer.optimizer", "optimizer"):
            if column in table:
                table[column] = table[column].replace("random", user)
        # its trials named as a run of it names them (by the class's name): the store joins rows to cells by name
        table["trial"] = table["trial"].str.replace(r"_random(_|$)", r"_ShrinkingBox\1", regex=True)
        table.to_csv(folder / name, index=False, **kwargs)
    assert main([str(folder), "--no-plots"]) == 0
    table = pd.read_csv(folder / "optimizers.csv")
    assert list(dict.fromkeys(table["optimizer"])) == ["es", "cma", "bo", "optuna", user]  # built-ins first, a user's after
    answers = pd.read_csv(folder / "answers.csv")  # the user's optimiser by its class's label
    assert answers["comparison"].str.contains("shrinking box vs ES").any()
    assert not answers["comparison"].str.contains("ShrinkingBox").any()
    assert "| shrinking box " in (folder / "summary.md").read_text()  # its row of the optimisers' table
    from bilevel_tune.core.outer import label_of

    assert label_of("cma") == "CMA-ES" and label_of("gone.module:Optimiser") == "gone.module:Optimiser"  # not importable


def test_a_summary_that_raises_fails_the_run_and_says_how_to_rebuild_it(tmp_path):
    from bilevel_tune.cli.runner import _summarise
    from bilevel_tune.study_data import run_lock
    from bilevel_tune.study_data.definition import load_study
    from bilevel_tune.study_data.run_store import RunStore

    (tmp_path / "study.json").write_text("{}")  # no study in it: the summary cannot be written
    said = []
    with run_lock.held(tmp_path, fresh=False) as lock:
        assert _summarise(RunStore(tmp_path, lock), "disabled", load_study("weekend"), said.append) is False
    assert said[-1].startswith("summary failed (") and f"rebuild with: python -m bilevel_tune.summary {tmp_path}" in said[-1]


def test_optuna_refuses_in_one_line_without_optuna_an_unknown_sampler_and_an_option_its_sampler_lacks(monkeypatch):
    import sys

    weekend = load_study("weekend")
    assert weekend.with_overrides(settings={"optimizer": "optuna", "optuna.sampler": "gp"}).optuna.sampler == "gp"
    with pytest.raises(StudyError, match="optuna.sampler='nope' must be one of tpe, gp, cmaes, qmc, random"):
        weekend.with_overrides(settings={"optimizer": "optuna", "optuna.sampler": "nope"})
    study = weekend.with_overrides(settings={"optimizer": "optuna", "optuna.options": "{multivariate = true, n_startup_trials=5}"})
    assert study.optuna.options == (("multivariate", True), ("n_startup_trials", 5))
    assert Study.from_dict(json.loads(json.dumps(study.to_dict()))) == study
    for options, message in {
        "nope=3": r"\[optuna\]: optuna.options nope=3: TPESampler takes no such setting here; it takes consider_prior, ",
        "seed=3": r"TPESampler takes no such setting here; .* \(the seed is the trial’s\)",
        "gamma=2": r"optuna.options gamma=2: TPESampler takes no such setting here",  # a callable: not a study's
        "n_startup_trials=ten": r"optuna.options n_startup_trials='ten' must be int \(TPESampler\)",
        "n_startup_trials": r"optuna.options='n_startup_trials' must be a table of name = value, each value true/false",
    }.items():
        with pytest.raises(StudyError, match=message):
            weekend.with_overrides(settings={"optimizer": "optuna", "optuna.options": options})
    with pytest.raises(StudyError, match=r"optuna.options qmc_type='foo': QMCSampler refuses them: .*halton"):
        weekend.with_overrides(settings={"optimizer": "optuna", "optuna.sampler": "qmc", "optuna.options": "qmc_type=foo"})
    monkeypatch.setitem(sys.modules, "optuna", None)  # as if it were not installed: importing it raises
    with pytest.raises(StudyError, match=r"optimizer 'optuna' needs Optuna, which is not installed: pip install "
                                         r"'bilevel_tune\[optuna\]'"):
        weekend.with_overrides(settings={"optimizer": "optuna"})


def test_regret_at_fractions_of_the_budget_its_area_and_a_winner_named_only_where_the_seeds_separate_it():
    from fractions import Fraction

    run = pd.DataFrame({"generation": range(4), "evaluations": [4, 8, 12, 16], "incumbent_regret": [0.4, 0.2, 0.1, 0.0]})
    assert report.regret_at(run, Fraction(1, 2)) == 0.2 and report.regret_at(run, Fraction(1)) == 0.0
    assert np.isnan(report.regret_at(run, Fraction(1, 16)))  # 1 evaluation: before its first generation
    assert report.regret_auc(run) == pytest.approx((0.4 + 0.2 + 0.1 + 0.0) / 4)  # each held for 4 of 16

    def table(fast: dict, slow: dict):
        rows = [("bo", "BO", fast), ("es", "ES", slow)]
        return pd.DataFrame([{"optimizer": o, "optimiser": label, "mechanism": "1-D", "evaluations": 200,
                              "evaluations_to_eps": float(np.median(list(by_seed.values()))), report.BY_SEED: by_seed}
                             for o, label, by_seed in rows])  # fmt: skip

    six = range(6)
    separated = report.soonest(table({s: 12.0 for s in six}, {s: 40.0 + s for s in six}))[0]
    assert separated.startswith("- 1-D: soonest within ε, BO at 12 evaluations, against the ES's 42: 30 fewer")
    assert "a sign test over 6 matched seeds separates it from every other, α 0.05, Holm" in separated
    four = report.soonest(table({s: 12.0 for s in range(4)}, {s: 40.0 for s in range(4)}))[0]  # 4 seeds: p = 1/16
    assert "does not separate it from ES (α 0.05, Holm): no winner named" in four


def test_epsilon_defaults_to_the_rules_scans_own_noise_at_its_best():
    scans = pd.DataFrame({"optimize_params": ["x"] * 4, "seed": [1, 1, 2, 2], "final_objective": [0.3, 0.4, 0.5, 0.2],
                          "final_objective_std": [0.9, 0.012, 0.018, 0.9]})  # fmt: skip  # the bests: 0.4 and 0.5
    weekend = load_study("weekend")
    assert report.scan_noise(scans) == 0.015 and report.epsilon(weekend, scans) == 0.015
    assert report.epsilon(weekend.with_overrides(settings={"summary.eps": "0.02"}), scans) == 0.02  # set: as set
    assert report.epsilon(weekend) == 0.01  # no scan: the study's margin


def test_an_odd_population_is_the_es_alone_to_refuse():
    weekend = load_study("weekend")
    for name in ("random", "optuna", "bo"):  # no pairs: any population
        assert weekend.with_overrides(populations=[3], outer_iters=2, settings={"optimizer": name}).populations == (3,)
    with pytest.raises(StudyError, match=r"population 3: optimizer 'es' needs population 1 or even \(antithetic pairs\)"):
        weekend.with_overrides(populations=[3], outer_iters=2)
