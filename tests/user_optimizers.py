"""An outer optimiser of a user's own, as a study names it: optimizer = "tests.user_optimizers:ShrinkingBox"."""

import numpy as np

from bilevel_tune.core.outer import PendingSearch, SearchState, checked, rows, told, uniform


class ShrinkingBox(PendingSearch):
    """Uniform draws in a box around the best so far whose half-width halves each generation (from the whole box)."""

    name = "tests.user_optimizers:ShrinkingBox"
    label = "shrinking box"  # how the report names it

    def init(self, settings, population, dim, seed):
        return SearchState(self.name, population, dim, seed, pending=rows(uniform(seed, 0, (population, dim))))

    def tell(self, state, candidates, objectives):
        candidates, f = checked(state, candidates, objectives)
        new, metrics = told(state, candidates, f, state.pending)  # the best so far, this generation's included
        centre = np.array(new.best_candidate if new.best_candidate is not None else [0.5] * state.dim)
        width = 0.5 ** (state.generation + 1)
        draws = uniform(state.seed, state.generation + 1, (state.population, state.dim))
        following = np.clip(centre + width * (2 * draws - 1), 0, 1)
        return told(state, candidates, f, following)  # the same bookkeeping, the next candidates set


class NotAnOptimiser:
    """What a study refuses as an optimiser."""
