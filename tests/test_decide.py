"""Deciding a study's comparisons (AdaStop, in stages) on synthetic cells with known effects: no Ray, no trials."""

import dataclasses

import numpy as np
import pytest

from bilevel_tune.base.sections import DecideSettings
from bilevel_tune.report import decide
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.run_folder import Stage
from bilevel_tune.study_data.stages import at_most, check_stageable, drawn_seeds, next_stage, with_stage
from bilevel_tune.study_data.study_checks import StudyError

WEEKEND = load_study("weekend")


def staged(study, effect, rng, sd=0.01, level=None):
    """Run a synthetic study in stages as `--until-decided` does: each stage's cells scored, AdaStop, next stage.

    A cell's score is N(0.4 + its effect, sd); `effect(cell)` gives it. Returns (study, decisions after each look).
    """
    scores, looks = {}, []
    while True:
        for cell in study.cells():
            scores.setdefault(cell.key, rng.normal(0.4 + effect(cell), sd))
        decisions = decide.decide(study, scores)
        looks.append(decisions)
        stage = next_stage(study, decisions.open_groups)
        if stage is None:
            return study, looks
        study = with_stage(study, stage)


def population_effect(size):
    return lambda cell: size if cell.population == 16 else 0.0


def with_decide(study, **settings):
    return dataclasses.replace(study, decide=DecideSettings(**{**dataclasses.asdict(study.decide), **settings}))


def test_the_weekend_has_four_comparisons_each_between_two_cells_that_differ_in_one_factor():
    pairs = decide.comparisons(WEEKEND)
    assert [p.key for p in pairs] == [
        "2-D vs 1-D at population 1",
        "population 16 vs population 1 at 1-D",
        "population 16 vs population 1 at 2-D",
        "2-D vs 1-D at population 16",
    ]
    assert {p.factor for p in pairs} == {"population", "mechanism"}
    only_population = with_decide(WEEKEND, compare=("population",))
    assert [p.factor for p in decide.comparisons(only_population)] == ["population", "population"]


def test_a_clear_difference_is_decided_within_two_stages():
    study = with_decide(WEEKEND.with_overrides(seeds=(1, 2, 3)), seeds_per_stage=3, max_seeds=9)
    study, looks = staged(study, population_effect(0.05), np.random.default_rng(0))
    final = {d.comparison.key: d for d in looks[-1].decisions}
    for where in ("1-D", "2-D"):
        decision = final[f"population 16 vs population 1 at {where}"]
        assert decision.outcome == decide.B_BETTER and decision.look <= 2
    assert all(final[k].outcome in (decide.UNDECIDED, decide.OPEN) for k in final if k.startswith("2-D vs"))


def test_only_the_cells_of_comparisons_still_open_get_more_seeds():
    study = with_decide(
        WEEKEND.with_overrides(seeds=(1, 2, 3)), seeds_per_stage=3, max_seeds=9, compare=("population",)
    )
    in_1d = lambda cell: 0.05 if cell.population == 16 and cell.dims == 1 else 0.0  # noqa: E731
    study, looks = staged(study, in_1d, np.random.default_rng(0))
    assert [d.outcome for d in looks[1].decisions] == [decide.B_BETTER, decide.OPEN]
    two_d = {g for g in study.groups() if len(g[1]) == 2}
    assert looks[1].open_groups == two_d and set(study.stages[1].groups) == two_d
    assert {c.dims for c in study.stage_cells(3)} == {2}


@pytest.mark.long
def test_identical_cells_are_declared_different_no_more_often_than_alpha():
    """200 simulated weekend studies whose cells are all alike, run in stages to the most seeds: AdaStop as
    corrected here rejects in at most α of them (the package as released rejects in about 11 %)."""
    rng = np.random.default_rng(20261203)
    wrong = 0
    for _ in range(200):
        _, looks = staged(WEEKEND, lambda cell: 0.0, rng)
        wrong += any(d.outcome in (decide.A_BETTER, decide.B_BETTER) for d in looks[-1].decisions)
    assert wrong / 200 <= WEEKEND.decide.alpha


def test_two_seeds_a_stage_cannot_decide_before_the_third_and_the_plan_says_so():
    assert decide.first_decisive_look(2, 3, 0.05) == 3
    assert decide.first_decisive_look(3, 3, 0.05) == 2
    assert decide.first_decisive_look(2, 1, 0.05) is None
    assert "first decide at stage 3 (6 seeds per cell)" in decide.describe_plan(WEEKEND)
    _, looks = staged(WEEKEND, population_effect(1.0), np.random.default_rng(1))  # a huge effect
    assert [d.outcome for d in looks[1].decisions] == [decide.OPEN] * 4  # nothing at 4 seeds
    assert {d.outcome for d in looks[2].decisions if d.comparison.factor == "population"} == {decide.B_BETTER}


