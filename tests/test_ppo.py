"""The batched PPO learner's pieces: advantages per candidate, minibatches per candidate (no Ray actors)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.rllib


def _rows(rng, population: int, per_candidate: int) -> dict[str, np.ndarray]:
    size = population * per_candidate
    return {
        "rewards": rng.normal(size=size).astype(np.float32),
        "terminateds": np.zeros(size, bool),
        "truncateds": np.tile(np.arange(per_candidate) % 6 == 5, population),  # episodes of 6 rows
    }


def test_each_candidates_advantages_are_what_rllib_computes_for_its_rows_alone():
    from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets

    from bilevel_tune.appo.ppo_learner import advantages_per_candidate

    rng = np.random.default_rng(0)
    rows = _rows(rng, 3, 18)
    rows["rewards"][18:36] *= 10  # a candidate of another scale: standardized on its own
    values = rng.normal(size=54).astype(np.float32)
    targets, advantages = advantages_per_candidate(3, values, rows, 0.9, 0.95)
    for k in range(3):
        part = slice(18 * k, 18 * (k + 1))
        own = compute_value_targets(values[part], *(rows[c][part].astype(np.float32) for c in rows), 0.9, 0.95)
        assert np.array_equal(targets[part], own)
        assert abs(advantages[part].mean()) < 1e-6 and abs(advantages[part].std() - 1) < 1e-4
        assert np.allclose(advantages[part], ((own - values[part]) - (own - values[part]).mean()) / (own - values[part]).std(), atol=1e-5)


def test_a_minibatch_takes_each_candidates_rows_from_its_own_shuffle_and_the_last_is_filled_from_the_next():
    from bilevel_tune.appo.ppo_learner import minibatch_orders

    def orders(seeds):
        return minibatch_orders([np.random.default_rng(s) for s in seeds], per_candidate=22, size=10)

    three = orders([4, 5, 6])
    assert [len(m) for m in three] == [30, 30, 30]  # ⌈22 / 10⌉ minibatches of 10 rows a candidate
    for k in range(3):
        rows = np.concatenate([m.numpy()[10 * k : 10 * (k + 1)] for m in three])
        assert set(rows[:22]) == set(range(22 * k, 22 * (k + 1)))  # an epoch of the candidate's own rows
        assert set(rows[22:]) <= set(rows[:22]) and len(set(rows[22:])) == 8  # then 8 of its next shuffle
    alone = orders([5])  # the candidate's order is its generator's, whichever candidates share the module
    assert all(np.array_equal(a.numpy(), b.numpy()[10:20] - 22) for a, b in zip(alone, three))
