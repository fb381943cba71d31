"""The outer optimisers' own cost: seconds per generation of each one's ask and tell, as its evaluations grow, on a
noisy quadratic in the unit box — BO's GP fit and acquisition above all — beside what a generation of the inner loop
costs, so the share of a run the optimiser takes can be read at a study's budget.

    python benchmarks/optimizers.py [--evaluations 200] [--population 4] [--dims 1 2] [--inner-seconds S]
    python benchmarks/optimizers.py --bo-limit      # one BO generation's seconds at 200, 400 and 600 evaluations

`--inner-seconds`: one generation's inner-loop wall (train and evaluate `population` candidates); by default the
median wall a generation less the optimiser's seconds of the optimizers-appo run's trials.csv where it is shipped,
else weekend-appo's median sec_per_gen at populations 1 and 16 (one shard each), linear between (stated). Prints one row per optimiser
and dimensionality: its seconds per generation at the first, middle and last generation, its total, and that total
as a share of a run with the inner loop's seconds added.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bilevel_tune.base.sections import BOSettings, CMASettings, ESSettings
from bilevel_tune.core import outer

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
SETTINGS = {"es": ESSettings(), "cma": CMASettings(), "bo": BOSettings(), "random": None}


def noisy_quadratic(rng: np.random.Generator):
    target = np.array([0.3, 0.7, 0.5])

    def objective(u):
        return -((u - target[: u.shape[1]]) ** 2).sum(axis=1) + 0.01 * rng.standard_normal(len(u))

    return objective


def own_seconds(name: str, dims: int, population: int, evaluations: int) -> list[float]:
    """Seconds of ask + tell per generation of one run."""
    optimizer = outer.load(name)
    objective = noisy_quadratic(np.random.default_rng(0))
    state = optimizer.init(SETTINGS[name], population, dims, 42)
    seconds = []
    for _ in range(evaluations // population):
        start = time.perf_counter()
        candidates = optimizer.ask(state)
        asked = time.perf_counter()
        f = objective(candidates)
        told = time.perf_counter()
        state, _ = optimizer.tell(state, candidates, f)
        seconds.append((asked - start) + (time.perf_counter() - told))
    return seconds


def inner_seconds(population: int) -> tuple[float, str]:
    """One generation's inner-loop seconds on this project's 2-core machine, and where the figure comes from."""
    shipped = RESULTS / "optimizers-appo" / "trials.csv"
    if shipped.is_file():
        trials = pd.read_csv(shipped)
        per_generation = trials["wall_s"] / trials["generations"] - trials["optimizer_s"] / trials["generations"]
        return float(per_generation.median()), "optimizers-appo's trials (median wall per generation, less BO's own)"
    trials = pd.read_csv(RESULTS / "weekend-appo" / "trials.csv")  # one shard a trial: all its candidates in one
    one, sixteen = (float(trials[trials["population"] == n]["median_sec_per_gen"].median()) for n in (1, 16))
    seconds = one + (sixteen - one) * (population - 1) / 15  # linear in the candidates a shard trains together
    return seconds, (
        f"weekend-appo's median sec_per_gen, {one:.1f} s at population 1 and {sixteen:.1f} s at 16 on one shard, "
        f"linear between"
    )


def bo_at_its_limit(dims: int = 2, population: int = 4) -> None:
    """One BO generation (the GP fit and qLogNEI) at 200, 400 and its limit of 600 evaluations."""
    from bilevel_tune.core import bayes_opt

    rng = np.random.default_rng(0)
    settings = outer.SearchState("bo", population, dims, 42, settings=vars(BOSettings()).copy())
    for n in (200, 400, bayes_opt.MAX_EVALUATIONS):
        x = rng.random((n, dims))
        bayes_opt._acquire(x[:20], noisy_quadratic(rng)(x[:20]), settings, 1)  # imports and first-call costs
        start = time.perf_counter()
        bayes_opt._acquire(x, noisy_quadratic(rng)(x), settings, 2)
        print(f"bo, {dims}-D, {n} evaluations so far: one generation's fit and acquisition {time.perf_counter() - start:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=200)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--dims", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--inner-seconds", type=float, default=None)
    parser.add_argument("--bo-limit", action="store_true", help="BO's seconds a generation up to its limit")
    args = parser.parse_args()
    if args.bo_limit:
        return bo_at_its_limit()
    inner, source = (args.inner_seconds, "--inner-seconds") if args.inner_seconds else inner_seconds(args.population)
    generations = args.evaluations // args.population
    print(f"{args.evaluations} evaluations a run = {generations} generations of {args.population}; inner loop "
          f"{inner:.1f} s a generation ({source})")  # fmt: skip
    print(f"{'optimiser':>9} {'dims':>4} {'first s':>8} {'middle s':>9} {'last s':>7} {'total s':>8} {'share of run':>13}")
    for dims in args.dims:
        for name in outer.OPTIMIZERS:
            seconds = own_seconds(name, dims, args.population, args.evaluations)
            total = sum(seconds)
            share = total / (total + inner * generations)
            print(f"{name:>9} {dims:>4} {seconds[0]:>8.3f} {seconds[len(seconds) // 2]:>9.3f} {seconds[-1]:>7.3f} "
                  f"{total:>8.1f} {100 * share:>12.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
