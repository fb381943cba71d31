"""PopulationAPPOModule: every candidate's APPO network as one RLModule with stacked parameters.

Candidate k of a block owns slice k of every parameter of RLlib's default
APPO network (`fcnet_hiddens`, tanh): an actor encoder (`trunk`), a critic
encoder (`critic`; APPO sets `vf_share_layers=False`), a policy head (`pi`:
for a Box action a diagonal Gaussian's mean and log std, for a Discrete or
MultiDiscrete one the logits of RLlib's (multi-)categorical) and a value
head (`vf`), with the target copies APPO's loss reads (`_old_trunk`, `_old_pi`). One batched
matmul per layer runs all candidates at once; slices never mix, so each
candidate computes exactly what its own stock module would.

Rows: a batch of B rows belongs to the candidates in equal, contiguous
blocks (B = N·R, candidate k's rows k·R … (k+1)·R − 1). A training batch
may also carry `LAKE_ROW` (`bilevel_tune.appo.batch`): all farms of a lake
see the same observation, so the encoder runs once per lake and day and
its output is copied to every farm's row.

Initial weights: candidate k's are those of RLlib's stock APPO module
built under `candidate_seed(generation seed, k)` (`SeededAPPOModule`, the
per-agent loop's module), copied in — so with no training both loops
evaluate every candidate identically.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import (
    TARGET_NETWORK_ACTION_DIST_INPUTS,
    InferenceOnlyAPI,
    TargetNetworkAPI,
    ValueFunctionAPI,
)
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from bilevel_tune.appo.seeded import INIT_SEED, seeded_module_class

LAKE_ROW = "bilevel_lake_row"  # batch column: the row whose observation (its lake's) this row shares
POPULATION, HIDDEN, INIT_SEEDS = "population", "fcnet_hiddens", "init_seeds"  # model_config keys
VF_SHARE_LAYERS = "vf_share_layers"  # RLlib's key; APPO sets it False
LOG_STD_CLIP = "log_std_clip_param"  # RLlib's key (default 20)


def farm_fraction(action):
    """A farm's requested fraction from its raw Gaussian action: (clip(a, −1, 1) + 1) / 2, in [0, 1].

    The one place the action is mapped to the env's Box(0, 1) (RLlib's
    `normalize_actions` unsquash, which the per-agent loop's sampling uses).
    """
    if isinstance(action, torch.Tensor):
        return (torch.clamp(action, -1.0, 1.0) + 1.0) / 2.0
    return (np.clip(action, -1.0, 1.0) + 1.0) / 2.0


class StackedLinear(nn.Module):
    """N independent Linear(in, out) layers: weight [N, out, in], bias [N, out]; x [N, R, in] → [N, R, out]."""

    def __init__(self, population: int, in_features: int, out_features: int):
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(population, out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(population, out_features).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor, each: bool = False) -> torch.Tensor:
        """One batched matmul; `each`: one `F.linear` per candidate, bit for bit what its own nn.Linear computes.

        (Batched and per-candidate kernels can round differently in the last bit for small layers.)
        """
        if each:
            return torch.stack([nn.functional.linear(x[k], self.weight[k], self.bias[k]) for k in range(len(x))])
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))


class StackedMLP(nn.Module):
    """N independent tanh MLPs (RLlib's `fcnet_hiddens` encoder), as StackedLinear layers."""

    def __init__(self, population: int, sizes: Sequence[int]):
        super().__init__()
        self.layers = nn.ModuleList(StackedLinear(population, a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x: torch.Tensor, each: bool = False) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x, each))
        return x


