"""The ES of docs/es.md on landscapes whose answer is known."""

import json

import numpy as np
import pytest

from bilevel_tune.core import es, metrics

TARGET = np.array([0.3, 0.7])


def quadratic(candidates):
    return -((np.asarray(candidates) - TARGET) ** 2).sum(axis=1)


def run(state, generations, objective=quadratic):
    history = []
    for _ in range(generations):
        candidates = es.ask(state)
        state, m = es.tell(state, candidates, objective(candidates))
        history.append(m)
    return state, history


def test_population_16_reaches_the_optimum_well_inside_300_generations():
    state = es.init(es.ESConfig(population=16), dim=2, seed=42)
    first = None
    for g in range(300):
        state, _ = run(state, 1)
        if first is None and np.linalg.norm(state.mean - TARGET) < 0.02:
            first = g
    assert first is not None and first < 150


def test_one_plus_one_never_lowers_best_and_accepts_only_strict_improvements():
    state = es.init(es.ESConfig(population=1), dim=2, seed=7)
    state, history = run(state, 200)
    bests = [m[metrics.BEST_OBJECTIVE] for m in history]
    assert bests == sorted(bests)
    assert history[0][metrics.GEN_BEST_CANDIDATE] == pytest.approx([0.5, 0.5])  # generation 0 evaluates the mean
    baseline = history[0][metrics.GEN_BEST_OBJECTIVE]
    for m in history[1:]:
        assert m[metrics.ACCEPTED] == (m[metrics.GEN_BEST_OBJECTIVE] > baseline)
        baseline = max(baseline, m[metrics.GEN_BEST_OBJECTIVE])
    assert np.linalg.norm(state.mean - TARGET) < 0.05


def test_one_plus_one_rejects_a_tie():
    state = es.init(es.ESConfig(population=1), dim=1, seed=0)
    state, _ = es.tell(state, es.ask(state), [1.0])
    mean_before, sigma_before = state.mean_logit, state.sigma
    state, m = es.tell(state, es.ask(state), [1.0])
    assert m[metrics.ACCEPTED] is False and state.mean_logit == mean_before
    assert state.sigma == pytest.approx(sigma_before * es.ESConfig().sigma_factor)


def test_one_plus_one_success_widens_sigma():
    state = es.init(es.ESConfig(population=1), dim=1, seed=0)
    state, _ = es.tell(state, es.ask(state), [0.0])
    state, m = es.tell(state, es.ask(state), [1.0])
    assert m[metrics.ACCEPTED] and state.sigma == pytest.approx(0.15 / es.ESConfig().sigma_factor)
    assert state.mean == pytest.approx(m[metrics.BEST_CANDIDATE])


@pytest.mark.parametrize("scale,shift", [(3.0, -2.0), (0.001, 100.0), (250.0, 0.0)])
def test_zscore_update_is_invariant_to_affine_rescaling(scale, shift):
    state = es.init(es.ESConfig(population=8), dim=2, seed=3)
    candidates = es.ask(state)
    f = quadratic(candidates)
    a, _ = es.tell(state, candidates, f)
    b, _ = es.tell(state, candidates, scale * f + shift)
    np.testing.assert_allclose(a.mean_logit, b.mean_logit, rtol=0, atol=1e-9)


def test_antithetic_pairs_mirror_in_logit_space():
    state = es.init(es.ESConfig(population=6), dim=3, seed=11, mean=[0.2, 0.5, 0.9])
    logits = np.log(es.ask(state)) - np.log1p(-es.ask(state))
    mu = np.array(state.mean_logit)
    np.testing.assert_allclose(logits[:3] - mu, -(logits[3:] - mu), atol=1e-9)


