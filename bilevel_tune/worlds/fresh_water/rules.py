"""The six mechanism rules: their specs (search range, default, physical limits) and one candidate's rule set.

Every rule is held by the search as u in [0, 1] and mapped affinely onto its
search range (`worlds.contract`: the one mapping every world uses; docs/world.md).
The law's functions take any physical value, so tests can probe the law
outside the range; studies and the CLI are held to each rule's physical limits
(`RuleSpec.check_physical`), where a value outside them would be a typo or break
the law (a quota of 1 divides by zero, a negative fine pays the farms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from bilevel_tune.base.hints import unknown_name
from bilevel_tune.worlds.contract import RuleSpec, searched_rules  # the contract's, for every world

# Each rule's default search range is the campaign's map (docs/world.md); its limits are what the law takes:
# fractions in [0, 1], a quota below 1 (the ramp divides by 1 − q), a fine or penalty scale ≥ 0, a power > 0.
RULE_SPECS: tuple[RuleSpec, ...] = (
    RuleSpec("fixed_quota", 0.6, 0.35, 0.85, "fill level below which only the floor is allowed", "quota", (0.0, 0.99)),
    RuleSpec(
        "min_demand_frac",
        0.0,
        0.35,
        0.05,
        "allowed fraction of the deficit at or below the quota level",
        "floor",
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
# The campaign's mechanisms: its 1-D searched the floor, its 2-D the floor and the quota; they keep the plain
# names 1d / 2d ("1-D", "2-D") (`FreshWater.plain_search`, `contract.Mechanisms`).
CAMPAIGN_SEARCH = ("min_demand_frac", "fixed_quota")


def rule_spec(name: str) -> RuleSpec:
    """A rule's `RuleSpec` by name; ValueError with a "did you mean" otherwise."""
    try:
        return _SPEC_BY_NAME[name]
    except KeyError:
        raise ValueError(unknown_name("rule", name, RULE_NAMES)) from None


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
    def at_unit(cls, values: Mapping[str, float], fixed: Mapping[str, float] | None = None) -> "Rules":
        """The rules with the named ones at u in [0, 1] of their search range, the rest `fixed` (else their
        defaults): the contract's one mapping (`contract.searched_rules`), typed."""
        return cls(**searched_rules(RULE_SPECS, list(values), list(values.values()), fixed or {}))

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in RULE_NAMES}
