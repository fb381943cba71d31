"""Where the objective lives in this world: mean rewards of myopic play over the weekend's rule plane.

    python benchmarks/reward_levels.py [--seeds 5] [--steps 6]

The weekend study's settings (5 farms, risk scale 1.0, power 2.0, economy
only), every farm playing the myopic best response (the analytic inner loop),
on a grid of min_demand_frac × fixed_quota over their whole ranges, for the
quick budget's 30-day seasons and the full 150-day ones. Prints the range of
the objective and of its upper bound per season length; the last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.analytic import AnalyticLoop
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.worlds.fresh_water import Rules


def levels(horizon: int, seeds: int, steps: int) -> dict[str, float]:
    study = load_study("weekend")
    config = dataclasses.replace(InnerLoopConfig.from_study(study), horizon=horizon)
    base = Rules.from_physical(study.fixed_rules)
    grid = np.linspace(0.0, 1.0, steps)
    rules = [Rules.from_search(("min_demand_frac", "fixed_quota"), (m, q), base).as_dict() for m in grid for q in grid]
    loop = AnalyticLoop(config)
    loop.reset(rules, 0, range(len(rules)))
    outcomes = loop.evaluate(list(range(1, seeds + 1)))
    objectives = np.array([o.objective for o in outcomes])
    bounds = np.array([o.upper_bound for o in outcomes])
    return {
        "objective_min": round(float(objectives.min()), 4),
        "objective_median": round(float(np.median(objectives)), 4),
        "objective_max": round(float(objectives.max()), 4),
        "upper_bound_max": round(float(bounds.max()), 4),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args(argv)
    out = {}
    for horizon in (30, 150):
        out[f"days_{horizon}"] = found = levels(horizon, args.seeds, args.steps)
        print(
            f"{horizon:3d}-day seasons, myopic play, {args.steps}×{args.steps} rule grid × {args.seeds} seeds: "
            f"objective {found['objective_min']:.4f}–{found['objective_max']:.4f} "
            f"(median {found['objective_median']:.4f}), upper bound up to {found['upper_bound_max']:.4f}"
        )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
