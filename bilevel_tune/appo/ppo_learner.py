"""PPO on a population module: RLlib's PPO learner, each candidate's update its own (the batched `ppo` loop).

PPO's method is the per-agent path's (`ppo.ppo_config`: RLlib's defaults — GAE, the clipped surrogate, the
clipped value loss, the entropy bonus, the adaptive KL penalty — and one epoch of minibatches of one season's
rows each); what RLlib does per module, the population does per candidate:

* **Advantages** (`PopulationPPOBatch`, the learner connector): RLlib's GAE (`compute_value_targets`) over
  each candidate's rows as RLlib lays out a module's, standardized per candidate. The value predictions and
  the sampling policy's action distribution (the KL term's reference) come from the module as it sampled:
  PPO syncs its weights to the sampler after every update.
* **Minibatches** (`PopulationPPOLearner._update`): each candidate's rows shuffled by a generator of its own,
  seeded from its lake's initial-weight seed, and cut into minibatches of `minibatch` rows; minibatch j holds
  every candidate's j-th slice, so each stays one contiguous block of the module's rows. As RLlib's cyclic
  minibatches on the per-agent path, the last one is filled from the candidate's next shuffle.
* **Loss**: RLlib's PPO loss terms, each a masked mean over the candidate's own rows, summed over candidates;
  one KL coefficient per candidate, adapted by RLlib's rule from that candidate's KL; the gradient clipped per
  candidate (`learner.ClippedPerCandidate`). Adam is elementwise.

So a candidate's update depends on its own rows and streams only: a lake trains the same beside any block-mates
(up to the batched matmul's last bits, docs/inner-loop.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.algorithms.ppo.ppo import LEARNER_RESULTS_CURR_KL_COEFF_KEY, LEARNER_RESULTS_KL_KEY
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets

from bilevel_tune.appo.batch import PopulationBatch
from bilevel_tune.appo.learner import ClippedPerCandidate
from bilevel_tune.appo.module import INIT_SEEDS, LAKE_ROW

MINIBATCH_STREAM = 2  # appended to a lake's initial-weight seed: its minibatch order's own stream


class PopulationPPOBatch(PopulationBatch):
    """PPO's learner connector for a population: `PopulationBatch`'s rows, unpadded, with GAE per candidate."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, gamma: float, lambda_: float, **kwargs):
        super().__init__(input_observation_space, input_action_space, chunk=1, **kwargs)
        self.gamma, self.lambda_ = float(gamma), float(lambda_)

    def __call__(self, *, rl_module, batch: dict[str, Any], episodes, **kwargs):
        batch = super().__call__(rl_module=rl_module, batch=batch, episodes=episodes, **kwargs)
        for module_id, rows in batch.items():
            module = rl_module[module_id].unwrapped()
            with torch.no_grad():
                out = module.forward_train(rows)
                values = module.compute_values(rows, embeddings=out[Columns.EMBEDDINGS]).numpy()
            rows[Columns.ACTION_DIST_INPUTS] = out[Columns.ACTION_DIST_INPUTS]
            rows.pop(LAKE_ROW, None)  # minibatches mix a lake's rows: each row is encoded on its own
            targets, advantages = advantages_per_candidate(module.population, values, rows, self.gamma, self.lambda_)
            rows[Postprocessing.VALUE_TARGETS] = torch.from_numpy(targets)
            rows[Postprocessing.ADVANTAGES] = torch.from_numpy(advantages)
        return batch


def advantages_per_candidate(population: int, values: np.ndarray, rows, gamma: float, lambda_: float):
    """RLlib's GAE value targets and standardized advantages, for each candidate's block of rows on its own."""
    column = lambda key: np.asarray(rows[key], dtype=np.float32).reshape(population, -1)  # noqa: E731
    values = values.astype(np.float32).reshape(population, -1)
    rewards, terminateds, truncateds = column(Columns.REWARDS), column(Columns.TERMINATEDS), column(Columns.TRUNCATEDS)
    targets = np.stack(
        [compute_value_targets(v, r, d, t, gamma, lambda_) for v, r, d, t in zip(values, rewards, terminateds, truncateds)]
    )
    advantages = targets - values
    advantages = (advantages - advantages.mean(1, keepdims=True)) / np.maximum(1e-4, advantages.std(1, keepdims=True))
    return targets.reshape(-1), advantages.reshape(-1).astype(np.float32)


def minibatch_orders(shufflers: list[np.random.Generator], per_candidate: int, size: int) -> list[torch.Tensor]:
    """One epoch's minibatches of a module's rows (candidate k's: k·R … (k+1)·R − 1), candidate-major: each takes
    `size` rows of every candidate, in the order of that candidate's own shuffle. As RLlib's cyclic minibatches, the
    last is filled from the candidate's next shuffle."""
    short = -per_candidate % size
    shuffled = np.stack([
        np.concatenate([rng.permutation(per_candidate), rng.permutation(per_candidate)[:short] if short else []])
        for rng in shufflers
    ]).astype(np.int64)  # fmt: skip
    shuffled += np.arange(len(shufflers))[:, None] * per_candidate
    return [torch.from_numpy(shuffled[:, a : a + size].reshape(-1)) for a in range(0, shuffled.shape[1], size)]


