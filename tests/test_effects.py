"""The effect beside each decision: its interval, agreement, and the seeds a paired test would need — against
scipy's own t-test and power on numbers whose answer is known."""

import numpy as np
import pytest
from scipy import stats

from bilevel_tune.report.answers import Answer
from bilevel_tune.verdicts import decide, effects, family

A = {1: 0.40, 2: 0.42, 3: 0.41, 4: 0.43}
B = {1: 0.45, 2: 0.46, 3: 0.47, 4: 0.46}


def test_matched_seeds_give_the_paired_t_interval_and_every_pair_agreeing():
    e = effects.effect(A, B, level=0.05)
    d = np.array([B[s] - A[s] for s in A])
    low, high = stats.ttest_rel(list(B.values()), list(A.values())).confidence_interval(0.95)
    assert e.paired and e.pairs == 4 and e.agreeing == 4
    assert e.mean == pytest.approx(d.mean()) and (e.low, e.high) == pytest.approx((low, high))


def test_the_seeds_needed_are_the_fewest_that_reach_the_stated_power():
    mean, sd_d, level = 0.01, 0.02, 0.05 / 4
    n = effects.seeds_needed(mean, sd_d, level)
    assert effects.power(mean / sd_d, n, level) >= effects.POWER > effects.power(mean / sd_d, n - 1, level)
    assert effects.seeds_needed(0.0, sd_d, level) is None, "no effect: no number of seeds shows one"
    assert effects.seeds_needed(1e-6, 1.0, level) == effects.MOST_SEEDS + 1


def test_unmatched_groups_fall_back_to_welch():
    e = effects.effect({1: 0.40, 2: 0.42}, {3: 0.45, 4: 0.48}, level=0.05)
    low, high = stats.ttest_ind([0.45, 0.48], [0.40, 0.42], equal_var=False).confidence_interval(0.95)
    assert not e.paired and (e.low, e.high) == pytest.approx((low, high))


def _undecided(e: effects.Effect, seeds: int, test: str = decide.ADASTOP) -> str:
    comparison = family.Comparison(family.POPULATION, (1, ("fixed_quota",), ()), (16, ("fixed_quota",), ()))
    decision = decide.Decision(comparison, decide.UNDECIDED, look=1, seeds=seeds, level=0.05)
    decisions = decide.Decisions((decision,), 1, 1, 0.05, seeds, test=test)
    return Answer(decision, e, (1, 1), (1.0, 1.0), (1.0, 1.0), (0.5, 0.5)).text(decisions)


def test_one_seed_per_cell_says_the_noise_is_unmeasured_not_that_there_is_no_effect():
    one = effects.effect({1: 0.40}, {1: 0.45}, level=0.05)
    assert one.mean == pytest.approx(0.05) and one.seeds_needed is None
    assert _undecided(one, 1) == (
        "undecided at 1 seeds; one seed per cell measures no seed noise: no estimate of the seeds needed"
    )
    same = effects.effect(A, A, level=0.05)
    assert _undecided(same, 4).endswith("no effect observed: no number of seeds would show one")


def test_a_paired_test_content_with_the_seeds_that_ran_says_so_beside_an_undecided():
    # six matched pairs that all agree (a paired test's case) in two groups whose spread hides it from an unpaired one
    a = {s: v for s, v in enumerate([0.40, 0.42, 0.44, 0.46, 0.48, 0.50])}
    b = {s: v + 0.01 + 0.001 * (s % 2) for s, v in a.items()}
    e = effects.effect(a, b, level=0.05)
    assert e.seeds_needed is not None and e.seeds_needed <= 6
    text = _undecided(e, 6)
    many = "as many as" if e.seeds_needed == 6 else "fewer than"
    need = f"a paired test would need {e.seeds_needed} seeds"
    assert text == f"undecided at 6 seeds; {need}, {many} ran (AdaStop does not pair them)"
    assert _undecided(e, e.seeds_needed - 1).endswith(need)
    paired = _undecided(e, 6, test=decide.PAIRED)  # the sequential paired t: its looks, not the pairing, cost power
    assert paired == (
        f"undecided at 6 seeds; a single paired t-test at its level would need {e.seeds_needed} seeds, {many} ran "
        "(the looks cost power)"
    )


def test_the_seeds_equivalence_needs_grow_as_the_difference_nears_the_margin_and_none_past_it():
    from bilevel_tune.verdicts import effects

    needs = [effects.equivalence_seeds_needed(mean, 0.003, 0.005, 0.01) for mean in (0.0, 0.004, 0.007)]
    assert needs[0] < needs[1] < needs[2] and needs[0] >= 2
    assert effects.equivalence_seeds_needed(0.01, 0.003, 0.005, 0.01) is None  # at the margin: never shown inside
    assert effects.equivalence_power(0.0, 0.003, needs[0], 0.005, 0.01) >= effects.POWER > effects.equivalence_power(
        0.0, 0.003, needs[0] - 1, 0.005, 0.01
    )
