"""A trial's plan (study_data/trial_plan.py): compiled once from the study, it holds everything the trial reads, and
reads back from JSON (Tune's config, params.json) to the same seeds, optimiser, inner-loop config and rules."""

import json

import pytest

from bilevel_tune.core import metrics, outer
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.contract import Seeds
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import Cell, trial_name
from bilevel_tune.study_data.study_overrides import for_cell
from bilevel_tune.study_data.trial_plan import TrialPlan, plans_of


@pytest.mark.parametrize("name", ["weekend", "optimizers", "fishery", "weekend-confirm", "ceiling"])
def test_a_plan_from_json_is_what_the_study_gives_each_of_its_trials(name):
    study = load_study(name)
    for cell in compile_design(study).trial_cells:
        trial = for_cell(study, cell)
        plan = TrialPlan.from_dict(json.loads(json.dumps(TrialPlan.of(study, cell).to_dict())))
        assert plan.cell == cell and plan.name == trial_name(study, cell) and plan.study == study.name
        seeds = Seeds(cell.seed, trial.budget.eval_episodes, trial.budget.final_eval_seeds)
        assert (plan.seeds.seed, plan.seeds.evaluation, plan.seeds.final) == (seeds.seed, seeds.evaluation, seeds.final)
        assert [plan.seeds.generation(g) for g in range(3)] == [seeds.generation(g) for g in range(3)]
        optimizer, settings = outer.chosen(trial)
        assert (plan.optimizer, plan.optimizer_settings) == (optimizer.name, settings)
        assert plan.inner_config == InnerLoopConfig.from_study(trial) and plan.loop == trial.inner
        assert plan.inner_iters == trial.budget.inner_iters
        assert plan.rule_specs == trial.rule_specs and plan.fixed_rules == trial.fixed_rules
        assert plan.equal_evaluations == (() if cell.scan else compile_design(trial).equal_evaluations(cell.population))
        assert plan.scan_points == (trial.scan if cell.scan else None)
        assert plan.settings == json.loads(json.dumps(trial.settings))


def test_stages_and_a_config_from_before_plans_find_their_plan_by_cell():
    """A later stage's cells carry their stage; a Tune config that holds the cell alone (a run started before plans)
    names its plan among those `plans_of` compiles (what `trainable.study_trial` passes beside the trainable)."""
    from bilevel_tune.study_data.stages import next_stage, with_stage

    study = load_study("weekend-confirm")
    study = with_stage(study, next_stage(study, [cell.group for cell in compile_design(study).stage_cells(1)]))
    plans = plans_of(study)
    assert {plan["stage"] for plan in plans.values()} == {1, 2}
    for cell in compile_design(study).stage_cells(2):
        assert plans[Cell.key_of({metrics.CELL: cell.as_config()})]["stage"] == 2
        assert Cell.key_of({metrics.TRIAL: plans[cell.key]}) == cell.key
