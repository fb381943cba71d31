"""A study names its world; its [world], [objective] and [rules] are that world's, checked by the world's own knobs."""

import json
from pathlib import Path

import pytest

from bilevel_tune.study_data.definition import Study, StudyError, load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.settings import settings_table
from bilevel_tune.worlds.fishery import FisheryObjective, FisherySettings

FISHERY = """
name = "fish"
inner = "analytic"

[world]
kind = "fishery"
fishers = 4

[objective]
stock_weight = 1.0

[rules]
quota_max = 0.5

[grid]
population = [1, 4]
optimize_params = [["quota_max"], ["quota_max", "fine"], ["fine"]]  # the fixed quota_max: the last one's
seed = [1]
rules.restoration_subsidy = [0.0, 0.2]

[budget]
generations = 2

[budgets.quick]
generations = 1
world.horizon = 20
"""


def write(tmp_path, text: str, name: str = "fish.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_study_on_the_fishery_holds_the_fishery_s_sections_and_rules(tmp_path):
    study = Study.from_toml(write(tmp_path, FISHERY.replace("rules.restoration_subsidy = [0.0, 0.2]\n", "")))
    assert study.world_kind == "fishery" and study.table is settings_table("fishery")
    assert study.world == FisherySettings(fishers=4) and study.objective == FisheryObjective(stock_weight=1.0)
    assert study.fixed_rules == {"quota_max": 0.5, "quota_trigger": 0.5, "fine": 1.5, "restoration_subsidy": 0.0}
    assert study.get("world.fishers") == 4 and study.get("quota_max") == 0.5  # a bare rule name is its alias
    assert study.with_budget("quick").world.horizon == 20 and study.world.horizon == 100
    changed = study.with_overrides(settings={"world.initial_stock": "3000", "fine": "0.5"}, grid={"fine": "0,1"})
    assert (changed.world.initial_stock, changed.fixed_rules["fine"]) == (3000.0, 0.5)
    assert [c.extra for c in compile_design(changed).cells][:2] == [(("rules.fine", 0.0),), (("rules.fine", 1.0),)]
    assert Study.from_dict(json.loads(json.dumps(changed.to_dict()))) == changed  # study.json: the same study back
    assert "world.farms" not in study.settings and "world.fishers" in study.settings


def test_a_study_file_naming_no_world_is_fresh_water_as_before():
    weekend = load_study("weekend")
    assert weekend.world_kind == "fresh-water" and weekend.table is settings_table("fresh-water")
    assert "kind" not in json.dumps(weekend.to_dict()["world"])  # the world's name is not one of its settings


@pytest.mark.parametrize(
    "change, message",
    [
        (("fishers = 4", "farms = 4"), r"unknown key 'farms' in fish.toml \[world\]; allowed: fishers, horizon, .*, kind"),
        (('kind = "fishery"', 'kind = "fishy"'), r"fish.toml \[world\] kind: world 'fishy' is unknown; allowed: "
                                                  r"fresh-water, fishery, or module:Class"),
        (('kind = "fishery"', 'kind = "nowhere:Lake"'), r"world 'nowhere:Lake' cannot be imported"),
        (('kind = "fishery"', "kind = 3"), r"kind=3 must be a world's name or 'module:Class'"),
        (('["quota_max", "fine"]', '["min_demand_frac"]'), r"unknown rule 'min_demand_frac'"),
        (("quota_max = 0.5", "quota_max = 3"), r"rules.quota_max=3 must be a number in \[0.1, 1\]"),
        (("stock_weight = 1.0", "econ_weight = 1.0"), r"unknown key 'econ_weight' in fish.toml \[objective\] \(did you mean 'stock_weight'\?\)"),
    ],
)  # fmt: skip
def test_a_world_s_study_file_fails_in_one_line_naming_the_world_s_own_keys(tmp_path, change, message):
    with pytest.raises(StudyError, match=message) as err:
        Study.from_toml(write(tmp_path, FISHERY.replace(*change)))
    assert "\n" not in str(err.value)


# -- a study on another world, end to end ---------------------------------------------------------------
def test_the_analytic_loop_refuses_a_world_without_a_myopic_best_response_in_one_line(tmp_path, capsys):
    from bilevel_tune.cli.main import main

    path = write(tmp_path, FISHERY.replace('kind = "fishery"', 'kind = "tests.test_worlds:NoMyopicResponse"'))
    assert main([str(path), "--dry-run", "--inner", "analytic"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "world 'tests.test_worlds:NoMyopicResponse' offers no myopic_actions" in err
    from bilevel_tune.inner.contract import check_loop_on_world

    # the APPO loops need no more than the contract (a dry run with them would probe real APPO: tests/test_appo_worlds.py)
    assert check_loop_on_world("appo", "tests.test_worlds:NoMyopicResponse") is None


def test_a_broken_world_named_by_a_study_is_refused_before_anything_runs(tmp_path, capsys):
    from bilevel_tune.cli.main import main

    path = write(tmp_path, FISHERY.replace('kind = "fishery"', 'kind = "tests.test_worlds:NaNRewards"'))
    assert main([str(path), "--dry-run", "--results", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "breaks its contract" in err and "non-finite rewards" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.ray
def test_the_fishery_study_runs_the_analytic_loop_with_a_scan_and_a_summary(ray_cluster, tmp_path):
    import pandas as pd

    from bilevel_tune.cli.main import main

    args = ["fishery", "--quick", "--population", "8", "--seed", "42", "--scan", "3", "--wandb", "disabled"]
    assert main([*args, "--optimize-params", "quota_max,restoration_subsidy", "--results", str(tmp_path)]) == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    scans, trials = pd.read_csv(run / "scan.csv"), pd.read_csv(run / "trials.csv")
    assert len(scans) == 9 and sorted(set(scans["quota_max"])) == pytest.approx([0.1, 0.55, 1.0])  # physical
    assert sorted(set(scans["restoration_subsidy"])) == pytest.approx([0.0, 0.25, 0.5])
    assert (trials["final_objective"] > 0).all() and (trials["generations"] == 3).all()
    assert (trials["diag_harvest_over_msy"] > 0).all() and "diag_pressure" not in trials  # the world's own terms
    assert (run / "plots" / "landscape_2d-quota-subsidy.png").stat().st_size > 10_000
    summary = (run / "summary.md").read_text()
    assert "[world] fishers 5, horizon 30" in summary and "[rules] quota_max 1.0" in summary
    assert "[objective] harvest_weight 1.0, stock_weight 2.0, stock_threshold 0.2\n" in summary
    assert Study.from_dict(json.loads((run / "study.json").read_text())["study"]).world_kind == "fishery"
    answers = summary.split("## Answers")[1].split("\n## ")[0]
    assert "\n- ceiling" not in answers, "a world without a ceiling gets no ceiling line"


@pytest.mark.ray
def test_a_world_with_a_boolean_setting_runs_as_a_study(ray_cluster, tmp_path):
    import pandas as pd

    from bilevel_tune.cli.main import main

    args = ["fishery", "--quick", "--inner", "analytic", "--population", "1", "--seed", "42", "--wandb", "disabled"]
    study = tmp_path / "calm.toml"
    fishery = (Path(__file__).resolve().parent.parent / "studies" / "fishery.toml").read_text()
    study.write_text(fishery.replace('kind = "fishery"', 'kind = "tests.test_worlds:CalmFishery"\ncalm = true'))
    assert main([str(study), *args[1:], "--optimize-params", "quota_max", "--results", str(tmp_path)]) == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert (pd.read_csv(run / "trials.csv")["status"] == "complete").all()
    assert json.loads((run / "study.json").read_text())["study"]["world"]["calm"] is True
    assert "calm true" in (run / "summary.md").read_text()
