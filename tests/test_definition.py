"""Study files: TOML data into a frozen definition; every mistake is one line naming it."""

import dataclasses
import json

import pytest

from bilevel_tune.study_data.definition import Study, StudyError, load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.settings import SECTIONS
from bilevel_tune.study_data.study_overrides import budget_label, for_cell, overrides_label

WEEKEND_CELLS = {
    (p, tuple(o), s, ())
    for p in (1, 16)
    for o in (["min_demand_frac"], ["min_demand_frac", "fixed_quota"])
    for s in (42, 7)
}


def test_weekend_is_the_prs_grid_and_budgets():
    study = load_study("weekend")
    cells = compile_design(study).cells
    assert {c.key for c in cells} == WEEKEND_CELLS
    assert {c.population: c.generations for c in cells} == {1: 1000, 16: 300}
    assert study.budget.inner_iters == 50
    assert {k: v for k, v in study.fixed_rules.items() if k.startswith("risk")} == {
        "risk_penalty_scale": 1.0,
        "risk_penalty_power": 2.0,
    }
    assert (study.objective.econ_weight, study.objective.sus_weight) == (1.0, 0.0)
    assert (study.get("world.farms"), study.get("world.horizon"), study.get("network.hidden")) == (5, 150, (256, 256))
    quick = study.with_budget("quick")
    assert len(compile_design(quick).cells) == 8 and compile_design(quick).smoke and quick.budget.generations == 3
    assert (quick.get("world.horizon"), quick.get("network.hidden"), quick.budget.final_eval_seeds) == (30, (16,), 2)


def test_round_trip_through_json():
    study = load_study("weekend").with_budget("quick").with_overrides(rules={"fine_amount": 0.02})
    assert Study.from_dict(json.loads(json.dumps(study.to_dict()))) == study


def test_overrides_narrow_or_replace_axes():
    study = load_study("weekend").with_overrides(
        populations=[16], optimize_params=["fixed_quota"], seeds=[1, 2, 3], outer_iters=9, inner_iters=2
    )
    assert [(c.population, c.optimize_params, c.seed, c.generations) for c in compile_design(study).cells] == [
        (16, ("fixed_quota",), s, 9) for s in (1, 2, 3)
    ]
    assert study.budget.inner_iters == 2


def test_any_setting_is_fixed_or_crossed_from_the_command_line():
    study = load_study("weekend").with_overrides(
        settings={"appo.lr": "3e-4", "fixed_quota": "0.9"}, grid={"es.sigma": "0.05,0.15"}
    )
    assert study.get("appo.lr") == 3e-4 and study.get("rules.fixed_quota") == 0.9  # a bare rule name is its alias
    assert len(compile_design(study).cells) == 16 and {c.extra for c in compile_design(study).cells} == {
        (("es.sigma", 0.05),),
        (("es.sigma", 0.15),),
    }
    assert overrides_label(study) == "appo.lr=0.0003, rules.fixed_quota=0.9, grid es.sigma=0.05,0.15"
    trial = for_cell(study, compile_design(study).cells[1])
    assert trial.get("es.sigma") == 0.15 and trial.axes == () and trial.es.sigma == 0.15
    assert Study.from_dict(json.loads(json.dumps(study.to_dict()))) == study


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"settings": {"appo.lr": "-1"}}, r"^--set: appo.lr=-1.0 must be a number in \(0, 1\]$"),
        ({"settings": {"appo.lrr": "1"}}, r"unknown setting 'appo.lrr' in --set \(did you mean 'appo.lr'\?\)"),
        ({"settings": {"network.hidden": "0"}}, r"network.hidden=\[0\] must be a non-empty list of layer sizes"),
        ({"settings": {"es.shaping": "rank"}}, r"es.shaping='rank' must be one of zscore, centered_rank"),
        ({"grid": {"es.sigma": "0.05,0.9"}}, r"\[es\]: sigma=0.9 must be within"),
        ({"grid": {"appo.lr": "0.001,0.001"}}, r"grid axis appo.lr repeats a value"),
        ({"settings": {"budget.generations": "4"}}, r"use --outer-iters"),
    ],
)
def test_a_bad_setting_is_one_line_naming_its_key_and_range(overrides, match):
    with pytest.raises(StudyError, match=match) as err:
        load_study("weekend").with_overrides(**overrides)
    assert "\n" not in str(err.value)


