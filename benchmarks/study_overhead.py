"""Study overhead: the share of a trial's wall time spent outside RLlib train/evaluate, at K = 50.

    python benchmarks/study_overhead.py [--generations 6] [--inner-iters 50]

One real-APPO trial under Tune (tiny world, population 16); the rest of its
wall time — ES ask/tell, the Algorithm rebuild (reset), the generation record,
Tune reports and checkpoints, tracking, actor start — is the overhead.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys

from tiny_study import run_tiny_study, tiny_study_toml

from bilevel_tune.core import metrics


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=6)
    parser.add_argument("--inner-iters", type=int, default=50)
    parser.add_argument("--wandb", default="offline")
    args = parser.parse_args(argv)
    ((_, rows, _, progress),) = run_tiny_study(
        tiny_study_toml(
            "overhead", 16, ["min_demand_frac", "fixed_quota"], args.generations, args.inner_iters, final_eval_seeds=0
        ),
        "--wandb",
        args.wandb,
    )
    wall = float(list(csv.DictReader(io.StringIO(progress)))[-1]["time_total_s"])
    inner = sum(r[metrics.SEC_TRAIN] + r[metrics.SEC_EVALUATE] for r in rows)
    reset = sum(r[metrics.SEC_RESET] for r in rows)
    steady = rows[1:] or rows  # generation 0 also pays the actor's start and RLlib's first build
    steady_gen = sum(r[metrics.SEC_PER_GEN] for r in steady) / len(steady)
    steady_inner = sum(r[metrics.SEC_TRAIN] + r[metrics.SEC_EVALUATE] for r in steady) / len(steady)
    print(
        f"trial wall {wall:.1f} s over {len(rows)} generations at K={args.inner_iters}: train+evaluate {inner:.1f} s, reset {reset:.1f} s"
    )
    result = {
        "generations": len(rows),
        "inner_iters": args.inner_iters,
        "trial_wall_s": round(wall, 2),
        "train_evaluate_s": round(inner, 2),
        "overhead_share": round(1 - inner / wall, 4),
        "steady_overhead_share": round(1 - steady_inner / steady_gen, 4),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
