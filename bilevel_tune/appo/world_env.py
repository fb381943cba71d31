"""WorldEnv — the RLlib multi-agent shell over any world on the contract (docs/worlds.md): the per-agent loop's env.

One env hosts a whole block: one copy of the world per candidate rule set,
each with the world's agents, `c{k}/{word}{i}` (the world's optional
`agent_word`, else "agent"; fresh water's: "farm"). Every agent of
candidate k maps to RLModule `cand{k}` (`module_for_agent`). An agent observes its copy's observation (a world
whose agents share one) or its own; it acts in the world's action Box
(RLlib's `normalize_actions` unsquashes the Gaussian into it); its reward
is the world's. All copies of an episode share one random stream. The
episode ends by truncation only, after the world's horizon.

env_config: the world's settings, `rules` (one mapping of physical values
per candidate; default one candidate under the default rules), `seed`
(None: episode seeds come from reset), and `world` (a built-in name or
`module:Class`; default fresh water) — `world_io.block_env_config` writes it.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from bilevel_tune.appo.world_io import agent_spaces, block_world


def agent_id(candidate: int, agent: int, word: str = "agent") -> str:
    return f"c{candidate}/{word}{agent}"


def module_id(candidate: int) -> str:
    return f"cand{candidate}"


def module_for_agent(agent: str, *args, **kwargs) -> str:
    """RLlib policy mapping: every agent of candidate k shares module `cand{k}`."""
    return module_id(int(agent.split("/", 1)[0][1:]))


class WorldEnv(MultiAgentEnv):
    def __init__(self, config: Mapping[str, Any] | None = None):
        super().__init__()
        self.world, self._base_seed = block_world(config)
        self._seed_rng = np.random.default_rng(self._base_seed)
        self.population = self.world.copies
        # the world may name its agents (fresh water: "farm", as its env card has always named them)
        word = getattr(self.world, "agent_word", "agent")
        self._where = {agent_id(k, i, word): (k, i) for k in range(self.population) for i in range(self.world.agents)}
        self.agents = self.possible_agents = list(self._where)
        obs_space, act_space = agent_spaces(self.world)
        self.observation_spaces = {a: obs_space for a in self.agents}
        self.action_spaces = {a: act_space for a in self.agents}
        self.last_step = None

    def _per_agent(self, observation: np.ndarray) -> dict[str, Any]:
        if self.world.shared_observation:
            return {agent: observation[k] for agent, (k, _) in self._where.items()}
        return {agent: observation[k, i] for agent, (k, i) in self._where.items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:  # RLlib seeds the first reset; mix in env_config's seed so both count
            entropy = [seed] if self._base_seed is None else [seed, self._base_seed]
            self._seed_rng = np.random.default_rng(entropy)
        observation = self.world.reset(np.random.default_rng(self._seed_rng.integers(2**63)))
        self.last_step = None
        return self._per_agent(observation), {}

    def step(self, action_dict: Mapping[str, Any]):
        actions = np.zeros((self.population, self.world.agents, self.world.action_size))
        for agent, action in action_dict.items():
            k, i = self._where[agent]
            actions[k, i] = np.asarray(action, dtype=float).reshape(-1)
        step = self.last_step = self.world.step(actions)
        obs = self._per_agent(self.world.observe())
        rewards = {agent: float(step.rewards[k, i]) for agent, (k, i) in self._where.items()}
        return obs, rewards, {"__all__": False}, {"__all__": self.world.done}, {}
