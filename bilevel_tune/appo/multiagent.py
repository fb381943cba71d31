"""The per-agent APPO loop (`appo-multiagent`): RLlib's multi-agent path, one module per candidate.

The block's copies of the world live in one `WorldEnv` (agents
`c{j}/{word}{i}`; fresh water's `c{j}/farm{i}`), all agents of candidate j
share module `cand{j}` — a `SeededAPPOModule` — and RLlib's default
connectors, episodes, action unsquashing and metrics do the rest, agent by
agent. It is the reference the population loop (`appo`) is checked
against: same loss, same initial weights, same settings.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bilevel_tune.appo.local_learner import trained_module
from bilevel_tune.appo.loop import APPOLoop
from bilevel_tune.appo.rllib_config import algorithm_from, appo_config
from bilevel_tune.appo.seeded import INIT_SEED, seeded_module_class
from bilevel_tune.appo.world_env import WorldEnv, kind_seed, module_id
from bilevel_tune.appo.world_io import block_env_config, kinds_of
from bilevel_tune.inner import InnerLoopConfig, candidate_seed


def build_multiagent_algorithm(
    config: InnerLoopConfig, rules: Sequence, seed: int, candidates: Sequence[int] = (), algorithm=None
):
    """An RLlib algorithm on the per-agent path — APPO (`appo_config`) unless `algorithm` gives another's config
    maker (`ppo.ppo_config`) —: one module per candidate, per candidate and kind where the world declares several
    (`candidates`, default 0, 1, …, seed each module's weights)."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    make_config = algorithm or appo_config
    base = make_config(config, seed)
    candidates = list(candidates) or list(range(len(rules)))
    module_class = seeded_module_class(base.algo_class.__name__)
    env = WorldEnv(block_env_config(config, rules, seed))
    kinds = env.kinds
    modules = {
        module_id(j, None if len(kinds) == 1 else kind.name): RLModuleSpec(
            module_class=module_class,
            observation_space=None if len(kinds) == 1 else kind.observation_space,
            action_space=None if len(kinds) == 1 else kind.action_space,
            model_config={"fcnet_hiddens": list(config.hidden), INIT_SEED: kind_seed(candidate_seed(seed, k), kind, kinds)},
        )
        for j, k in enumerate(candidates)
        for kind in kinds
    }
    algo_config = (
        base.environment(WorldEnv, env_config=block_env_config(config, rules, seed))
        .multi_agent(policies=set(modules), policy_mapping_fn=env.policy_mapping())
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=modules))
    )
    return algorithm_from(algo_config)


def per_agent_greedy_actions(modules, obs: np.ndarray) -> np.ndarray:
    """Explore-off raw actions of each candidate's module: [N, D] (one observation per copy) → [N, A],
    [N, agents, D] → [N, agents, A]."""
    import torch
    from ray.rllib.core.columns import Columns

    obs = np.asarray(obs, dtype=np.float32)
    rows = obs[:, None, :] if obs.ndim == 2 else obs
    out = []
    with torch.no_grad():
        for k, module in enumerate(modules):
            dist_inputs = module.forward_inference({Columns.OBS: torch.from_numpy(rows[k])})[Columns.ACTION_DIST_INPUTS]
            action = module.get_inference_action_dist_cls().from_logits(dist_inputs).to_deterministic().sample()
            out.append(action.numpy())
    actions = np.stack(out)  # [N, R, A]
    return actions[:, 0] if obs.ndim == 2 else actions


class MultiAgentPolicyLoop(APPOLoop):
    """The per-agent APPO loop: a WorldEnv of the block's copies, one RLlib module per candidate."""

    def new_algorithm(self, rules, seed, candidates):
        return build_multiagent_algorithm(self.config, rules, seed, candidates)

    def greedy_actions(self):
        kinds = kinds_of(self.config.build_world(self.rules))
        by_kind = [
            [trained_module(self.algo, module_id(j, None if len(kinds) == 1 else kind.name)) for j in range(len(self.rules))]
            for kind in kinds
        ]
        return lambda per_kind: [per_agent_greedy_actions(modules, obs) for modules, obs in zip(by_kind, per_kind)]
