"""Every seed the package derives, in one place: each one a `SeedSequence` of named entropy, so two streams never
share entropy by accident and a reader sees at once which numbers feed which draw.

A trial's seed S fans out as
    S, 0, g            generation g's seed (RLlib's and the worlds' for that generation)
    S, 1               the evaluation seeds (one per evaluation season)
    S, 2               the final re-evaluation's seeds
    S, g [, stream]    the outer optimiser's draws at generation g (ES noise, CMA-ES, BO, Optuna, random search)
and a generation's seed G fans out to each candidate's, G, k. Stages draw their seeds from the grid's own; the
sequential tests' simulated paths from a fixed seed and their design. Changing any of these changes every result:
the K = 0 fingerprint (benchmarks/outcome_hash.py) guards them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def derived(*entropy: int) -> int:
    """One seed (a uint32 as int) from this entropy."""
    return int(np.random.SeedSequence([int(e) for e in entropy]).generate_state(1)[0])


def derived_many(entropy: Sequence[int], count: int) -> list[int]:
    """`count` seeds from this entropy (the first k of them the same for any count ≥ k)."""
    return [int(x) for x in np.random.SeedSequence([int(e) for e in entropy]).generate_state(count)]


def generator(*entropy: int) -> np.random.Generator:
    """A numpy generator seeded by this entropy."""
    return np.random.default_rng(np.random.SeedSequence([int(e) for e in entropy]))


# -- a trial's ---------------------------------------------------------------------------------------------------
def generation_seed(seed: int, generation: int) -> int:
    return derived(seed, 0, generation)


def evaluation_seeds(seed: int, episodes: int) -> list[int]:
    return derived_many((seed, 1), episodes)


def final_seeds(seed: int, count: int) -> list[int]:
    return derived_many((seed, 2), max(count, 1))[:count]


def candidate_seed(generation_seed: int, candidate: int) -> int:
    """A candidate's own seed within a generation: its worlds' and its learner's."""
    return derived(generation_seed, candidate)


def optimizer_seed(seed: int, generation: int) -> int:
    """The seed an outer optimiser's library draws with at this generation (BoTorch's, Optuna's sampler)."""
    return derived(seed, generation)


def optimizer_generator(seed: int, generation: int, *stream: int) -> np.random.Generator:
    """An outer optimiser's own draws at this generation (the ES's noise, CMA-ES's, random search's stream)."""
    return generator(seed, generation, *stream)
