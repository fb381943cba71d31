"""Soak: 200+ generations of the real APPO inner loop in one tiny trial under Ray Tune.

    python benchmarks/soak.py [--generations 200]

Runs the study machinery end to end (Tune trial, PolicyActor, checkpoints,
generations.jsonl) and prints the same final JSON keys as benchmarks/leak.py,
computed from the trial's record.
"""

from __future__ import annotations

import argparse
import json
import sys

from leak import leak_summary  # benchmarks/ is on sys.path when run as a script
from tiny_study import run_tiny_study, tiny_study_toml

from bilevel_tune.core import metrics


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=200)
    parser.add_argument("--inner-iters", type=int, default=5)
    args = parser.parse_args(argv)
    ((_, rows, _, _),) = run_tiny_study(
        tiny_study_toml("soak", 2, ["min_demand_frac"], args.generations, args.inner_iters, final_eval_seeds=1),
        "--wandb",
        "disabled",
    )
    seconds = [r[metrics.SEC_PER_GEN] for r in rows]
    censuses = [{k: r[k] for k in metrics.CENSUS_KEYS} for r in rows]
    for r in rows[:: max(1, len(rows) // 20)]:
        print(
            f"gen {r[metrics.GENERATION]:4d}  {r[metrics.SEC_PER_GEN]:.3f} s  threads_os {r[metrics.THREADS_OS]:3d}  learner_threads {r[metrics.LEARNER_THREADS]:3d}  rss {r[metrics.RSS_MB]:.1f} MB"
        )
    print(json.dumps({"soak": "tune+appo", **leak_summary(seconds, censuses)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