def test_an_axis_whose_levels_do_not_change_the_runs_is_never_declared_different():
    """appo.lr crossed on the analytic loop: its levels run the same trials, so their scores are equal."""
    study = WEEKEND.with_overrides(grid={"appo.lr": "0.001,0.0003"}, inner="analytic")
    rng = np.random.default_rng(2)
    by_run: dict = {}

    def same_run(cell):  # one score per (population, mechanism, seed), whatever the lr
        return by_run.setdefault((cell.population, cell.optimize_params, cell.seed), rng.normal(0, 0.05))

    _, looks = staged(study, same_run, rng, sd=0.0)
    lr = [d for d in looks[-1].decisions if d.comparison.factor == "appo.lr"]
    assert len(lr) == 4 and all(d.outcome == decide.UNDECIDED for d in lr)


def test_replaying_the_stored_scores_gives_the_decisions_the_run_took_at_each_stage():
    """decide() keeps no state: each look is a replay of the stages so far over the stored scores, so the decisions
    after the last stage, replayed over every score at once, are the run's, and so is each earlier look."""
    rng = np.random.default_rng(3)
    scores: dict = {}
    study, looks = WEEKEND, []
    while True:
        for cell in study.cells():
            scores.setdefault(cell.key, rng.normal(0.4 + (0.02 if cell.population == 16 else 0.0), 0.01))
        looks.append(decide.decide(study, scores))
        stage = next_stage(study, looks[-1].open_groups)
        if stage is None:
            break
        study = with_stage(study, stage)
    assert decide.decide(study, scores) == looks[-1]
    for k in range(1, len(looks)):  # the study as it stood after k stages, replayed
        earlier = dataclasses.replace(study, stages=study.stages[: k - 1])
        assert decide.decide(earlier, scores) == looks[k - 1]


def test_a_stage_with_a_trial_not_finished_is_not_looked_at():
    scores = {c.key: 0.4 for c in WEEKEND.cells()}
    study = with_stage(WEEKEND, next_stage(WEEKEND, set(WEEKEND.groups())))
    missing = study.stage_cells(2)[0]
    scores.update({c.key: 0.4 for c in study.stage_cells(2) if c != missing})
    decisions = decide.decide(study, scores, {missing.key: "weekend_pop1_1d_seedX"})
    assert decisions.looks == 1 and "stage 2: 1 trial(s) not finished (weekend_pop1_1d_seedX" in decisions.incomplete


def test_a_trial_without_a_final_score_is_named_in_one_line():
    scores = {c.key: 0.4 for c in WEEKEND.cells()}
    first = WEEKEND.cells()[0]
    scores[first.key] = float("nan")
    with pytest.raises(decide.DecideError, match="trial weekend_pop1_1d_seed42 has no final re-evaluation"):
        decide.decide(WEEKEND, scores, {first.key: "weekend_pop1_1d_seed42"})


def test_stages_add_seeds_drawn_from_the_study_to_the_open_groups_only():
    seeds = drawn_seeds(WEEKEND)
    assert len(seeds) == 4 and not set(seeds) & set(WEEKEND.seeds) and seeds == drawn_seeds(WEEKEND)
    one_group = WEEKEND.groups()[:1]
    stage = next_stage(WEEKEND, one_group)
    assert stage == Stage(seeds[:2], tuple(one_group))
    grown = with_stage(WEEKEND, stage)
    assert [c.seed for c in grown.stage_cells(2)] == list(seeds[:2])
    assert len(grown.cells()) == len(WEEKEND.cells()) + 2
    most = at_most(WEEKEND)
    assert len(most.cells()) == 24 and next_stage(most, most.groups()) is None
    assert type(WEEKEND).from_dict(grown.to_dict()) == grown  # study.json keeps its stages


def test_stages_need_the_grid_seeds_to_be_the_first_stage():
    check_stageable(WEEKEND)
    with pytest.raises(StudyError, match=r"the grid's 3 seed\(s\) \(1, 2, 3\) are the first stage"):
        check_stageable(WEEKEND.with_overrides(seeds=(1, 2, 3)))
    with pytest.raises(StudyError, match="max_seeds=5 must be a multiple of seeds_per_stage=2"):
        DecideSettings(max_seeds=5)
    with pytest.raises(StudyError, match="compare: 'seed' is not a factor of this study"):
        decide.check_compare(with_decide(WEEKEND, compare=("seed",)))


def test_a_grid_without_the_stage_plan_is_looked_at_once_with_all_its_seeds():
    three = WEEKEND.with_overrides(seeds=(1, 2, 3, 4, 5))
    assert decide.plan_of(three) == (5, 1)
    scores = {c.key: 0.4 + (0.1 if c.population == 16 else 0) + 0.001 * c.seed for c in three.cells()}
    decisions = decide.decide(three, scores)
    outcomes = {d.comparison.key: d.outcome for d in decisions.decisions}
    assert outcomes["population 16 vs population 1 at 1-D"] == decide.B_BETTER
    assert outcomes["2-D vs 1-D at population 1"] == decide.UNDECIDED
