"""`bilevel_tune.objective`: what a season scores, which lives in `bilevel_tune.core.objective`."""

from bilevel_tune.core.objective import *  # noqa: F403 - this path's public names, as before the move
