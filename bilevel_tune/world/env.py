"""FreshWaterEnv — the RLlib multi-agent shell over `Basin`.

Card
----
Description  One env hosts a whole ES population: `population` independent
             lakes, one per candidate rule set, each shared by `num_farms`
             farms; one growing season per episode, one step per day.
             All lakes of an episode share one weather draw.
Agents       `c{k}/farm{i}`, k < population, i < num_farms. All farms of
             candidate k map to RLModule `cand{k}` (`module_for_agent`).
Observation  Box(0, 1, (11,), float32): fill level, release pressure,
             today's allowed fraction, yesterday's total delivery over the
             farms' peak daily need, season progress, the 6 rules as u.
Action       Box(0, 1, (1,), float32): fraction of today's deficit volume
             the farm requests.
Reward       satisfaction − min(1, quota penalty + flow penalty) (docs/world.md).
Rules        fixed_quota [0.6, 0.95], min_demand_frac [0, 0.35],
             max_demand_frac [0.35, 1], fine_amount [0, 0.1],
             risk_penalty_scale [0, 1], risk_penalty_power [1, 5]
             (searched as u ∈ [0, 1]; any physical value is accepted here).
Episode end  Truncation only, after `horizon` days.
env_config   num_farms (5), horizon (150), smoothing (0.0: hard ramp),
             rules (list of {rule: physical value} dicts, one per
             candidate; default one candidate with default rules),
             seed (None: episode seeds come from reset).
Version      fresh-water v1
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from bilevel_tune.world.basin import OBSERVATION_SIZE, Basin, WorldConfig
from bilevel_tune.world.rules import Rules

ENV_CONFIG_KEYS = (*(f.name for f in dataclasses.fields(WorldConfig)), "rules", "seed")


def farm_spaces() -> tuple[gym.Space, gym.Space]:
    """(observation, action) space of one farm: the env's, and the population loop's module and env runner's."""
    return gym.spaces.Box(0.0, 1.0, (OBSERVATION_SIZE,), np.float32), gym.spaces.Box(0.0, 1.0, (1,), np.float32)


def agent_id(candidate: int, farm: int) -> str:
    return f"c{candidate}/farm{farm}"


def module_id(candidate: int) -> str:
    return f"cand{candidate}"


def module_for_agent(agent: str, *args, **kwargs) -> str:
    """RLlib policy mapping: every farm of candidate k shares module `cand{k}`."""
    return module_id(int(agent.split("/", 1)[0][1:]))


def parse_env_config(env_config: Mapping[str, Any] | None) -> tuple[WorldConfig, list[Rules], int | None]:
    env_config = dict(env_config or {})
    unknown = sorted(set(env_config) - set(ENV_CONFIG_KEYS))
    if unknown:
        raise ValueError(f"unknown env_config key(s) {unknown}; allowed: {', '.join(ENV_CONFIG_KEYS)}")
    world = WorldConfig(**{k: v for k, v in env_config.items() if k not in ("rules", "seed")})
    rules = [Rules.from_physical(r) for r in env_config.get("rules") or [{}]]
    return world, rules, env_config.get("seed")


class FreshWaterEnv(MultiAgentEnv):
    def __init__(self, config: Mapping[str, Any] | None = None):
        super().__init__()
        world, rules, seed = parse_env_config(config)
        self.basin = Basin(world, rules)
        self._base_seed = seed
        self._seed_rng = np.random.default_rng(seed)
        self.population, self.num_farms = self.basin.population, world.num_farms
        self.agents = self.possible_agents = [
            agent_id(k, i) for k in range(self.population) for i in range(self.num_farms)
        ]
        obs_space, act_space = farm_spaces()
        self.observation_spaces = {a: obs_space for a in self.agents}
        self.action_spaces = {a: act_space for a in self.agents}
        self.last_day = None

    def _per_agent(self, per_candidate: np.ndarray) -> dict[str, Any]:
        return {agent_id(k, i): per_candidate[k] for k in range(self.population) for i in range(self.num_farms)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:  # RLlib seeds the first reset; mix in env_config's seed so both count
            entropy = [seed] if self._base_seed is None else [seed, self._base_seed]
            self._seed_rng = np.random.default_rng(entropy)
        obs = self.basin.reset(np.random.default_rng(self._seed_rng.integers(2**63)))
        self.last_day = None
        return self._per_agent(obs), {}

    def step(self, action_dict: Mapping[str, Any]):
        fractions = np.zeros((self.population, self.num_farms))
        for agent, action in action_dict.items():
            k, farm = agent.split("/", 1)
            fractions[int(k[1:]), int(farm[4:])] = np.asarray(action, dtype=float).reshape(-1)[0]
        day = self.last_day = self.basin.step(fractions)
        obs = self._per_agent(self.basin.observe())
        rewards = {
            agent_id(k, i): float(day.reward[k, i]) for k in range(self.population) for i in range(self.num_farms)
        }
        truncated = self.basin.done
        return obs, rewards, {"__all__": False}, {"__all__": truncated}, {}
