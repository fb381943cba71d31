"""The six mechanism rules: unit-interval encoding, physical maps and defaults.

Every rule is held by the search as u in [0, 1] and mapped affinely to its
physical value (docs/world.md). The law's functions take any physical value,
so tests can probe the law outside the map's image; studies and the CLI are
held to it (`check_physical`), where a value outside it would be a typo or
break the law (a quota of 1 divides by zero, a negative fine pays the farms).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from bilevel_tune.study_data.hints import unknown_name
from bilevel_tune.worlds.contract import RuleSpec  # the contract's, one definition for every world

# Each rule's default search range is the campaign's map (docs/world.md); its limits are what the law takes:
# fractions in [0, 1], a quota below 1 (the ramp divides by 1 − q), a fine or penalty scale ≥ 0, a power > 0.
RULE_SPECS: tuple[RuleSpec, ...] = (
    RuleSpec("fixed_quota", 0.6, 0.35, 0.85, "fill level below which only the floor is allowed", "quota", (0.0, 0.99)),
    RuleSpec(
        "min_demand_frac", 0.0, 0.35, 0.05, "allowed fraction of the deficit at or below the quota level", "floor",
        (0.0, 1.0),
    ),  # fmt: skip
    RuleSpec(
        "max_demand_frac", 0.35, 0.65, 1.0, "allowed fraction of the deficit when the lake is full", "cap", (0.0, 1.0)
    ),
    RuleSpec(
        "fine_amount", 0.0, 0.10, 0.05, "penalty per unit of over-request, relative to the deficit", "fine", (0.0, 1.0)
    ),
    RuleSpec("risk_penalty_scale", 0.0, 1.0, 0.5, "scale of the flow-pressure penalty", "risk", (0.0, 5.0)),
    RuleSpec(
        "risk_penalty_power", 1.0, 4.0, 2.0, "power of the requested fraction in the flow penalty", "power", (0.5, 10.0)
    ),
)
RULE_NAMES: tuple[str, ...] = tuple(spec.name for spec in RULE_SPECS)
_SPEC_BY_NAME = {spec.name: spec for spec in RULE_SPECS}
# The campaign's mechanisms: its 1-D searched the floor, its 2-D the floor and the quota. They keep the plain
# names 1d / 2d ("1-D", "2-D"); any other set of searched rules is named by its rules: 2d-floor-risk.
CAMPAIGN_SEARCH = ("min_demand_frac", "fixed_quota")


def rule_spec(name: str) -> RuleSpec:
    try:
        return _SPEC_BY_NAME[name]
    except KeyError:
        raise ValueError(unknown_name("rule", name, RULE_NAMES)) from None


def check_unit(name: str, u: float) -> float:
    u = float(u)
    if not 0.0 <= u <= 1.0:  # also rejects NaN
        raise ValueError(f"rule {name!r}: u={u!r} is outside [0, 1]")
    return u


def check_optimize_params(names: Sequence[str]) -> tuple[str, ...]:
    """Validate the searched subset (order kept): known, non-empty, no repeats."""
    names = tuple(names)
    if not names:
        raise ValueError(f"optimize_params is empty; choose from: {', '.join(RULE_NAMES)}")
    for name in names:
        rule_spec(name)
    if len(set(names)) != len(names):
        raise ValueError(f"optimize_params {list(names)} repeats a rule")
    return names


def _is_campaigns(optimize_params: Sequence[str]) -> bool:
    return tuple(optimize_params) == CAMPAIGN_SEARCH[: len(optimize_params)]


def mechanism_name(optimize_params: Sequence[str]) -> str:
    """A mechanism (its searched rules) in a trial or file name: 1d, 2d, or 2d-floor-risk."""
    dims = f"{len(optimize_params)}d"
    if _is_campaigns(optimize_params):
        return dims
    return "-".join([dims, *(_short(name) for name in optimize_params)])


def mechanism_label(optimize_params: Sequence[str]) -> str:
    """A mechanism as tables and plots show it: 1-D, 2-D, or 2-D floor+risk."""
    dims = f"{len(optimize_params)}-D"
    if _is_campaigns(optimize_params):
        return dims
    return f"{dims} " + "+".join(_short(name) for name in optimize_params)


def _short(name: str) -> str:
    """A rule's short name; another world's rule (docs/worlds.md) goes by its own name."""
    return _SPEC_BY_NAME[name].short if name in _SPEC_BY_NAME else name


@dataclass(frozen=True)
class Rules:
    """One candidate's rule set, in physical units."""

    fixed_quota: float = _SPEC_BY_NAME["fixed_quota"].default
    min_demand_frac: float = _SPEC_BY_NAME["min_demand_frac"].default
    max_demand_frac: float = _SPEC_BY_NAME["max_demand_frac"].default
    fine_amount: float = _SPEC_BY_NAME["fine_amount"].default
    risk_penalty_scale: float = _SPEC_BY_NAME["risk_penalty_scale"].default
    risk_penalty_power: float = _SPEC_BY_NAME["risk_penalty_power"].default

    @classmethod
    def from_physical(cls, values: Mapping[str, float] | None = None) -> "Rules":
        values = dict(values or {})
        for name in values:
            rule_spec(name)
        return cls(**{name: float(value) for name, value in values.items()})

    @classmethod
    def from_unit(cls, values: Mapping[str, float], base: "Rules | None" = None) -> "Rules":
        """Rules with the named rules set from u in [0, 1]; the rest from `base`."""
        base = base or cls()
        physical = {name: rule_spec(name).to_physical(check_unit(name, u)) for name, u in values.items()}
        return dataclasses.replace(base, **physical)

    @classmethod
    def from_search(cls, optimize_params: Sequence[str], u: Sequence[float], base: "Rules | None" = None) -> "Rules":
        """Rules for one ES candidate: `u[i]` sets `optimize_params[i]`."""
        names = check_optimize_params(optimize_params)
        u = np.asarray(u, dtype=float).reshape(-1)
        if u.shape[0] != len(names):
            raise ValueError(f"candidate has {u.shape[0]} values for {len(names)} searched rules {list(names)}")
        return cls.from_unit(dict(zip(names, u)), base)

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in RULE_NAMES}

    def unit_vector(self) -> np.ndarray:
        """All six rules as u (the observation's rule block); may leave [0, 1] for off-grid physical values."""
        return np.array([rule_spec(name).to_unit(getattr(self, name)) for name in RULE_NAMES])
