"""Confirmatory or exploratory: a plan fixed before look 1 and kept, or one that changed after a look — judged from
the run's record alone, older folders included; and answers joined to cells by key, never by row order."""

import json
import shutil

import pandas as pd

from bilevel_tune.study_data.definition import Study, load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.verdicts import plan_mark

from .study_helpers import REPO

WEEKEND = load_study("weekend")


def _look(stage: int, test: str | None = "paired", rows=None, **extra) -> dict:
    rows = rows if rows is not None else plan_mark.decision_plan(compile_design(WEEKEND))["family"]
    look = {"stage": stage, "looks": stage, "decisions": [{"comparison": r} for r in rows], **extra}
    return {**look, "test": test} if test else look


def test_a_plan_fixed_before_look_1_and_kept_is_confirmatory_with_its_fingerprint():
    entry = plan_mark.plan_entry(compile_design(WEEKEND), "2026-12-06T00:00:00", "abc")
    mark = plan_mark.mark(compile_design(WEEKEND), {plan_mark.PLAN_KEY: entry, "stages": [_look(1), _look(2)]})
    assert mark.confirmatory and mark.fingerprint == entry["fingerprint"] == plan_mark.fingerprint(entry["plan"])
    assert mark.sentence().startswith(f"**Confirmatory**: its decision plan (fingerprint {mark.fingerprint})")
    assert mark.record()["confirmatory"] is True and mark.record()["plan_changes"] == []


def test_each_kind_of_change_after_a_look_makes_the_answers_exploratory_and_is_named():
    extended = {"stages": [_look(1), _look(2)], "plan_extensions": [
        {"from_max_seeds": 6, "to_max_seeds": 12, "after_stage": 2}]}  # fmt: skip
    assert plan_mark.mark(compile_design(WEEKEND), extended).sentence() == (
        "**Exploratory**: the plan changed after look 2: max seeds 6 → 12 (--extend-plan).")
    declared = WEEKEND.with_overrides(settings={"decide.margin_from": 3})
    assert plan_mark.mark(compile_design(declared), {}).changes == ("margin 0.01 declared before look 3",)
    legacy = {"stages": [_look(1, test=None, rows=["a", "b"]), _look(2, superseded=[_look(2, test=None, rows=["a"])])]}
    mark = plan_mark.mark(compile_design(WEEKEND), legacy)  # looks recorded without their test: AdaStop's, before the paired t
    assert not mark.confirmatory and mark.after_look == 2
    assert mark.changes == ("family 1 → 7 rows", "test AdaStop → paired t, group-sequential")
    fixed = plan_mark.plan_entry(compile_design(WEEKEND), "t", None)
    fixed["plan"]["final_seeds"] = 16
    changed = plan_mark.mark(compile_design(WEEKEND), {plan_mark.PLAN_KEY: fixed, "stages": [_look(1, plan_fingerprint=fixed["fingerprint"])]})
    assert changed.changes == ("final_seeds 16 → 3",) and changed.after_look == 1


def test_the_shipped_campaign_runs_carry_the_changes_their_records_show():
    def mark_of(name):
        record = json.loads((REPO / "docs" / "results" / name / "study.json").read_text())
        return plan_mark.mark(compile_design(Study.from_dict(record["study"])), record)

    weekend = mark_of("weekend-appo")
    assert weekend.after_look == 3 and set(weekend.changes) == {
        "family 4 → 7 rows", "margin 0.01 declared before look 4", "max seeds 6 → 12 (--extend-plan)",
        "test AdaStop → paired t, group-sequential"}  # fmt: skip
    assert mark_of("ceiling-appo").changes == ("margin 0.01 declared before look 2",)
    assert mark_of("weekend-analytic").confirmatory


def test_a_shipped_folder_whose_tables_are_shuffled_answers_the_same(tmp_path):
    from bilevel_tune.summary import main

    shipped, shuffled = REPO / "docs" / "results" / "weekend-analytic", tmp_path / "shuffled"
    shutil.copytree(shipped, shuffled)
    for name, kwargs in (("trials.csv", {}), ("generations.csv.gz", {"compression": "gzip"})):
        table = pd.read_csv(shuffled / name)
        table.sample(frac=1, random_state=7).to_csv(shuffled / name, index=False, **kwargs)
    assert main([str(shuffled), "--no-plots"]) == 0
    answers = pd.read_csv(shuffled / "answers.csv")  # the shipped folder rebuilds byte for byte (test_shipped)
    assert answers.equals(pd.read_csv(shipped / "answers.csv")) and (answers["decision"] == "equivalent").all()
