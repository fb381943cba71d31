"""Evaluating policies on a world: one season per seed, an `Assessment` per copy — every inner loop's one path.

Shared by the real inner loops (bilevel_tune.appo) and the analytic stand-in (bilevel_tune.inner.analytic), on
any world that keeps the contract (docs/worlds.md), fresh water among them; plain numpy, no Ray.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from bilevel_tune.worlds.contract import Assessment, play_seasons


def evaluate(world, seeds: Sequence[int], act: Callable[[np.ndarray], np.ndarray], objective) -> list[Assessment]:
    """One season per seed, every agent acting `act(observation)`; the world's `Assessment` of each copy under its
    [objective] section."""
    seasons, failed = play_seasons(world, seeds, act)
    return world.assess(seasons, failed, objective)
