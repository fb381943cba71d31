"""Fresh water on the world contract (bilevel_tune.worlds.contract): the basin's lakes as a world's copies.

Every number is the basin's own (`Basin`, `objective.assess`): a season played through this class, as every
inner loop plays any world, steps and scores the basin's lakes exactly as the basin itself does
(tests/test_worlds.py: the same as stepping the basin by hand, bit for bit).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from bilevel_tune.worlds.contract import Assessment, Season, Step
from bilevel_tune.worlds.fresh_water.basin import OBSERVATION_SIZE, Basin, DayLog, WorldConfig
from bilevel_tune.worlds.fresh_water.hydrology import CAPACITY_M3, SECONDS_PER_DAY
from bilevel_tune.worlds.fresh_water.objective import (
    TERMS,
    ObjectiveSettings,
    ObjectiveWeights,
    assess,
    day_upper_bound,
)
from bilevel_tune.worlds.fresh_water.rules import CAMPAIGN_SEARCH, RULE_SPECS, Rules

LOGGED = tuple(f.name for f in dataclasses.fields(DayLog) if f.name != "reward")  # a day's log, beside its rewards
WATER_BALANCE_RTOL = 1e-9


def myopic_best_response(rules: Sequence[Rules]):
    """A farm's best response to today alone: max f − c·P·f^p over [0, a] (docs/objective.md); obs (N, 11) → f (N,)."""
    scale = np.array([r.risk_penalty_scale for r in rules])
    power = np.array([r.risk_penalty_power for r in rules])

    def policy(obs: np.ndarray) -> np.ndarray:
        pressure, allowed = obs[:, 1].astype(float), obs[:, 2].astype(float)
        cost = scale * pressure * power
        with np.errstate(divide="ignore", over="ignore"):
            interior = np.where(
                (cost > 0) & (power > 1),
                (1.0 / np.where(cost > 0, cost, 1.0)) ** (1.0 / np.maximum(power - 1.0, 1e-12)),
                1.0,
            )
        return np.clip(np.minimum(interior, allowed), 0.0, 1.0)

    return policy


