"""WorldEnv — the RLlib multi-agent shell over any world on the contract (docs/worlds.md): the per-agent loop's env.

One env hosts a whole block: one copy of the world per candidate rule set,
each with the world's agents, `c{k}/{word}{i}` (the world's optional
`agent_word`, else "agent"; fresh water's: "farm") — or, in a world that
declares its agents' kinds (a PettingZoo environment), `c{k}/{its own name}`.
Every agent of candidate k maps to RLModule `cand{k}` (`module_for_agent`),
or with several kinds to its kind's, `cand{k}-{kind}` (`KindOfAgent`). An
agent observes its copy's observation (a world whose agents share one) or
its own (flattened); it acts in its kind's action space (RLlib's
`normalize_actions` unsquashes a Gaussian into a Box's bounds; a Discrete's
index reaches the world shifted by its start, in its dtype); its reward is
the world's. An agent that leaves before the horizon is terminated then,
its last reward counted. All copies of an episode share one random stream.
The episode ends by truncation, after the world's horizon.

env_config: the world's settings, `rules` (one mapping of physical values
per candidate; default one candidate under the default rules), `seed`
(None: episode seeds come from reset), and `world` (a built-in name or
`module:Class`; default fresh water) — `world_io.block_env_config` writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from bilevel_tune.appo.world_io import agent_spaces, block_world, kind_observations, kinds_of
from bilevel_tune.base import seeds
from bilevel_tune.worlds.contract import has_kinds


def agent_id(candidate: int, agent: int | str, word: str = "agent") -> str:
    return f"c{candidate}/{word}{agent}" if isinstance(agent, int) else f"c{candidate}/{agent}"


def module_id(candidate: int, kind: str | None = None) -> str:
    return f"cand{candidate}" if kind is None else f"cand{candidate}-{kind}"


def module_for_agent(agent: str, *args, **kwargs) -> str:
    """RLlib policy mapping: every agent of candidate k shares module `cand{k}`."""
    return module_id(int(agent.split("/", 1)[0][1:]))


@dataclass(frozen=True)
class KindOfAgent:
    """RLlib policy mapping of a world with several kinds: agent `c{k}/{name}` → its kind's module `cand{k}-{kind}`
    (picklable: RLlib ships the config)."""

    kinds: Mapping[str, str]  # agent name → kind

    def __call__(self, agent: str, *args, **kwargs) -> str:
        candidate, name = agent.split("/", 1)
        return module_id(int(candidate[1:]), self.kinds[name])


def kind_seed(seed: int, kind, kinds) -> int:
    """A kind's module's initial-weights seed: the candidate's own where the world has one kind (fresh water's, bit
    for bit), else one drawn from it and the kind's place."""
    if len(kinds) == 1:
        return seed
    return seeds.derived(seed, [k.name for k in kinds].index(kind.name))