class PopulationPPOLearner(ClippedPerCandidate, PPOTorchLearner):
    """RLlib's PPO learner on a population module: a minibatch takes each candidate's `train_batch_size_per_learner`
    rows (one season's: the per-agent path's `minibatch_size`, a module's rows)."""

    def build(self) -> None:
        super().build()
        self.kl_coeffs: dict[str, torch.Tensor] = {}  # per module: each candidate's KL coefficient
        self.last_kl: dict[str, torch.Tensor] = {}  # per module: each candidate's KL in the last minibatch
        self.shufflers: dict[str, list[np.random.Generator]] = {}  # per module: each candidate's minibatch order

    def _update(self, batch: dict[str, Any], **kwargs):
        """One epoch: minibatch j holds each candidate's j-th slice of its own shuffle, candidate-major."""
        orders = {module_id: self._orders(module_id, len(rows[Columns.LOSS_MASK])) for module_id, rows in batch.items()}
        slices = max(len(order) for order in orders.values())
        result = None
        for j in range(slices):
            minibatch = {
                module_id: {key: column[orders[module_id][j]] for key, column in rows.items()}
                for module_id, rows in batch.items()
                if j < len(orders[module_id])
            }
            result = super()._update(minibatch, **kwargs)
        return result

    def _orders(self, module_id: str, rows: int) -> list[torch.Tensor]:
        module = self.module[module_id].unwrapped()
        per_candidate = rows // module.population
        if module_id not in self.shufflers:
            seeds = module.model_config[INIT_SEEDS]
            self.shufflers[module_id] = [np.random.default_rng([int(seed), MINIBATCH_STREAM]) for seed in seeds]
        return minibatch_orders(self.shufflers[module_id], per_candidate, self.config.train_batch_size_per_learner)

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        module = self.module[module_id].unwrapped()
        population = module.population
        mask = batch[Columns.LOSS_MASK].reshape(population, -1)
        count = mask.sum(1).clamp(min=1)

        def mean(x: torch.Tensor) -> torch.Tensor:  # per candidate: the masked mean over its rows [N]
            return torch.where(mask, x.reshape(population, -1), 0.0).sum(1) / count

        current = module.get_train_action_dist_cls().from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        sampled = module.get_exploration_action_dist_cls().from_logits(batch[Columns.ACTION_DIST_INPUTS])
        ratio = torch.exp(current.logp(batch[Columns.ACTIONS]) - batch[Columns.ACTION_LOGP])
        advantages = batch[Postprocessing.ADVANTAGES]
        surrogate = torch.min(
            advantages * ratio, advantages * torch.clamp(ratio, 1 - config.clip_param, 1 + config.clip_param)
        )
        values = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        vf_loss = torch.clamp(torch.pow(values - batch[Postprocessing.VALUE_TARGETS], 2.0), 0, config.vf_clip_param)
        entropy = current.entropy()
        entropy_coeff = self.entropy_coeff_schedulers_per_module[module_id].get_current_value()
        loss = mean(-surrogate + config.vf_loss_coeff * vf_loss - entropy_coeff * entropy)
        kl = mean(sampled.kl(current)) if config.use_kl_loss else torch.zeros_like(loss)
        if config.use_kl_loss:
            loss = loss + self._kl_coeffs(module_id, population, config) * kl
            self.last_kl[module_id] = kl.detach()
        self.metrics.log_dict(
            {
                POLICY_LOSS_KEY: -mean(surrogate).mean(),
                VF_LOSS_KEY: mean(vf_loss).mean(),
                ENTROPY_KEY: mean(entropy).mean(),
                LEARNER_RESULTS_KL_KEY: kl.mean(),
            },
            key=module_id,
            window=1,
        )
        return loss.sum()

    def _kl_coeffs(self, module_id: str, population: int, config) -> torch.Tensor:
        if module_id not in self.kl_coeffs:
            self.kl_coeffs[module_id] = torch.full((population,), float(config.kl_coeff))
        return self.kl_coeffs[module_id]

    def _update_module_kl_coeff(self, *, module_id, config, kl_loss) -> None:
        """RLlib's rule (×1.5 above twice the target, ×0.5 below half of it), candidate by candidate."""
        if module_id not in self.last_kl:
            return
        kl, coeffs = self.last_kl[module_id], self.kl_coeffs[module_id]
        coeffs.mul_(torch.where(kl > 2.0 * config.kl_target, 1.5, torch.where(kl < 0.5 * config.kl_target, 0.5, 1.0)))
        self.metrics.log_value((module_id, LEARNER_RESULTS_CURR_KL_COEFF_KEY), float(coeffs.mean()), window=1)
