"""The fresh-water world (docs/world.md), plain numpy: the hydrology, the crops, the mechanism law, the six
rules, the basin of N candidate lakes, what a season scores (`objective`), and `FreshWater`, the basin on the
world contract (`world`)."""

from bilevel_tune.worlds.fresh_water.basin import Basin, DayLog, WorldConfig, stack_days
from bilevel_tune.worlds.fresh_water.rules import (
    RULE_NAMES,
    RULE_SPECS,
    Rules,
    rule_spec,
)
from bilevel_tune.worlds.fresh_water.world import FreshWater

__all__ = [
    "Basin",
    "DayLog",
    "FreshWater",
    "RULE_NAMES",
    "RULE_SPECS",
    "Rules",
    "WorldConfig",
    "rule_spec",
    "stack_days",
]
