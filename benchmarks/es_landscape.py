"""The ES on a known landscape: maximise −‖u − u*‖², u* = (0.3, 0.7), 300 generations.

    python benchmarks/es_landscape.py

For seeds 42 and 7 at N = 1, 2, 16 (the weekend campaign's launcher defaults): the
generation the search mean first comes within 0.02 of u*, and its median
distance over the last 100 generations — the jitter docs/es.md warns about
(z-scored steps do not shrink near an optimum).
"""

import numpy as np

from bilevel_tune.core import es

TARGET = np.array([0.3, 0.7])
GENERATIONS, TAIL, RADIUS = 300, 100, 0.02


def trajectory(population: int, seed: int) -> np.ndarray:
    state = es.init(es.ESConfig(population=population), dim=2, seed=seed)
    distances = []
    for _ in range(GENERATIONS):
        candidates = es.ask(state)
        state, _ = es.tell(state, candidates, -((candidates - TARGET) ** 2).sum(axis=1))
        distances.append(np.linalg.norm(state.mean - TARGET))
    return np.array(distances)


def main():
    print(f"{'seed':>4} {'N':>3} {'first gen within 0.02':>22} {'median dist, last 100':>22} {'evaluations':>12}")
    for seed in (42, 7):
        for population in (1, 2, 16):
            d = trajectory(population, seed)
            hits = np.flatnonzero(d < RADIUS)
            first = str(hits[0]) if hits.size else "never"
            print(f"{seed:>4} {population:>3} {first:>22} {np.median(d[-TAIL:]):>22.4f} {population * GENERATIONS:>12}")


if __name__ == "__main__":
    main()
