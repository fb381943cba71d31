"""Reusing a finished trial's worker for the next trial (`tune_edge.experiment.REUSE_TRIAL_WORKERS`): the quick
weekend study (8 trials of the analytic loop, 4 generations each) run with a fresh worker per trial and with reuse,
alternately, each in a process of its own with its own Ray; the walls, their ratio, and whether the two runs' trials
read the same.

    python benchmarks/trial_workers.py [--repeats 2]

A trial's own worker holds no model — the inner loop's PolicyActors are its children and end with it — so a short
trial's wall is mostly a worker's start and its imports; reuse leaves the runs' numbers as they were.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ONE_RUN = """
import sys
from bilevel_tune.tune_edge import experiment
experiment.REUSE_TRIAL_WORKERS = sys.argv[1] == "reuse"
from bilevel_tune.cli.main import main
sys.exit(main(["weekend", "--quick", "--inner", "analytic", "--wandb", "disabled", "--outer-iters", "4",
               "--results", sys.argv[2], "--name", sys.argv[3]]))
"""
SAME = ["population", "dims", "seed", "status", "best_objective", "best_generation", "final_objective", "final_mean_objective"]


def run(mode: str, results: Path, name: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", ONE_RUN, mode, str(results), name], check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    walls: dict[str, list[float]] = {"fresh": [], "reuse": []}
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder)
        for i in range(args.repeats):
            for mode in (("fresh", "reuse") if i % 2 == 0 else ("reuse", "fresh")):  # alternate: load drifts
                walls[mode].append(run(mode, results, f"{mode}{i}"))
                print(f"{mode:>5} run {i + 1}: {walls[mode][-1]:.1f} s", flush=True)
        tables = {mode: pd.read_csv(results / f"{mode}0" / "trials.csv").sort_values(["population", "dims", "seed"])
                  for mode in walls}  # fmt: skip
        same = tables["fresh"][SAME].reset_index(drop=True).equals(tables["reuse"][SAME].reset_index(drop=True))
    fresh, reuse = statistics.median(walls["fresh"]), statistics.median(walls["reuse"])
    print(f"quick weekend, 8 trials: fresh workers {fresh:.1f} s, reused {reuse:.1f} s (medians of {args.repeats}): "
          f"reuse takes {reuse / fresh:.2f} of the wall")  # fmt: skip
    print(f"the two runs' trials read the same (status, best, final scores): {same}")


if __name__ == "__main__":
    main()
