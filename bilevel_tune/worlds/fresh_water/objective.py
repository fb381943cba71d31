"""The candidate objective and its data-driven upper bound (docs/objective.md).

objective = econ_weight · mean per-step farm reward + sus_weight · mean
sustainability, over a candidate's evaluation episodes.

The upper bound answers "is 0.2500 a ceiling of the rules or of the
search?": for each evaluated day it takes the best reward any requested
fraction f could have earned given that day's logged pressure, rain, need
and allowed fraction a,

    max_f  min(1, (min(f, a)·deficit + rain)/need) − min(1, quota(f) + flow(f)),

ignoring only the lake's cut (which can only lower delivery), and averages
over days. With pressure 1, a slack quota, no rain, scale 1 and power 2 a
day's bound is exactly 1/4 (at f = 1/2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from bilevel_tune.base.knobs import SettingError, check_knobs, knob
from bilevel_tune.worlds.contract import Assessment
from bilevel_tune.worlds.fresh_water import law
from bilevel_tune.worlds.fresh_water.hydrology import CAPACITY_M3
from bilevel_tune.worlds.fresh_water.rules import RULE_SPECS, Rules

TINY_MM = 1e-12
RULE_PROBE_POINTS = 5  # values per rule's range at which `bound_by_rule` reads the upper bound
QUOTA_RULES = ("fixed_quota", "min_demand_frac", "max_demand_frac")  # the rules of the allowed fraction a(L)


@dataclass(frozen=True, kw_only=True)
class ObjectiveSettings:
    """The study file's [objective] on fresh water: how a season's reward and sustainability weigh."""

    econ_weight: float = knob(1.0, "weight of the farms' mean reward", low=0)
    sus_weight: float = knob(0.0, "weight of the lake's sustainability", low=0)

    def __post_init__(self):
        check_knobs(self)
        if self.econ_weight == 0 and self.sus_weight == 0:
            raise SettingError("[objective] econ_weight and sus_weight are both 0; at least one must be > 0")


@dataclass(frozen=True)
class ObjectiveWeights:
    econ: float = 1.0
    sus: float = 0.0

    def __post_init__(self):
        for name in ("econ", "sus"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"objective weight {name}={value!r} must be finite and ≥ 0")
        if self.econ == 0 and self.sus == 0:
            raise ValueError("objective weights econ and sus are both 0; at least one must be > 0")


def day_reward_for_fraction(f, need_mm, rain_mm, allowed, pressure, fine, scale, power):
    """A farm's reward for requesting fraction f, before the lake's cut (units cancel: mm suffice)."""
    deficit = np.maximum(0.0, need_mm - rain_mm)
    requested = f * deficit
    allowed_mm = allowed * deficit
    delivered = np.minimum(requested, allowed_mm)
    sat = law.satisfaction(delivered, rain_mm, need_mm)
    quota = law.quota_penalty(requested, allowed_mm, deficit, fine)
    return law.reward(sat, quota, law.flow_penalty(f, pressure, scale, power))


def day_upper_bound(need_mm, rain_mm, allowed, pressure, fine, scale, power):
    """Best achievable day reward over f ∈ [0, 1]; broadcasts over days.

    For f > a the penalty grows while satisfaction is flat, and once the
    penalty caps at 1 the reward is ≤ 0 ≤ reward(0): so the maximum lies at
    0, a, or the interior optimum f* = (d/(c·P·p))^(1/(p−1)) clipped to
    [0, a], with d the deficit's share of the need.
    """
    need, rain, allowed, pressure, power = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (need_mm, rain_mm, allowed, pressure, power))
    )
    deficit_share = np.divide(np.maximum(0.0, need - rain), need, out=np.zeros(need.shape), where=need > TINY_MM)
    cost = scale * pressure * power
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        interior = np.where(
            (cost > 0) & (power > 1),
            np.power(deficit_share / np.where(cost > 0, cost, 1.0), 1.0 / np.maximum(power - 1.0, 1e-12)),
            np.inf,
        )
    interior = np.clip(np.nan_to_num(interior, nan=0.0, posinf=1.0), 0.0, allowed)
    args = (need, rain, allowed, pressure, fine, scale, power)
    return np.maximum.reduce([day_reward_for_fraction(f, *args) for f in (np.zeros(need.shape), allowed, interior)])


def sustainability(levels, baseline_levels) -> float:
    """1/(1 + Σ|L − L0| / Σ L0) over an episode; in (0, 1]."""
    deviation = np.abs(np.asarray(levels) - np.asarray(baseline_levels)).sum() / np.asarray(baseline_levels).sum()
    return float(1.0 / (1.0 + deviation))


TERMS = ("mean_reward", "sustainability")  # the objective's: econ_weight · mean reward + sus_weight · sustainability
DIAGNOSTICS = (  # what a candidate's assessment reports beside them: means over its evaluated days
    "reward_upper_bound", "requested_fraction", "delivered_m3", "allowed_fraction", "pressure", "flow_penalty",
    "quota_penalty",
)  # fmt: skip


def _lake(episode: dict[str, np.ndarray], key: str, k: int) -> np.ndarray:
    """Lake k's days of a logged value: its column, or the one shared by every lake (the weather and baseline of
    lakes that share one stream are logged once a day, (T,); of lakes with streams of their own, (T, N))."""
    values = episode[key]
    return values[:, k] if values.ndim == 2 else values


def _days(episodes: Sequence[dict[str, np.ndarray]], k: int) -> dict[str, np.ndarray]:
    """Candidate k's evaluated days, every episode end to end: what its upper bound reads."""
    keys = ("need_mm", "rain_mm", "allowed_fraction", "pressure", "volume_start_m3")
    return {key: np.concatenate([_lake(ep, key, k) for ep in episodes]) for key in keys}