def write(tmp_path, text):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


GOOD = """
name = "tiny"
[grid]
population = [2]
optimize_params = [["fixed_quota"]]
seed = [1]
[budget]
generations = 2
"""


@pytest.mark.parametrize(
    "text,match",
    [
        ("name = 'x'\n[grid\n", "malformed TOML"),
        (
            GOOD + "[objectiv]\necon_weight = 1\n",
            r"unknown key 'objectiv' in s.toml \(did you mean 'objective'\?\)",
        ),
        (
            GOOD.replace("generations = 2", "generations = 2\ninner_iter = 3"),
            r"unknown key 'inner_iter' in s.toml \[budget\] \(did you mean 'inner_iters'\?\)",
        ),
        (GOOD + "[appo]\nlr = 0\n", r"^s.toml \[appo\]: appo.lr=0 must be a number in \(0, 1\]$"),
        (GOOD + "[appo]\nlrr = 0.1\n", r"unknown key 'lrr' in s.toml \[appo\] \(did you mean 'lr'\?\)"),
        (GOOD + "[world]\nhorizon = 0\n", r"world.horizon=0 must be an integer ≥ 1"),
        (GOOD + "[grid]\n", r"malformed TOML"),
        (GOOD.replace("seed = [1]", "seed = [1]\nappo.lr = [0.5, 2.0]"), r"appo.lr=2.0 must be a number in \(0, 1\]"),
        (GOOD + "[budgets.fast]\nworld.horizn = 3\n", r"unknown key 'world.horizn'"),
        (
            GOOD.replace('[["fixed_quota"]]', '[["fixed_qouta"]]'),
            r"unknown rule 'fixed_qouta' \(did you mean 'fixed_quota'\?\)",
        ),
        (GOOD.replace("population = [2]", "population = [3]"), r"optimizer 'es' needs population 1 or even \(antithetic pairs\), not 3"),
        (GOOD.replace("population = [2]", "population = [0]"), r"population=0 must be an integer ≥ 1"),
        (GOOD.replace("seed = [1]", "seed = [-1]"), r"seed=-1 must be an integer ≥ 0"),
        (GOOD.replace("generations = 2", "generations = 0"), r"generations=0 must be an integer ≥ 1"),
        (GOOD.replace("generations = 2", 'generations = { "4" = 10 }'), r"no entry for population 2"),
        (GOOD + "[rules]\nrisk_scale = 1.0\n", r"unknown rule 'risk_scale' in s.toml \[rules\]"),
        (GOOD + "[es]\nsigma = 0.9\n", r"sigma=0.9 must be within"),
        (GOOD + "[es]\nshaping = 'rank'\n", r"es.shaping='rank' must be one of zscore, centered_rank"),
        (GOOD + "[objective]\necon_weight = 0\n", "both 0"),
        (
            GOOD.replace('name = "tiny"', 'inner = "sarsa"\nname = "tiny"'),
            r"inner='sarsa' is unknown; allowed: appo, appo-multiagent, analytic, ppo, frozen",
        ),
        (
            GOOD.replace('name = "tiny"', 'inner = "frozen"\nname = "tiny"'),
            r"inner='frozen' is a held-out learner \(\[final\] learners\), not a study's inner loop",
        ),
        (
            GOOD.replace('name = "tiny"', 'inner = "nowhere.mod:Loop"\nname = "tiny"'),
            r"inner='nowhere.mod:Loop' cannot be imported",
        ),
        (
            GOOD.replace('name = "tiny"', 'inner = "bilevel_tune.core.es:ESConfig"\nname = "tiny"'),
            r"lacks the inner-loop method",
        ),
    ],
)
def test_bad_study_files_fail_with_one_line(tmp_path, text, match):
    with pytest.raises(StudyError, match=match) as err:
        Study.from_toml(write(tmp_path, text))
    assert "\n" not in str(err.value)


