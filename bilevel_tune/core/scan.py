"""The rules scan: the searched rules on a regular grid, the ground truth an ES run is measured against.

A scan of N points per searched rule evaluates u ∈ {0, 1/(N−1), …, 1} for
a 1-D mechanism and the N × N product for 2-D (u of the first searched
rule varies slowest), the other rules at the study's fixed values. Each
grid point is a candidate of one population trial with no ES, run with the
study's inner loop, budget K, evaluation seeds and final re-evaluation:
pass 0 evaluates every point on the trials' evaluation seeds, passes
1 … M retrain and evaluate it on each final re-evaluation seed. A pass runs
the grid in blocks of at most `BLOCK` candidates, one after another (each
point keeping its index, so its seeds): a 21 × 21 grid in one block of 441
held 2.4 GB in its shard and ran 3× slower per candidate than blocks of 16
(docs/results/weekend-appo/run.md), a size the CPU plan never probed.
Plain numpy.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

MIN_POINTS = 2  # a grid needs both ends of every searched rule
BLOCK = 16  # candidates per inner-loop call in a pass: the CPU plan's largest probed block


def scan_grid(dims: int, points: int) -> np.ndarray:
    """The grid in the search space: [points**dims, dims] values of u, row-major (the last rule varies fastest)."""
    axis = np.linspace(0.0, 1.0, points)
    return np.array(list(itertools.product(axis, repeat=dims)), dtype=float).reshape(-1, dims)


def grid_spacing(specs: Sequence[Any], points: int) -> dict[str, float]:
    """The distance between neighbouring grid points, per searched rule (a world's `RuleSpec`: its name and span),
    physical units."""
    return {spec.name: spec.span / (points - 1) for spec in specs}


def spacing_label(specs: Sequence[Any], points: int) -> str:
    """e.g. 'min_demand_frac 0.0175, fixed_quota 0.0175'."""
    return ", ".join(f"{name} {step:.4g}" for name, step in grid_spacing(specs, points).items())


def passes(
    evaluation_seeds: Sequence[int], final_seeds: Sequence[int], generation_seed: int
) -> list[tuple[int, list[int]]]:
    """(generation seed, evaluation seeds) per pass: the trials' evaluation, then each final re-evaluation seed.

    As a trial's: generation 0's seed and evaluation seeds, and its final re-evaluation's retrain-and-evaluate per seed.
    """
    return [(int(generation_seed), [int(s) for s in evaluation_seeds])] + [(int(s), [int(s)]) for s in final_seeds]
