"""The fishery: N fishers share one stock; the regulator's rules are a stock-dependent quota, a fine and a subsidy.

After the campaign code base's fishery example (docs/worlds.md). Each step every fisher chooses

    h ∈ [0, 1]   its harvest fraction of its largest catch m·F_msy·B/N
    e ∈ [0, 1]   its restoration effort, adding e·(restoration·K/N) to the stock

Catches are cut pro rata when together they exceed the stock. A fisher is paid
the harvest fraction it lands, plus what the rules add:

    reward = h·cut + (subsidy − restoration_cost)·e − fine·max(0, h − a(B))

The rules (docs/worlds.md says why these):

    quota_max            the allowed harvest fraction at or above the trigger stock
    quota_trigger        the stock share B/K below which the allowed fraction falls linearly,
                         to 0 at B/K = 0.1 (a "hockey-stick" harvest control rule)
    fine                 the penalty per unit of harvest fraction above the allowed a(B)
    restoration_subsidy  paid per unit of restoration effort

The regulator's objective of a season: the realized harvest over MSY plus
`stock_weight` times the mean stock share above `stock_threshold`,

    harvest_weight · mean_t(C_t / MSY) + stock_weight · mean_t(max(B_t/K − threshold, 0)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from bilevel_tune.base.knobs import check_knobs, knob
from bilevel_tune.worlds.contract import Assessment, RuleSpec, Season, Step, rule_columns, unit_rules
from bilevel_tune.worlds.fishery import stock

CLOSED_SHARE = 0.1  # B/K at and below which the allowed harvest fraction is 0
TINY = 1e-12


@dataclass(frozen=True)
class FisherySettings:
    """[world] of the fishery: the stock's dynamics and the fishers' means (docs/worlds.md)."""

    fishers: int = knob(5, "fishers sharing the stock", low=1)
    horizon: int = knob(100, "steps per season", low=1)
    growth_rate: float = knob(0.3, "r: the stock's intrinsic growth rate per step", low=0)
    capacity: float = knob(5000.0, "K: the stock's carrying capacity", low=0, open_low=True)
    shape: float = knob(1.0, "p: the Pella–Tomlinson shape (1: logistic)", low=0, open_low=True)
    initial_stock: float = knob(4000.0, "B₀: the stock when a season starts", low=0)
    noise: float = knob(0.02, "σ: process noise per step, as a share of the stock", low=0)
    catch_multiple: float = knob(
        2.0, "m: a fisher's largest catch, in units of its share of F_msy·B", low=0, open_low=True
    )
    restoration: float = knob(0.05, "e: all fishers' largest restoration per step, as a share of K", low=0)
    restoration_cost: float = knob(0.1, "what full restoration effort costs a fisher, in harvest-fraction units", low=0)

    def __post_init__(self):
        check_knobs(self)

    @property
    def msy(self) -> float:
        return stock.msy(self.growth_rate, self.capacity, self.shape)

    @property
    def largest_catch_share(self) -> float:
        """m·F_msy: all fishers' largest catch as a share of the stock."""
        return self.catch_multiple * stock.f_msy(self.growth_rate, self.shape)


@dataclass(frozen=True)
class FisheryObjective:
    """[objective] of the fishery: the regulator's fitness."""

    harvest_weight: float = knob(1.0, "weight of the realized harvest over MSY", low=0)
    stock_weight: float = knob(2.0, "weight of the mean stock share above the threshold", low=0)
    stock_threshold: float = knob(0.2, "the stock share B/K from which the stock term counts", low=0, high=1)

    def __post_init__(self):
        check_knobs(self)


RULE_SPECS: tuple[RuleSpec, ...] = (
    RuleSpec("quota_max", 0.1, 0.9, 1.0, "allowed harvest fraction at or above the trigger stock", "quota"),
    RuleSpec("quota_trigger", 0.2, 0.6, 0.5, "stock share below which the allowed fraction ramps down", "trigger"),
    RuleSpec("fine", 0.0, 2.0, 1.5, "penalty per unit of harvest fraction above the allowed", "fine"),
    RuleSpec("restoration_subsidy", 0.0, 0.5, 0.0, "paid per unit of restoration effort", "subsidy"),
)


def allowed_fraction(stock_share, quota_max, quota_trigger):
    """a(B): quota_max above the trigger, falling linearly to 0 at CLOSED_SHARE."""
    ramp = (np.asarray(stock_share, dtype=float) - CLOSED_SHARE) / np.maximum(quota_trigger - CLOSED_SHARE, TINY)
    return quota_max * np.clip(ramp, 0.0, 1.0)


