"""`bilevel_tune.world`: the fresh-water world's public names, which live in `bilevel_tune.worlds.fresh_water`."""

from bilevel_tune.worlds.fresh_water import *  # noqa: F403 - this path's public names, as before the move