class FreshWater:
    """`copies` candidate lakes of `num_farms` farms each (and the basin's baseline lake), stepped together."""

    name = "fresh-water"
    settings_class = WorldConfig
    objective_class = ObjectiveSettings
    rule_specs = RULE_SPECS
    searched_by_default = ("min_demand_frac",)
    plain_search = CAMPAIGN_SEARCH  # the campaign's mechanisms go by their dimensionality alone: 1-D, 2-D

    shared_observation = True  # a farm sees its lake: every farm of a lake the same observation
    action_size = 1  # the requested fraction of the day's deficit
    action_low = np.zeros(1)
    action_high = np.ones(1)
    observation_size = OBSERVATION_SIZE
    observation_low, observation_high = 0.0, 1.0  # every entry is a share (the RLlib shell's Box)
    agent_word = "farm"  # agent ids in the RLlib shell: c{k}/farm{i}
    copy_streams = True  # reset takes a generator per lake too: a block of lakes of several seeds steps as one
    # The campaign's ceiling: with the flow pressure saturated, a farm's day earns at most f − f² = 1/4 (docs/objective.md)
    ceiling = 0.25
    # What the summary's tables show of an outcome: the columns every fresh-water summary has had (trials.csv
    # unchanged), and a scan point's terms
    summary_diagnostics = (
        *TERMS, "requested_fraction", "allowed_fraction", "pressure", "flow_penalty", "quota_penalty",
    )  # fmt: skip
    scan_terms = TERMS

    @staticmethod
    def regime(settings: WorldConfig, rules: Mapping[str, float]) -> str:
        """Which regime these settings make, in one line: whether a farm's day is capped (a summary's header)."""
        scale, power = rules["risk_penalty_scale"], rules["risk_penalty_power"]
        if settings.release_share >= 1 and settings.rain_probability == 0:
            # pressure 1 every day, no rain: a day's best is max over f of f − c·f^p, at f = (1/(c·p))^(1/(p−1))
            f = min(1.0, (1 / (scale * power)) ** (1 / (power - 1))) if scale > 0 and power > 1 else 1.0
            return (
                f"the campaign's capped regime: pressure 1 every day and no rain, so a farm's day earns at most "
                f"{f - scale * f**power:.4f} (the best of f − {scale:g}·f^{power:g}), whatever the floor and the quota"
            )
        return (
            f"the surrogate world, not the campaign's capped regime: pressure {settings.release_share:g} on ordinary "
            f"days (1 when the lake spills), rain on {settings.rain_probability:.0%} of days, so a farm's day can earn "
            "more than 1/4"
        )

    def __init__(self, settings: WorldConfig, rules: Sequence[Mapping[str, float] | Rules]):
        self.settings = settings
        self.rules = [r if isinstance(r, Rules) else Rules.from_physical(r) for r in rules]
        for rule in self.rules:
            for spec in RULE_SPECS:
                spec.check_physical(getattr(rule, spec.name))
        self.basin = Basin(settings, self.rules)
        self.copies, self.agents, self.horizon = len(self.rules), settings.num_farms, settings.horizon

    @property
    def failed(self) -> np.ndarray:
        return self.basin.failed

    @property
    def done(self) -> bool:
        return self.basin.done

    def reset(self, rng: np.random.Generator | Sequence[np.random.Generator]) -> np.ndarray:
        return self.basin.reset(rng)

    def observe(self) -> np.ndarray:
        return self.basin.observe()

    def step(self, actions: np.ndarray) -> Step:
        day = self.basin.step(np.asarray(actions).reshape(self.copies, self.agents))
        return Step(rewards=day.reward, diagnostics={name: getattr(day, name) for name in LOGGED})

    def reward_bound(self, season: Season) -> np.ndarray:
        """(T, N): each day's best reward over f ∈ [0, 1] (objective.day_upper_bound, docs/objective.md)."""
        column = lambda name: np.array([getattr(r, name) for r in self.rules])  # noqa: E731
        days = len(season["need_mm"])  # (T,) shared by every lake, or (T, N): each lake's own weather
        return day_upper_bound(
            season["need_mm"].reshape(days, -1),
            season["rain_mm"].reshape(days, -1),
            season["allowed_fraction"],
            season["pressure"],
            column("fine_amount"),
            column("risk_penalty_scale"),
            column("risk_penalty_power"),
        )

    def myopic_actions(self, observation: np.ndarray) -> np.ndarray:
        """(N, farms, 1): every farm's myopic best response (`myopic_best_response`), the analytic stand-in's policy."""
        fractions = myopic_best_response(self.rules)(np.asarray(observation))
        return np.repeat(fractions[:, None, None], self.agents, axis=1)

    def invariants(self, season: Season) -> str | None:
        """The basin's physics over a played season, or what broke: the water balance closes every day (to
        WATER_BALANCE_RTOL of the lake's capacity), no flow or volume is negative, no reward exceeds 1."""
        change = season["level"] * CAPACITY_M3 - season["volume_start_m3"]
        inflow = season["inflow_m3s"].reshape(len(change), -1)
        flows = (inflow - season["withdrawal_m3s"] - season["release_m3s"] - season["spill_m3s"]) * SECONDS_PER_DAY
        broken = (np.abs(change - flows) > WATER_BALANCE_RTOL * CAPACITY_M3).reshape(len(change), -1).any(axis=1)
        if broken.any():
            day = int(np.argmax(broken))  # the first
            return f"the water balance does not close on day {day} (ΔV − flows = {np.abs(change - flows)[day].max():.3g} m³)"
        for name in ("withdrawal_m3s", "release_m3s", "spill_m3s", "level"):
            if (season[name] < 0).any():
                return f"{name} went negative"
        if (season["reward"] > 1 + 1e-12).any():
            return f"a reward exceeds 1 (max {season['reward'].max():.6g})"
        return None

    def assess(self, seasons: Sequence[Season], failed: np.ndarray, objective: ObjectiveSettings) -> list[Assessment]:
        weights = ObjectiveWeights(objective.econ_weight, objective.sus_weight)
        return assess(seasons, self.rules, weights, failed, self.settings.smoothing)