def test_unknown_study_name_suggests():
    with pytest.raises(StudyError, match=r"unknown study 'weeknd' \(did you mean 'weekend'\?\)"):
        load_study("weeknd")
    with pytest.raises(StudyError, match="does not exist"):
        load_study("nowhere/missing.toml")


def test_bad_overrides():
    study = load_study("weekend")
    with pytest.raises(StudyError, match="unknown setting 'quota' in --set"):
        study.with_overrides(rules={"quota": 0.9})
    with pytest.raises(StudyError, match="no budget 'fast'; it has: quick"):
        study.with_budget("fast")
    with pytest.raises(StudyError, match="--outer-iters=0"):
        study.with_overrides(outer_iters=0)


def test_fixed_rules_and_search_ranges_must_lie_within_the_rules_physical_limits(tmp_path):
    with pytest.raises(StudyError, match=r"s.toml \[rules\]: rules.fixed_quota=1.0 must be a number in \[0, 0.99\]"):
        Study.from_toml(write(tmp_path, GOOD + "[rules]\nfixed_quota = 1.0\n"))
    with pytest.raises(StudyError, match=r"--set: rules.fine_amount=-1.0 must be a number in \[0, 1\]"):
        load_study("weekend").with_overrides(rules={"fine_amount": -1.0})
    edge = load_study("weekend").with_overrides(rules={"fixed_quota": 0.95, "max_demand_frac": 0.35})
    assert edge.fixed_rules["fixed_quota"] == 0.95
    wider = Study.from_toml(write(tmp_path, GOOD + "[search]\nmin_demand_frac = [0.0, 0.7]\n"))
    assert wider.rule_specs_by_name["min_demand_frac"].to_physical(1.0) == 0.7
    assert load_study("weekend").rule_specs_by_name["min_demand_frac"].to_physical(1.0) == 0.35  # today's default
    with pytest.raises(StudyError, match=r"search.min_demand_frac=\[0.5, 0.2\] must be two numbers, low < high"):
        Study.from_toml(write(tmp_path, GOOD + "[search]\nmin_demand_frac = [0.5, 0.2]\n"))
    with pytest.raises(StudyError, match=r"search.fixed_quota=\[0.5, 1.2\] must be .* within \[0, 0.99\]"):
        load_study("weekend").with_overrides(settings={"search.fixed_quota": "0.5,1.2"})


def test_the_budget_as_run_names_every_change():
    study = load_study("weekend")
    assert budget_label(study) == "full" and not compile_design(study).smoke
    short = study.with_overrides(outer_iters=4, inner_iters=10, seeds=[1])
    assert budget_label(short) == "full, outer_iters=4, inner_iters=10" and overrides_label(short) == "seed=1"
    assert all(compile_design(short).short_of_full(c) for c in compile_design(short).cells)
    assert not any(compile_design(study).short_of_full(c) for c in compile_design(study).cells)
    assert Study.from_dict(json.loads(json.dumps(short.to_dict()))) == short


def test_a_named_budget_may_change_any_setting_and_old_study_files_still_load(tmp_path):
    study = Study.from_toml(
        write(
            tmp_path,
            GOOD.replace("generations = 2", "generations = 2\nhorizon = 40\nhidden = [8]")
            + "[budgets.x]\nappo.lr = 0.01\n",
        )
    )
    assert (study.get("world.horizon"), study.get("network.hidden")) == (40, (8,))  # 0.1's [budget] keys
    assert study.with_budget("x").get("appo.lr") == 0.01 and study.get("appo.lr") == 0.001


