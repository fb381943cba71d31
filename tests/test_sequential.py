"""The group-sequential paired t and the graphical procedure, against published numbers and hand-worked cases."""

import numpy as np
import pytest
from scipy import stats

from bilevel_tune.verdicts import sequential
from bilevel_tune.verdicts.graph import Graph


def test_the_obrien_fleming_bounds_are_gsdesigns():
    """R gsDesign's sfLDOF, 5 equally spaced looks, two-sided 0.05 (one-sided 0.025 a side)."""
    bounds = sequential.z_bounds(tuple(k / 5 for k in range(1, 6)), 0.05)
    assert bounds == pytest.approx((4.877, 3.357, 2.680, 2.290, 2.031), abs=1e-3)
    assert sequential.z_bounds((1.0,), 0.05) == pytest.approx((stats.norm.isf(0.025),))  # one look: the z-test


def test_the_spending_function_spends_the_whole_level_by_the_last_look_and_little_early():
    assert sequential.spent(1.0, 0.05) == pytest.approx(0.05)
    assert sequential.spent(1 / 3, 0.05) < 0.001 < sequential.spent(2 / 3, 0.05) < 0.05
    assert sequential.spent(0.0, 0.05) == 0.0


def test_one_look_is_the_plain_paired_t_test():
    levels = sequential.t_levels(6, 1, 0.05)
    assert levels.scale == 1.0 and levels.critical[0] == pytest.approx(stats.t.isf(0.025, 5))
    d = np.array([0.01, 0.012, 0.008, 0.011, 0.009, 0.010])
    assert levels.crosses(d, 1) == (stats.ttest_1samp(d, 0).pvalue <= 0.05)


def test_calibrated_levels_hold_the_error_over_the_looks_where_the_normal_bounds_do_not():
    """Small degrees of freedom: the normal bounds' nominal levels, used for a t, spend more than α; the calibrated
    ones spend α — checked on fresh draws, not the calibration's own."""
    levels = sequential.t_levels(2, 3, 0.05)
    assert 0.85 < levels.scale < 1.0
    rng = np.random.default_rng(7)
    d = rng.standard_normal((100_000, 6))
    counts = np.array([2, 4, 6])
    t = np.stack([np.abs(d[:, :k].mean(1)) * np.sqrt(k) / d[:, :k].std(1, ddof=1) for k in counts], axis=1)
    uncalibrated = stats.t.isf(np.array(levels.nominal) / levels.scale / 2, counts - 1)
    assert np.mean((t >= uncalibrated).any(1)) > 0.052  # the inflation the calibration removes
    assert np.mean((t >= np.array(levels.critical)).any(1)) == pytest.approx(0.05, abs=0.0025)


def test_the_same_plan_gives_the_same_boundaries_every_time():
    sequential.t_levels.cache_clear()
    first = sequential.t_levels(2, 6, 0.05 / 3)
    sequential.t_levels.cache_clear()
    assert sequential.t_levels(2, 6, 0.05 / 3) == first


def test_pairs_without_spread_are_decided_by_the_sign_flip_never_by_nan():
    levels = sequential.t_levels(6, 1, 0.05)
    assert not levels.crosses(np.zeros(6), 1)  # identical runs: no evidence, no division by zero
    assert levels.crosses(np.full(6, 0.002), 1)  # every pair agrees: 2 / 2**6 = 0.031 ≤ 0.05
    assert not sequential.t_levels(4, 1, 0.05).crosses(np.full(4, 0.002), 1)  # 2 / 2**4 = 0.125
    assert sequential.sign_flip_p(np.full(6, 0.3)) == pytest.approx(2 / 64)
    assert sequential.sign_flip_p([1.0, -1.0, 1.0, 1.0]) == pytest.approx(10 / 16)


def test_power_rises_with_the_effect_and_the_detectable_effect_reaches_the_target():
    levels = sequential.t_levels(2, 3, 0.05)
    assert sequential.power(levels, 0.0) == pytest.approx(0.05, abs=0.002)
    size = sequential.detectable(levels, 0.8)
    assert sequential.power(levels, size) >= 0.8 > sequential.power(levels, size * 0.95)
    assert sequential.detectable(levels, 0.8, by_look=2) > size  # four seeds need a larger effect than six
    assert sequential.detectable(sequential.t_levels(1, 1, 0.05), 0.8) == float("inf")  # one pair: no t


def test_the_complete_graph_with_equal_edges_is_holms_procedure():
    m = 4
    graph = Graph.of(np.full(m, 1 / m), (np.ones((m, m)) - np.eye(m)) / (m - 1))
    assert [graph.level(j, 0.05) for j in range(m)] == pytest.approx([0.0125] * 4)
    graph = graph.reject(2)
    assert [graph.level(j, 0.05) for j in (0, 1, 3)] == pytest.approx([0.05 / 3] * 3) and graph.level(2, 0.05) == 0
    graph = graph.reject(0).reject(3)
    assert graph.level(1, 0.05) == pytest.approx(0.05)


def test_a_gate_opens_only_when_its_parent_is_rejected():
    # 0 → {2, 3} (its children), 1 → 0; children pass to each other, then back to 1
    eps = 1e-6
    edges = [[0, 0, 0.5, 0.5], [1, 0, 0, 0], [0, eps, 0, 1 - eps], [0, eps, 1 - eps, 0]]
    graph = Graph.of([0.5, 0.5, 0, 0], edges)
    assert graph.level(2, 0.05) == 0
    graph = graph.reject(0)
    assert graph.level(2, 0.05) == pytest.approx(0.0125) and graph.level(1, 0.05) == pytest.approx(0.025)
    graph = graph.reject(2).reject(3)
    assert graph.level(1, 0.05) == pytest.approx(0.05, rel=1e-5)  # nothing is lost along the ε-edges


def test_a_graph_that_would_spend_more_than_alpha_is_refused():
    with pytest.raises(ValueError, match="summing to at most 1"):
        Graph.of([0.6, 0.6], [[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="cannot pass its share to itself"):
        Graph.of([0.5, 0.5], [[0.5, 0.5], [1, 0]])