class Fishery:
    """`copies` fisheries, each with `fishers` fishers under its own rules, stepped together."""

    name = "fishery"
    settings_class = FisherySettings
    objective_class = FisheryObjective
    rule_specs = RULE_SPECS
    searched_by_default = ("quota_max",)
    scan_terms = ("harvest_over_msy", "stock_above_threshold")  # the objective's terms, per point of a rules scan

    shared_observation = True
    action_size = 2  # harvest fraction, restoration effort
    action_low = np.zeros(2)
    action_high = np.ones(2)
    observation_size = 4 + len(RULE_SPECS)  # stock share, allowed fraction, progress, last catch; the rules as u

    def __init__(self, settings: FisherySettings, rules: Sequence[Mapping[str, float]]):
        if not rules:
            raise ValueError("a fishery needs at least one rule set")
        self.settings = settings
        self.copies, self.agents, self.horizon = len(rules), settings.fishers, settings.horizon
        self.rules = rule_columns(RULE_SPECS, rules)
        self._rule_obs = unit_rules(RULE_SPECS, self.rules)
        self.failed = np.zeros(self.copies, dtype=bool)
        self.t = 0

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        self._rng = rng
        self.stock = np.full(self.copies, float(self.settings.initial_stock))
        self.last_catch = np.zeros(self.copies)
        self.failed[:] = False
        self.t = 0
        return self.observe()

    @property
    def done(self) -> bool:
        return self.t >= self.horizon

    def allowed(self) -> np.ndarray:
        return allowed_fraction(
            self.stock / self.settings.capacity, self.rules["quota_max"], self.rules["quota_trigger"]
        )

    def observe(self) -> np.ndarray:
        s = self.settings
        obs = np.empty((self.copies, self.observation_size))
        obs[:, 0] = self.stock / s.capacity
        obs[:, 1] = self.allowed()
        obs[:, 2] = self.t / self.horizon
        obs[:, 3] = self.last_catch / max(s.largest_catch_share * s.capacity, TINY)
        np.clip(obs[:, :4], 0.0, 1.0, out=obs[:, :4])
        obs[:, 4:] = self._rule_obs
        obs[self.failed] = 0.0
        return obs.astype(np.float32)

    def step(self, actions: np.ndarray) -> Step:
        s, r = self.settings, self.rules
        a = np.asarray(actions, dtype=float).reshape(self.copies, self.agents, self.action_size)
        self.failed |= ~np.isfinite(a).all(axis=(1, 2))
        a = np.clip(np.where(np.isnan(a), 0.0, a), 0.0, 1.0)
        harvest, effort = a[..., 0], a[..., 1]

        allowed = self.allowed()
        requested = harvest * (s.largest_catch_share * self.stock / self.agents)[:, None]
        wanted = requested.sum(axis=1)
        cut = np.where(wanted > self.stock, self.stock / np.maximum(wanted, TINY), 1.0)
        catch = requested * cut[:, None]
        restored = effort * (s.restoration * s.capacity / self.agents)
        start = self.stock
        draw = float(self._rng.standard_normal())  # one draw for every copy: common random numbers
        grown = stock.next_stock(
            start, catch.sum(axis=1), restored.sum(axis=1), draw, s.growth_rate, s.capacity, s.shape, s.noise
        )
        reward = (
            harvest * cut[:, None]
            + (r["restoration_subsidy"][:, None] - s.restoration_cost) * effort
            - r["fine"][:, None] * np.maximum(0.0, harvest - allowed[:, None])
        )
        self.failed |= ~(np.isfinite(reward).all(axis=1) & np.isfinite(grown))
        self.stock = np.where(self.failed, start, grown)
        self.last_catch = catch.sum(axis=1)
        self.t += 1
        return Step(
            rewards=reward,
            diagnostics={
                "stock_start": start,
                "stock": grown,
                "allowed_fraction": allowed,
                "harvest_fraction": harvest,
                "restoration_effort": effort,
                "catch": self.last_catch,
                "cut": cut,
            },
        )

    # -- the hooks ----------------------------------------------------------------------------------
    def reward_bound(self, season: Season) -> np.ndarray:
        """(T, N): a fisher's best reward each step: h = 1 while the fine is below 1 (else h = a), e = 1 if paid."""
        fine, subsidy = self.rules["fine"], self.rules["restoration_subsidy"]
        a = season["allowed_fraction"]
        harvest = np.where(fine < 1.0, 1.0 - fine * (1.0 - a), a)
        return harvest + np.maximum(0.0, subsidy - self.settings.restoration_cost)

    def myopic_actions(self, observation: np.ndarray) -> np.ndarray:
        """(N, fishers, 2): this step's best response, the reward's own maximiser (as `reward_bound` reads it)."""
        a = np.asarray(observation, dtype=float)[:, 1]
        harvest = np.where(self.rules["fine"] < 1.0, 1.0, a)
        effort = (self.rules["restoration_subsidy"] > self.settings.restoration_cost).astype(float)
        one = np.stack([harvest, effort], axis=1)
        return np.repeat(one[:, None, :], self.agents, axis=1)

    # -- the season's assessment ----------------------------------------------------------------------
    def assess(self, seasons: Sequence[Season], failed: np.ndarray, objective: FisheryObjective) -> list[Assessment]:
        s = self.settings
        out = []
        for k in range(self.copies):
            harvest = np.mean([season["catch"][:, k].mean() / s.msy for season in seasons])
            share = [season["stock"][:, k] / s.capacity for season in seasons]
            above = np.mean([np.maximum(b - objective.stock_threshold, 0.0).mean() for b in share])
            value = objective.harvest_weight * harvest + objective.stock_weight * above
            broke = bool(failed[k]) or not np.isfinite(value)

            def mean_of(key: str, k: int = k) -> float:
                return float(np.mean([season[key][:, k].mean() for season in seasons]))

            out.append(
                Assessment(
                    objective=float("nan") if broke else float(value),
                    terms={"harvest_over_msy": float(harvest), "stock_above_threshold": float(above)},
                    diagnostics={
                        "mean_reward": mean_of("reward"),
                        "reward_upper_bound": float(np.mean([self.reward_bound(x)[:, k].mean() for x in seasons])),
                        "harvest_fraction": mean_of("harvest_fraction"),
                        "restoration_effort": mean_of("restoration_effort"),
                        "allowed_fraction": mean_of("allowed_fraction"),
                        "stock_share": float(np.mean([b.mean() for b in share])),
                        "cut": mean_of("cut"),
                    },
                    upper_bound=None,  # the regulator's objective is not the fishers' reward: no bound known
                    failed=broke,
                )
            )
        return out
