"""Rows planned at equal evaluations (`[decide] equal_budget`): the family they join, the decisions read from each
larger-population run's incumbent at the smaller population's budget, the stages they add seeds to, and the bad
plans refused — synthetic scores, no Ray."""

import dataclasses

import numpy as np
import pytest

from bilevel_tune.base.sections import DecideSettings
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import at_evaluations, key_at_evaluations
from bilevel_tune.study_data.stages import next_stage, with_stage
from bilevel_tune.study_data.study_checks import StudyError
from bilevel_tune.verdicts import decide, family

WEEKEND = load_study("weekend")  # population 1 runs 1,000 evaluations, population 16 300 × 16 = 4,800
EQUAL = dataclasses.replace(
    WEEKEND, decide=DecideSettings(**{**dataclasses.asdict(WEEKEND.decide), "equal_budget": ("population",)})
)
AT = ", at equal evaluations (1,000 each)"


def test_a_larger_population_is_also_scored_at_each_smaller_populations_budget():
    assert [compile_design(EQUAL).equal_evaluations(p) for p in (1, 16)] == [(), (1000,)]
    assert compile_design(WEEKEND).equal_evaluations(16) == ()  # not declared: nothing more is scored, every run as before


def test_the_rows_at_equal_evaluations_join_the_family_their_main_effect_primary_its_simple_effects_gated():
    fam = family.family(compile_design(EQUAL))
    keys = [h.key for h in fam.hypotheses]
    assert keys == [
        "population 16 vs population 1, over mechanisms",
        "2-D vs 1-D, over populations",
        "population 16 vs population 1, over mechanisms" + AT,
        "population 16 vs population 1 × 2-D vs 1-D",
        "2-D vs 1-D at population 1",
        "population 16 vs population 1 at 1-D",
        "population 16 vs population 1 at 2-D",
        "2-D vs 1-D at population 16",
        "population 16 vs population 1 at 1-D" + AT,
        "population 16 vs population 1 at 2-D" + AT,
    ]
    weights = dict(zip(keys, fam.graph.weights))
    assert [k for k, w in weights.items() if w] == [keys[0], keys[1], keys[2], keys[3]]  # α / 4 each
    assert all(w == pytest.approx(1 / 4) for w in fam.graph.weights[:4])
    # the equal-evaluations main effect passes its share to its own simple effects, and to nothing else
    passes = {keys[j] for j in np.flatnonzero(fam.graph.edges[2])}
    assert passes == {keys[8], keys[9]}
    # population 16's runs are read at 1,000 evaluations; population 1's, whose budget that is, as they are
    simple = fam.hypotheses[8]
    assert simple.a == (1, ("min_demand_frac",), ()) and simple.b == at_evaluations((16, ("min_demand_frac",), ()), 1000)


def scores_for(study, rng, at_own: float, at_equal: float, sd: float = 0.002) -> dict:
    """Every cell's score (population 16's `at_own` above population 1's) and population 16's at 1,000 evaluations
    (`at_equal` above)."""
    out = {}
    for cell in compile_design(study).cells:
        out[cell.key] = 0.4 + (at_own if cell.population == 16 else 0.0) + rng.normal(0, sd)
        if cell.population == 16:
            out[key_at_evaluations(cell.key, 1000)] = 0.4 + at_equal + rng.normal(0, sd)
    return out


def test_at_its_own_budget_the_larger_population_wins_and_at_equal_evaluations_it_loses():
    rng = np.random.default_rng(5)
    study, looks = EQUAL, []
    scores = {}
    while True:
        scores = {**scores_for(study, rng, at_own=0.02, at_equal=-0.02), **scores}  # a look keeps earlier scores
        looks.append(decide.decide(compile_design(study), scores))
        stage = next_stage(study, looks[-1].open_groups)
        if stage is None:
            break
        study = with_stage(study, stage)
    outcomes = {d.hypothesis.key: d.outcome for d in looks[-1].decisions}
    assert outcomes["population 16 vs population 1, over mechanisms"] == decide.B_BETTER
    assert outcomes["population 16 vs population 1, over mechanisms" + AT] == decide.A_BETTER
    assert outcomes["population 16 vs population 1 at 1-D" + AT] == decide.A_BETTER
    assert outcomes["population 16 vs population 1 at 2-D" + AT] == decide.A_BETTER


def test_an_open_row_at_equal_evaluations_adds_seeds_to_the_grid_groups_it_reads():
    rng = np.random.default_rng(1)
    scores = scores_for(EQUAL, rng, at_own=0.02, at_equal=0.0, sd=0.01)  # nothing to find at equal evaluations
    decisions = decide.decide(compile_design(EQUAL), scores)
    open_rows = [d.hypothesis.key for d in decisions.decisions if d.outcome == decide.OPEN]
    assert "population 16 vs population 1, over mechanisms" + AT in open_rows
    assert decisions.open_groups <= set(compile_design(EQUAL).groups)  # grid groups only: never a group read at fewer evaluations
    stage = next_stage(EQUAL, decisions.open_groups)
    assert {g[0] for g in stage.groups} == {1, 16}


def test_a_missing_score_at_equal_evaluations_ends_its_rows_undecided_not_the_look():
    scores = scores_for(EQUAL, np.random.default_rng(2), at_own=0.05, at_equal=-0.05)
    del scores[key_at_evaluations(compile_design(EQUAL).cells[-1].key, 1000)]
    decisions = decide.decide(compile_design(EQUAL), scores)
    assert decisions.looks == 1 and decisions.incomplete is None  # the look is taken
    row = next(d for d in decisions.decisions if d.hypothesis.key.endswith(AT) and d.hypothesis.kind == family.MAIN)
    assert row.outcome == decide.UNDECIDED and row.seeds == 0  # not followed: as a row whose groups stopped
    assert next(d for d in decisions.decisions if d.hypothesis.kind == family.MAIN).outcome == decide.OPEN  # followed


def test_equal_budget_refuses_what_it_cannot_compare():
    def equal(study, *factors, **decide_settings):
        settings = {**dataclasses.asdict(study.decide), "equal_budget": factors, **decide_settings}
        return dataclasses.replace(study, decide=DecideSettings(**settings))

    with pytest.raises(StudyError, match="'mechanism' does not change a run's evaluations; allowed: population"):
        family.check_equal_budget(compile_design(equal(WEEKEND, "mechanism")))
    quick = WEEKEND.with_budget("quick")  # 3 generations each: population 1 spends 3 evaluations
    with pytest.raises(StudyError, match="population 16's first generation spends 16 evaluations, more than the 3"):
        family.check_equal_budget(compile_design(equal(quick, "population")))
    one = dataclasses.replace(WEEKEND, populations=(16,))
    with pytest.raises(StudyError, match="population's levels run the same evaluations here"):
        family.check_equal_budget(compile_design(equal(one, "population")))
    with pytest.raises(StudyError, match="adds rows to the paired test's family; test='adastop'"):
        equal(WEEKEND, "population", test="adastop", margin=None)