class PopulationAPPOModule(TorchRLModule, ValueFunctionAPI, TargetNetworkAPI, InferenceOnlyAPI):
    """N candidates' APPO networks in one RLModule (model_config: population, fcnet_hiddens, init_seeds).

    As RLlib's default APPO module: an actor encoder, a critic encoder
    (unless `vf_share_layers`, then the actor's), a policy and a value head.
    """

    def setup(self):
        config = self.model_config or {}
        self.population = int(config[POPULATION])
        hidden = list(config.get(HIDDEN, (256, 256)))
        self.shared_encoder = bool(config.get(VF_SHARE_LAYERS, True))
        obs_size = int(np.prod(self.observation_space.shape))
        self.trunk = StackedMLP(self.population, [obs_size, *hidden])
        if not self.shared_encoder:
            self.critic = StackedMLP(self.population, [obs_size, *hidden])
        self.gaussian = isinstance(self.action_space, gym.spaces.Box)
        self.pi = StackedLinear(self.population, hidden[-1], head_width(self.action_space))
        self.vf = StackedLinear(self.population, hidden[-1], 1)
        self.log_std_clip = float(config.get(LOG_STD_CLIP, 20.0))  # RLlib's Gaussian head clamps log std
        # TorchRLModule drops critic and vf from an inference-only copy (an env runner's).
        self.action_dist_cls = action_dist_class(self.action_space)
        seeds = config.get(INIT_SEEDS)
        if seeds is not None and not self.inference_only:  # an env runner's copy gets the learner's weights
            self.load_stock_weights(seeds)

    def load_stock_weights(self, seeds: Sequence[int]) -> None:
        """Candidate k's slices from RLlib's stock APPO module built under seeds[k]."""
        if len(seeds) != self.population:
            raise ValueError(f"{len(seeds)} init seeds for a population of {self.population}")
        stock_cls = seeded_module_class()
        model_config = {k: v for k, v in self.model_config.items() if k not in (POPULATION, INIT_SEEDS)}
        with torch.no_grad():
            for k, seed in enumerate(seeds):
                stock = stock_cls(
                    observation_space=self.observation_space,
                    action_space=self.action_space,
                    inference_only=False,
                    model_config={**model_config, INIT_SEED: int(seed)},
                )
                for name, layer in self.stock_layers().items():
                    theirs = stock_linear(stock, name)
                    layer.weight[k].copy_(theirs.weight)
                    layer.bias[k].copy_(theirs.bias)

    def stock_layers(self) -> dict[str, StackedLinear]:
        """Each stacked layer under the name of the Linear it mirrors in RLlib's default APPO module."""
        encoders = [("encoder.encoder" if self.shared_encoder else "encoder.actor_encoder", self.trunk)]
        if hasattr(self, "critic"):
            encoders.append(("encoder.critic_encoder", self.critic))
        if hasattr(self, "_old_trunk"):
            encoders.append(("_old_" + encoders[0][0], self._old_trunk))
        out = {f"{prefix}.net.mlp.{2 * i}": layer for prefix, mlp in encoders for i, layer in enumerate(mlp.layers)}
        heads = {"pi": self.pi, "vf": getattr(self, "vf", None), "_old_pi": getattr(self, "_old_pi", None)}
        out.update({f"{name}.net.mlp.0": layer for name, layer in heads.items() if layer is not None})
        return out

    # -- rows ------------------------------------------------------------------------
    def _blocks(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if rows % self.population:
            raise ValueError(f"{rows} rows do not split into {self.population} equal candidate blocks")
        return x.reshape(self.population, rows // self.population, *x.shape[1:])

    def _lakes(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the observations to encode, one per lake and day [N, L, D]; each batch row's index among them, or None)."""
        obs = batch[Columns.OBS].float()
        lake_row = batch.get(LAKE_ROW)
        if lake_row is None:
            return self._blocks(obs), None
        lakes, inverse = torch.unique(lake_row, sorted=True, return_inverse=True)
        return self._blocks(obs[lakes]), inverse

    @staticmethod
    def _rows(per_lake: torch.Tensor, inverse: torch.Tensor | None) -> torch.Tensor:
        flat = per_lake.reshape(-1, per_lake.shape[-1])
        return flat if inverse is None else flat[inverse]

    def _gaussian(self, head: StackedLinear, embeddings: torch.Tensor, each: bool = False) -> torch.Tensor:
        """The policy head as RLlib's `TorchMLPHead`: for a diagonal Gaussian [means, clamped log stds]; for a
        (multi-)categorical its logits as they are."""
        out = head(embeddings, each)
        if not self.gaussian:
            return out
        means, log_stds = torch.chunk(out, chunks=2, dim=-1)
        return torch.cat([means, torch.clamp(log_stds, -self.log_std_clip, self.log_std_clip)], dim=-1)

    def _critic(self, lakes: torch.Tensor) -> torch.Tensor:
        return self.trunk(lakes) if self.shared_encoder else self.critic(lakes)

    # -- forward passes ---------------------------------------------------------------------
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        lakes, inverse = self._lakes(batch)
        return {Columns.ACTION_DIST_INPUTS: self._rows(self._gaussian(self.pi, self.trunk(lakes)), inverse)}

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        lakes, inverse = self._lakes(batch)
        return {
            Columns.ACTION_DIST_INPUTS: self._rows(self._gaussian(self.pi, self.trunk(lakes)), inverse),
            Columns.EMBEDDINGS: (self._critic(lakes), inverse),  # compute_values reuses them
        }

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is None:
            lakes, inverse = self._lakes(batch)
            embeddings = (self._critic(lakes), inverse)
        critic, inverse = embeddings
        return self._rows(self.vf(critic), inverse).squeeze(-1)

    # -- APPO's target network ------------------------------------------------------------------
    def make_target_networks(self) -> None:
        self._old_trunk = make_target_network(self.trunk)
        self._old_pi = make_target_network(self.pi)

    def get_target_network_pairs(self):
        return [(self.trunk, self._old_trunk), (self.pi, self._old_pi)]

    def forward_target(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        lakes, inverse = self._lakes(batch)
        return {
            TARGET_NETWORK_ACTION_DIST_INPUTS: self._rows(self._gaussian(self._old_pi, self._old_trunk(lakes)), inverse)
        }

    def get_non_inference_attributes(self) -> list[str]:
        return ["critic", "vf", "_old_trunk", "_old_pi"]

    # -- action distributions (RLlib's, as the stock module's catalog picks for a Box) ---------
    def get_inference_action_dist_cls(self):
        return self.action_dist_cls

    def get_exploration_action_dist_cls(self):
        return self.action_dist_cls

    def get_train_action_dist_cls(self):
        return self.action_dist_cls

    # -- reading it ------------------------------------------------------------------------------
    def greedy_actions(self, obs: np.ndarray) -> np.ndarray:
        """Explore-off raw actions of each candidate: [N, D] (one observation per copy) → [N, A], [N, agents, D] → [N, agents, A]
        (a Discrete's: [N, agents] indices).

        Layer by layer per candidate (`each`): bit for bit what each candidate's own stock
        module acts, so evaluations of untrained policies match the per-agent loop's exactly.
        """
        obs = np.asarray(obs, dtype=np.float32)
        rows = obs[:, None, :] if obs.ndim == 2 else obs
        with torch.no_grad():
            inputs = self._gaussian(self.pi, self.trunk(torch.from_numpy(rows), each=True), each=True)
            mean = self.action_dist_cls.from_logits(inputs.reshape(-1, inputs.shape[-1])).to_deterministic().sample()
        if isinstance(self.action_space, gym.spaces.Discrete):
            return mean.reshape(*rows.shape[:2]).numpy()
        mean = mean.reshape(*rows.shape[:2], -1).numpy()
        return mean[:, 0] if obs.ndim == 2 else mean

    def candidate_parameters(self, k: int) -> dict[str, torch.Tensor]:
        """Candidate k's slice of every parameter, named as in its stock APPO module."""
        out = {}
        for name, layer in self.stock_layers().items():
            out[f"{name}.weight"], out[f"{name}.bias"] = layer.weight[k], layer.bias[k]
        return out


def head_width(action_space) -> int:
    """The policy head's outputs for an action space: a Gaussian's means and log stds, or the categorical logits."""
    if isinstance(action_space, gym.spaces.Box):
        return 2 * int(np.prod(action_space.shape))
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    return int(np.sum(action_space.nvec))


def action_dist_class(action_space):
    """RLlib's action distribution for the space, as its default module's catalog picks it."""
    if isinstance(action_space, gym.spaces.Box):
        from ray.rllib.models.torch.torch_distributions import TorchDiagGaussian

        return TorchDiagGaussian
    from ray.rllib.core.models.catalog import Catalog

    return Catalog._get_dist_cls_from_action_space(action_space, framework="torch")


def stock_linear(stock: nn.Module, name: str) -> nn.Linear:
    """The Linear layer `name` of RLlib's default APPO module; a clear error if RLlib renamed it."""
    try:
        layer = stock.get_submodule(name)
    except AttributeError:
        layer = None
    if not isinstance(layer, nn.Linear):
        raise RuntimeError(
            f"RLlib's default APPO module has no Linear layer {name!r} any more; "
            "PopulationAPPOModule cannot mirror its initial weights"
        )
    return layer
