"""FreshWaterEnv — the RLlib multi-agent shell over `Basin`: the contract's `WorldEnv` (appo/world_env.py) on fresh water.

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

from types import SimpleNamespace

import gymnasium as gym

from bilevel_tune.appo.world_env import WorldEnv, module_for_agent, module_id
from bilevel_tune.appo.world_env import agent_id as world_agent_id
from bilevel_tune.appo.world_io import agent_spaces
from bilevel_tune.world.basin import Basin
from bilevel_tune.world.fresh_water import FreshWater

__all__ = ["FreshWaterEnv", "agent_id", "farm_spaces", "module_for_agent", "module_id"]


def farm_spaces() -> tuple[gym.Space, gym.Space]:
    """(observation, action) space of one farm: fresh water's agent spaces, as both loops build them."""
    return agent_spaces(FreshWater)


def agent_id(candidate: int, farm: int) -> str:
    return world_agent_id(candidate, farm, FreshWater.agent_word)


class FreshWaterEnv(WorldEnv):
    @property
    def basin(self) -> Basin:
        return self.world.basin

    @property
    def num_farms(self) -> int:
        return self.world.agents

    @property
    def last_day(self):
        """The last day's reward and `DayLog` fields as attributes (None before the first step)."""
        step = self.last_step
        return None if step is None else SimpleNamespace(reward=step.rewards, **step.diagnostics)