def test_a_study_json_of_release_0_1_still_loads_as_it_ran():
    old = {
        "name": "weekend", "populations": [1, 16], "optimize_params": [["min_demand_frac"]], "seeds": [42],
        "budget": {"generations": 3, "inner_iters": 3, "eval_episodes": 1, "final_eval_seeds": 2, "horizon": 30,
                   "num_farms": 5, "hidden": [16]},
        "description": "", "inner": "analytic", "budget_name": "quick",
        "budgets": [["quick", {"generations": 3, "inner_iters": 3, "eval_episodes": 1, "final_eval_seeds": 2,
                               "horizon": 30, "num_farms": 5, "hidden": [16]}]],
        "full_budget": {"generations": [[1, 1000], [16, 300]], "inner_iters": 50, "eval_episodes": 1,
                        "final_eval_seeds": 3, "horizon": 150, "num_farms": 5, "hidden": [256, 256]},
        "overrides": [["inner", "analytic"]], "rules": [["risk_penalty_scale", 1.0]], "econ_weight": 1.0,
        "sus_weight": 0.0, "smoothing": 0.0, "es": [["sigma", 0.15]], "ceiling": 0.25, "tol": 0.0001, "source": "x",
    }  # fmt: skip
    study = Study.from_dict(old)
    assert [c.key for c in compile_design(study).cells] == [(1, ("min_demand_frac",), 42, ()), (16, ("min_demand_frac",), 42, ())]
    assert (study.get("world.horizon"), study.get("network.hidden"), study.budget.inner_iters) == (30, (16,), 3)
    assert study.fixed_rules["risk_penalty_scale"] == 1.0 and study.full_budget.generations_for(16) == 300


def test_the_docs_table_lists_every_setting_with_its_default_and_range():
    from pathlib import Path

    from bilevel_tune.study_data.settings import default_shown, settings_table

    table = (Path(__file__).resolve().parent.parent / "docs" / "study.md").read_text()
    for s in settings_table().settings:
        assert f"| `{s.key}` | {default_shown(s)} | {s.allowed} |" in table, s.key


def test_a_study_recorded_before_a_setting_existed_resumes_with_its_default():
    """A run folder's study.json (and each Tune trial's config) written before the world's knobs existed."""
    study = load_study("weekend").with_budget("quick")
    recorded = json.loads(json.dumps(study.to_dict()))
    recorded["world"] = {k: v for k, v in recorded["world"].items() if k in ("num_farms", "horizon", "smoothing")}
    old = Study.from_dict(recorded)
    assert old == study and old.get("world.release_share") == 0.6
    (cell, *_) = compile_design(old).cells
    assert for_cell(old, cell).get("world.farm_area_km2") == 500.0


def test_a_study_json_of_release_0_2_holding_its_settings_in_one_list_still_loads_as_it_ran():
    """0.2 recorded every setting as one (key, value) list, the generations beside it (the weekend campaign's)."""
    study = load_study("weekend").with_budget("quick").with_overrides(settings={"appo.lr": "3e-4"})
    recorded = {k: v for k, v in json.loads(json.dumps(study.to_dict())).items() if k not in (*SECTIONS, "budget")}
    settings = [[k, v] for k, v in json.loads(json.dumps(study.settings)).items()]
    recorded |= {"values": [[k, v] for k, v in settings if not k.startswith("world.") or k in (
        "world.farms", "world.horizon", "world.smoothing")], "generations": 3}  # fmt: skip
    old = Study.from_dict(recorded)
    assert old == study and old.get("world.release_share") == 0.6 and old.appo.lr == 3e-4


def test_a_setting_the_study_crosses_as_an_axis_is_refused_by_set_and_named_for_grid():
    optimizers = load_study("optimizers")  # crosses outer.optimizer: es, cma, bo, random
    with pytest.raises(StudyError, match=r"--set optimizer=cma: the study crosses outer.optimizer as a grid axis "
                                         r"\(es,cma,bo,random\), which would override it; use --grid outer.optimizer=cma"):
        optimizers.with_overrides(settings={"optimizer": "cma"})
    one = optimizers.with_overrides(settings={"optimizer": "cma"}, grid={"optimizer": ["cma"]})  # re-crossed: allowed
    assert dict(one.axes)["outer.optimizer"] == ("cma",)
    assert load_study("weekend").with_overrides(settings={"es.sigma": "0.1"}).get("es.sigma") == 0.1  # not an axis


def test_a_study_pickles_its_settings_not_the_plan_it_caches():
    """Tune pickles the study into tuner.pkl: only its fields go there; its plan is made again when read."""
    import pickle

    study = load_study("weekend")
    cells = compile_design(study).cells
    state = study.__getstate__()
    assert "grid" not in state and set(state) == {f.name for f in dataclasses.fields(study)}
    again = pickle.loads(pickle.dumps(study))
    assert again == study and "grid" not in again.__dict__ and compile_design(again).cells == cells
