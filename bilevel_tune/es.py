"""`bilevel_tune.es`: the Evolution Strategy, which lives in `bilevel_tune.core.es`."""

from bilevel_tune.core.es import *  # noqa: F403 - this path's public names, as before the move
