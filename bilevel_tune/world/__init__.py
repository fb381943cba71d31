"""The fresh-water world: numpy dynamics (hydrology, crops, law, basin) and the RLlib env shell.

`bilevel_tune.world.env` imports RLlib; everything else here is plain numpy.
"""

from bilevel_tune.world.basin import Basin, DayLog, WorldConfig, stack_days
from bilevel_tune.world.rules import (
    RULE_NAMES,
    RULE_SPECS,
    Rules,
    check_optimize_params,
    mechanism_label,
    mechanism_name,
    rule_spec,
)

__all__ = [
    "Basin",
    "DayLog",
    "RULE_NAMES",
    "RULE_SPECS",
    "Rules",
    "WorldConfig",
    "check_optimize_params",
    "mechanism_label",
    "mechanism_name",
    "rule_spec",
    "stack_days",
]