def test_shaping_by_hand():
    np.testing.assert_allclose(
        es.shape_fitness([1.0, 2.0, 3.0, 4.0]), (np.arange(1, 5) - 2.5) / np.std(np.arange(1, 5))
    )
    assert es.shape_fitness([2.0, 2.0, 2.0 + 1e-10, 2.0]).tolist() == [0.0] * 4  # flat → zeros
    np.testing.assert_allclose(es.shape_fitness([10.0, 30.0, 20.0, 20.0], "centered_rank"), [-0.5, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(es.fill_failed([1.0, np.nan, 3.0, -np.inf]), [1.0, 1.0, 3.0, 1.0])
    with pytest.raises(ValueError, match="shaping='fancy'.*zscore, centered_rank"):
        es.shape_fitness([1.0], "fancy")


def test_failed_candidates_rank_worst_and_never_become_best():
    state = es.init(es.ESConfig(population=4), dim=1, seed=0)
    candidates = es.ask(state)
    new, m = es.tell(state, candidates, [np.nan, 0.5, np.inf, 0.2])
    assert m[metrics.FAILED] == 2 and new.failed_total == 2
    assert m[metrics.BEST_OBJECTIVE] == 0.5 and m[metrics.BEST_CANDIDATE] == pytest.approx(candidates[1])
    same, _ = es.tell(state, candidates, [0.2, 0.5, 0.2, 0.2])  # failures take the worst finite value
    assert same.mean_logit == new.mean_logit


def test_an_all_failed_generation_changes_nothing_but_the_counter():
    state = es.init(es.ESConfig(population=4), dim=2, seed=0)
    state, _ = run(state, 3)
    new, m = es.tell(state, es.ask(state), [np.nan] * 4)
    assert m[metrics.ALL_FAILED] and m[metrics.FAILED] == 4
    assert (new.mean_logit, new.sigma, new.best_objective) == (state.mean_logit, state.sigma, state.best_objective)
    assert new.generation == state.generation + 1
    one = es.init(es.ESConfig(population=1), dim=1, seed=0)
    one, m = es.tell(one, es.ask(one), [np.nan])  # generation 0 failed: baseline stays −∞
    one, m = es.tell(one, es.ask(one), [-5.0])
    assert m[metrics.ACCEPTED] and m[metrics.BEST_OBJECTIVE] == -5.0


def test_sigma_adapts_on_the_population_mean():
    cfg = es.ESConfig(population=2)
    state = es.init(cfg, dim=1, seed=0)
    state, _ = es.tell(state, es.ask(state), [0.0, 1.0])  # first generation: nothing to compare
    assert state.sigma == 0.15
    state, _ = es.tell(state, es.ask(state), [2.0, 3.0])  # better → σ·γ
    assert state.sigma == pytest.approx(0.15 * cfg.sigma_factor)
    state, _ = es.tell(state, es.ask(state), [2.0, 3.0 + 1e-4])  # within tolerance → unchanged
    assert state.sigma == pytest.approx(0.15 * cfg.sigma_factor)
    state, _ = es.tell(state, es.ask(state), [0.0, 1.0])  # worse → σ/γ
    assert state.sigma == pytest.approx(0.15)


def test_gradient_norm_is_clipped():
    cfg = es.ESConfig(population=2, lr=1.0, grad_clip=0.5, sigma_min=0.01, sigma=0.01)
    state = es.init(cfg, dim=1, seed=0)
    new, m = es.tell(state, es.ask(state), [0.0, 1.0])
    assert m[metrics.GRAD_NORM] > 0.5
    assert abs(new.mean_logit[0] - state.mean_logit[0]) == pytest.approx(0.5)


def test_same_seed_same_trajectory_and_other_seed_differs():
    a, _ = run(es.init(es.ESConfig(population=4), 2, seed=5), 20)
    b, _ = run(es.init(es.ESConfig(population=4), 2, seed=5), 20)
    c, _ = run(es.init(es.ESConfig(population=4), 2, seed=6), 20)
    assert a == b and a != c


@pytest.mark.parametrize("population", [1, 2, 16])
@pytest.mark.parametrize("dim", [1, 2])
def test_checkpoint_round_trip_continues_identically(population, dim):
    objective = lambda c: -((c - TARGET[:dim]) ** 2).sum(axis=1)  # noqa: E731
    state = es.init(es.ESConfig(population=population), dim, seed=42)
    state, _ = run(state, 7, objective)
    restored = es.ESState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored == state
    full, _ = run(state, 10, objective)
    resumed, _ = run(restored, 10, objective)
    assert full == resumed
    assert es.ask(state).shape == (population, dim)


def test_ask_is_pure():
    state = es.init(es.ESConfig(population=4), 2, seed=1)
    np.testing.assert_array_equal(es.ask(state), es.ask(state))
    assert np.all((es.ask(state) > 0) & (es.ask(state) < 1))


def test_tell_refuses_candidates_that_were_not_asked():
    state = es.init(es.ESConfig(population=2), 1, seed=1)
    with pytest.raises(ValueError, match="not ask"):
        es.tell(state, es.ask(state) + 0.01, [0.0, 1.0])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"population": 0}, "population=0"),
        ({"population": 3}, "population=3.*even"),
        ({"population": -2}, "population=-2"),
        ({"sigma": 0.5}, r"sigma=0.5.*\[0.01, 0.25\]"),
        ({"shaping": "ranks"}, "shaping='ranks'.*zscore, centered_rank"),
        ({"lr": 0.0}, "lr=0.0"),
        ({"sigma_decay": 1.5}, "sigma_decay"),
        ({"sigma_min": 0.3}, "sigma_min"),
    ],
)
def test_bad_configs_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        es.ESConfig(**kwargs)


def test_bad_init_arguments():
    with pytest.raises(ValueError, match="dim=0"):
        es.init(es.ESConfig(), 0, seed=1)
    with pytest.raises(ValueError, match="seed=-1"):
        es.init(es.ESConfig(), 1, seed=-1)
    with pytest.raises(ValueError, match="initial mean"):
        es.init(es.ESConfig(), 2, seed=1, mean=[0.5, 1.5])