class WorldEnv(MultiAgentEnv):
    def __init__(self, config: Mapping[str, Any] | None = None):
        super().__init__()
        self.world, self._base_seed = block_world(config)
        self._seed_rng = np.random.default_rng(self._base_seed)
        self.population = self.world.copies
        self.kinds = kinds_of(self.world)
        if has_kinds(self.world):  # a PettingZoo environment's: its agents by their own names
            names = self.world.agent_ids
            self._where = {agent_id(k, names[i]): (k, i) for k in range(self.population) for i in range(len(names))}
        else:  # the world may name its agents (fresh water: "farm", as its env card has always named them)
            word = getattr(self.world, "agent_word", "agent")
            self._where = {agent_id(k, i, word): (k, i) for k in range(self.population) for i in range(self.world.agents)}
        self.agents = self.possible_agents = list(self._where)
        kind_of = {i: (j, r) for j, kind in enumerate(self.kinds) for r, i in enumerate(kind.agents)}
        self._kind = {agent: kind_of[i] for agent, (_, i) in self._where.items()}  # agent → (kind, its place in it)
        if not has_kinds(self.world):
            obs_space, act_space = agent_spaces(self.world)
            self.observation_spaces = {a: obs_space for a in self.agents}
            self.action_spaces = {a: act_space for a in self.agents}
        else:
            self.observation_spaces = {a: self.kinds[self._kind[a][0]].observation_space for a in self.agents}
            self.action_spaces = {a: self.kinds[self._kind[a][0]].action_space for a in self.agents}
        self.last_step = None

    def policy_mapping(self):
        """RLlib's policy mapping for this world's agents."""
        if len(self.kinds) == 1:
            return module_for_agent
        names = self.world.agent_ids
        return KindOfAgent({names[i]: kind.name for kind in self.kinds for i in kind.agents})

    def _per_agent(self, observation, present=None) -> dict[str, Any]:
        """Each agent's observation; in a world of kinds, only the `present` ones' (N, agents): those in the season,
        or that left at this step (their last observation, which RLlib bootstraps from)."""
        if not has_kinds(self.world):
            if self.world.shared_observation:
                return {agent: observation[k] for agent, (k, _) in self._where.items()}
            return {agent: observation[k, i] for agent, (k, i) in self._where.items()}
        per_kind = kind_observations(self.world, observation)
        present = self.world.alive if present is None else present
        return {
            agent: per_kind[self._kind[agent][0]][k, self._kind[agent][1]]
            for agent, (k, i) in self._where.items()
            if present[k, i]
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:  # RLlib seeds the first reset; mix in env_config's seed so both count
            entropy = [seed] if self._base_seed is None else [seed, self._base_seed]
            self._seed_rng = np.random.default_rng(entropy)
        observation = self.world.reset(np.random.default_rng(self._seed_rng.integers(2**63)))
        self.last_step = None
        return self._per_agent(observation), {}

    def step(self, action_dict: Mapping[str, Any]):
        if not has_kinds(self.world):
            actions = np.zeros((self.population, self.world.agents, self.world.action_size))
            for agent, action in action_dict.items():
                k, i = self._where[agent]
                actions[k, i] = np.asarray(action, dtype=float).reshape(-1)
            step = self.last_step = self.world.step(actions)
            obs = self._per_agent(self.world.observe())
            rewards = {agent: float(step.rewards[k, i]) for agent, (k, i) in self._where.items()}
            return obs, rewards, {"__all__": False}, {"__all__": self.world.done}, {}
        was_alive = self.world.alive.copy()
        step = self.last_step = self.world.step(self._world_actions(action_dict))
        obs = self._per_agent(self.world.observe(), present=was_alive)
        acted = [agent for agent, (k, i) in self._where.items() if was_alive[k, i]]
        rewards = {agent: float(step.rewards[self._where[agent]]) for agent in acted}  # a leaving agent's last counts
        done = self.world.done
        left = {agent: True for agent in acted if not done and not self.world.alive[self._where[agent]]}
        everyone_left = not done and not self.world.alive.any()  # nobody left to act: the episode is over
        return obs, rewards, {**left, "__all__": everyone_left}, {"__all__": done}, {}

    def _world_actions(self, action_dict: Mapping[str, Any]) -> list[np.ndarray]:
        """RLlib's actions (a Box's already in its bounds, a categorical's indices) as the world takes them."""
        out = []
        for kind in self.kinds:
            space = kind.world_action_space
            shape = () if isinstance(space, gym.spaces.Discrete) else space.shape
            out.append(np.zeros((self.population, len(kind.agents), *shape), dtype=space.dtype))
        for agent, action in action_dict.items():
            k = self._where[agent][0]
            j, r = self._kind[agent]
            space = self.kinds[j].world_action_space
            action = np.asarray(action)
            if isinstance(space, gym.spaces.Box):
                out[j][k, r] = action.reshape(space.shape).astype(space.dtype)
            else:
                shape = () if isinstance(space, gym.spaces.Discrete) else space.shape
                out[j][k, r] = (action.reshape(shape) + np.asarray(getattr(space, "start", 0))).astype(space.dtype)
        return out
