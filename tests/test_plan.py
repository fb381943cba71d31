"""The CPU plan: shards in proportion to work, never more than candidates or CPUs, a queue when CPUs run out."""

import math

import pytest

from bilevel_tune.planning.plan import CostModel, PlanError, describe_plan, hms, make_plan, simulate
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import Cell, trial_name

WEEKEND = load_study("weekend")

# Per busy CPU, weekend settings on the 2-core reference machine (calibration probe, rounded)
MODEL = CostModel(
    rebuild_s=0.13,
    train_fixed_s=0.08,
    train_per_candidate_s=0.11,
    first_train_extra_s=0.01,
    evaluate_fixed_s=0.025,
    evaluate_per_candidate_s=0.037,
)


@pytest.fixture
def weekend():
    study = load_study("weekend")
    return compile_design(study).cells, study.budget


def test_sixteen_cpus_run_the_whole_weekend_at_once_near_the_population_one_floor(weekend):
    cells, budget = weekend
    plan = make_plan(cells, budget, 16, MODEL)
    shards = {t.cell.population: t.shards for t in plan.trials}
    assert shards[1] == 1 and shards[16] >= 3
    assert all(t.start_s == 0 for t in plan.trials) and sum(t.shards for t in plan.trials) <= 16
    floor = MODEL.trial_s(next(c for c in cells if c.population == 1), 1, budget)
    assert plan.makespan_s <= 1.15 * floor, "the population-1 trials, which cannot shard, set the pace"


def test_never_more_shards_than_candidates_or_cpus(weekend):
    cells, budget = weekend
    for cpus in (1, 2, 3, 8, 100):
        plan = make_plan(cells, budget, cpus, MODEL)
        assert all(1 <= t.shards <= min(t.cell.population, cpus) for t in plan.trials)
        # shards that would not shrink the largest block are never given: 16 → 1, 2, 3, 4, 6, 8, 16
        assert all(t.shards in (1, 2, 3, 4, 6, 8, 16) for t in plan.trials if t.cell.population == 16)


def test_more_trials_than_cpus_queue_and_start_as_cpus_free(weekend):
    cells, budget = weekend
    plan = make_plan(cells, budget, 2, MODEL)
    assert len(plan.waves) > 1
    for t in plan.trials:  # at no moment more CPUs busy than there are
        busy = sum(u.shards for u in plan.trials if u.start_s <= t.start_s < u.end_s)
        assert busy <= 2


def test_cpus_per_trial_fixes_the_shards_and_may_not_exceed_the_cluster(weekend):
    cells, budget = weekend
    plan = make_plan(cells, budget, 16, MODEL, cpus_per_trial=2)
    assert plan.fixed and {(t.cell.population, t.shards) for t in plan.trials} == {(1, 1), (16, 2)}
    with pytest.raises(PlanError, match="--cpus-per-trial 3 exceeds the cluster's 2 CPUs"):
        make_plan(cells, budget, 2, MODEL, cpus_per_trial=3)


def test_without_a_measurement_shards_follow_work_alone(weekend):
    cells, budget = weekend
    plan = make_plan(cells, budget, 16, CostModel.by_work("test"))
    assert not plan.model.calibrated
    assert {t.cell.population: t.shards for t in plan.trials}[16] >= 3


def test_the_eta_is_the_whole_command_and_reads_as_python_does():
    cell = Cell(4, ("fixed_quota",), 1, generations=10)
    budget = load_study("weekend").with_budget("quick").budget
    plan = make_plan([cell], budget, 2, MODEL)
    assert plan.eta_s == pytest.approx(MODEL.launch_s + plan.makespan_s + MODEL.finish_s)
    assert hms(3725) == "1:02:05" and hms(2 * 86400 + 5) == "2 days, 0:00:05"


def test_the_simulation_starts_trials_in_order_as_cpus_free():
    assert simulate([10, 10, 10], [1, 1, 1], cpus=2, max_concurrent=None) == [0, 0, 10]
    assert simulate([10, 5, 5], [2, 1, 1], cpus=2, max_concurrent=None) == [0, 10, 10]
    assert simulate([10, 10], [1, 1], cpus=4, max_concurrent=1) == [0, 10]
    assert math.isclose(simulate([3.0, 1.0, 1.0], [1, 1, 1], cpus=2, max_concurrent=None)[2], 1.0)


def test_a_scan_s_pass_is_planned_in_the_blocks_it_runs_in_not_as_one_block_of_its_grid():
    from bilevel_tune.core import scan

    budget = load_study("weekend").budget
    grid = Cell(441, ("min_demand_frac", "fixed_quota"), 1, generations=4, scan=True)
    turns = math.ceil(441 / scan.BLOCK)  # 28 turns of 15 or 16 candidates
    per_pass = turns * MODEL.generation_s(math.ceil(441 / turns), budget.inner_iters, 1, report=False)
    expected = MODEL.trial_overhead_s + (1 + budget.final_eval_seeds) * (per_pass + MODEL.report_s)
    assert MODEL.trial_s(grid, 1, budget) == pytest.approx(expected)
    assert MODEL.trial_s(grid, 2, budget) < 0.6 * MODEL.trial_s(grid, 1, budget)  # two shards share the turns


def test_a_shard_s_block_runs_in_near_equal_turns_of_at_most_the_largest_block():
    from bilevel_tune.inner.shards import in_turns

    assert in_turns(0, 441, 16) == [(f, 16 if f < 16 * 21 else 15) for f in [*range(0, 336, 16), *range(336, 441, 15)]]
    assert in_turns(5, 16, 16) == [(5, 16)] and in_turns(5, 17, None) == [(5, 17)]
    assert in_turns(3, 17, 16) == [(3, 9), (12, 8)]


def test_the_printed_plan_ends_on_its_eta_for_the_whole_command_or_for_what_a_resume_has_left(weekend):
    cells, budget = weekend
    plan = make_plan(cells, budget, 2, MODEL)
    for what in ("the whole command", "what is left"):
        lines = []
        describe_plan(WEEKEND, plan, lines.append, what=what)
        assert lines[-1].startswith(f"ETA {hms(plan.eta_s)} for {what}: start ")
        assert [line.split()[0] for line in lines[1 : 1 + len(plan.trials)]] == [
            trial_name(WEEKEND, t.cell) for t in plan.trials
        ]
    lines = []
    describe_plan(WEEKEND, make_plan(cells, budget, 2, CostModel.by_work("no figures")), lines.append)
    assert lines[-1] == "no ETA: this machine has no figures for these settings"