def bound_by_rule(days: dict[str, np.ndarray], rule: Rules, smoothing: float, reward_bound: float) -> dict[str, float]:
    """Per rule, the reward bound's largest value over `RULE_PROBE_POINTS` values across the rule's range.

    The days stay as logged (weather, need, pressure, the lake's start-of-day levels, from which the
    allowed fraction is recomputed under a moved quota rule): it reads which rules the cap depends on,
    not what the farms would do under other rules.
    """
    level = days["volume_start_m3"] / CAPACITY_M3
    out = {}
    for spec in RULE_SPECS:
        values = {n: np.full((RULE_PROBE_POINTS, 1), getattr(rule, n)) for n in (s.name for s in RULE_SPECS)}
        values[spec.name] = np.linspace(spec.low, spec.high, RULE_PROBE_POINTS)[:, None]
        allowed = days["allowed_fraction"]
        if spec.name in QUOTA_RULES:
            allowed = law.allowed_fraction(
                level, values["fixed_quota"], values["min_demand_frac"], values["max_demand_frac"], smoothing
            )
        bounds = day_upper_bound(
            days["need_mm"],
            days["rain_mm"],
            allowed,
            days["pressure"],
            values["fine_amount"],
            values["risk_penalty_scale"],
            values["risk_penalty_power"],
        )
        out[spec.name] = max(reward_bound, float(bounds.mean(axis=1).max()))
    return out


def assess(
    episodes: Sequence[dict[str, np.ndarray]],
    rules: Sequence[Rules],
    weights: ObjectiveWeights,
    failed: np.ndarray,
    smoothing: float = 0.0,
) -> list[Assessment]:
    """Per candidate an `Assessment`: the objective, its terms (mean reward, sustainability), its upper bound (and
    per rule, what moving it does to the bound) and its diagnostics.

    `episodes` are `basin.stack_days` records (time-major); `failed` marks
    candidates whose lake failed in any episode: their objective is NaN;
    `smoothing` is the world's quota-ramp smoothing (to recompute the allowed fraction under other rules).
    """
    out = []
    for k, rule in enumerate(rules):
        rewards, sus = [], []
        for ep in episodes:
            rewards.append(ep["reward"][:, k].mean())
            sus.append(sustainability(ep["level"][:, k], _lake(ep, "baseline_level", k)))
        mean_reward, mean_sus = float(np.mean(rewards)), float(np.mean(sus))
        days = _days(episodes, k)
        reward_bound = float(
            np.mean(
                day_upper_bound(
                    days["need_mm"],
                    days["rain_mm"],
                    days["allowed_fraction"],
                    days["pressure"],
                    rule.fine_amount,
                    rule.risk_penalty_scale,
                    rule.risk_penalty_power,
                )
            )
        )
        objective = weights.econ * mean_reward + weights.sus * mean_sus
        lifted = bound_by_rule(days, rule, smoothing, reward_bound)

        def mean_of(key: str, k: int = k) -> float:
            return float(np.mean(np.concatenate([ep[key][:, k].reshape(-1) for ep in episodes])))

        out.append(
            Assessment(
                objective=float("nan") if failed[k] or not np.isfinite(objective) else objective,
                terms={"mean_reward": mean_reward, "sustainability": mean_sus},
                diagnostics={"reward_upper_bound": reward_bound, **{key: mean_of(key) for key in DIAGNOSTICS[1:]}},
                upper_bound=weights.econ * reward_bound + weights.sus * mean_sus,
                failed=bool(failed[k]),
                bound_by_rule={name: weights.econ * b + weights.sus * mean_sus for name, b in lifted.items()},
            )
        )
    return out
