"""Evaluating a policy on the basin (or any world on the contract): one season per seed, per-candidate outcomes.

Shared by the real inner loop (bilevel_tune.appo) and its analytic
stand-in (bilevel_tune.inner.analytic); plain numpy, no Ray.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from bilevel_tune.core.objective import CandidateOutcome, ObjectiveWeights, candidate_outcomes
from bilevel_tune.world import Basin, Rules, WorldConfig, stack_days
from bilevel_tune.worlds.contract import play_seasons

Policy = Callable[[np.ndarray], np.ndarray]  # obs (N, 11) -> requested fraction (N,)


def evaluate_policy(
    world: WorldConfig, weights: ObjectiveWeights, rules: Sequence, seeds: Sequence[int], policy: Policy
) -> list[CandidateOutcome]:
    """Roll one season per seed, every farm of candidate k acting `policy(obs)[k]`; outcomes per candidate.

    Candidate k's lake depends only on its own rules (`Rules`, or physical values), its policy and the
    seed's weather, never on which other candidates share the basin.
    """
    rules = [r if isinstance(r, Rules) else Rules.from_physical(r) for r in rules]
    basin = Basin(world, rules)
    episodes, failed = [], np.zeros(len(rules), dtype=bool)
    for seed in seeds:
        obs = basin.reset(np.random.default_rng(int(seed)))
        days = []
        while not basin.done:
            fractions = np.repeat(np.asarray(policy(obs), dtype=float)[:, None], world.num_farms, axis=1)
            days.append(basin.step(fractions))
            obs = basin.observe()
        episodes.append(stack_days(days))
        failed |= basin.failed
    return candidate_outcomes(episodes, rules, weights, failed, world.smoothing)


def evaluate_on_world(world, seeds: Sequence[int], act: Callable[[np.ndarray], np.ndarray], objective) -> list:
    """Any world (docs/worlds.md): one season per seed, every agent acting `act(observation)`; an `Assessment` per copy."""
    seasons, failed = play_seasons(world, seeds, act)
    return world.assess(seasons, failed, objective)
