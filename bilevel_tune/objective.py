"""`bilevel_tune.objective`: what a fresh-water season scores, which lives in `bilevel_tune.worlds.fresh_water.objective`."""

from bilevel_tune.worlds.fresh_water.objective import *  # noqa: F403 - this path's public names, as before the move
