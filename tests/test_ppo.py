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


@pytest.mark.ray
def test_the_batched_loss_of_one_candidate_is_rllibs_ppo_loss_on_its_rows(ray_cluster):
    import torch
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
    from ray.rllib.core import DEFAULT_MODULE_ID

    from bilevel_tune.appo.local_learner import local_learner
    from bilevel_tune.appo.ppo import PPOPolicyLoop
    from bilevel_tune.inner import InnerLoopConfig
    from bilevel_tune.worlds.lakes import Lake

    from .test_lakes import RULES, TINY

    loop = PPOPolicyLoop(InnerLoopConfig(**TINY, streams="lake"))
    try:
        loop.reset_lakes([Lake(RULES[0], 5, 0)])
        for _ in range(3):
            loop.train()  # the weights and the KL coefficient off their start
        learner, mid = local_learner(loop.algo), DEFAULT_MODULE_ID
        learner.curr_kl_coeffs_per_module[mid].data = learner.kl_coeffs[mid][0].clone()  # RLlib's reads its own
        assert float(learner.kl_coeffs[mid][0]) != 0.2  # adapted, by RLlib's rule, from this candidate's KL
        fragments = loop.algo.env_runner_group.local_env_runner.sample()
        rows = learner._learner_connector(rl_module=learner.module, batch={}, episodes=fragments, shared_data={})[mid]
        fwd_out = learner.module[mid].forward_train(rows)
        config = learner.config.get_config_for_module(mid)
        mine = learner.compute_loss_for_module(module_id=mid, config=config, batch=rows, fwd_out=fwd_out)
        stock = PPOTorchLearner.compute_loss_for_module(learner, module_id=mid, config=config, batch=rows, fwd_out=fwd_out)
        assert torch.isclose(mine, stock, rtol=1e-5, atol=1e-7), (float(mine), float(stock))
    finally:
        loop.stop()
