"""Generations per hour: 2 concurrent trials vs 1, with thread caps at 1 vs 16 (oversubscribed).

    python benchmarks/concurrency.py [--generations 4] [--inner-iters 10]

Each configuration runs the same two real-APPO trials as a study (its own
embedded Ray cluster, W&B disabled) and counts generations per hour of wall
time. Figures are from one run of this script; compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STUDY = """
name = "concurrency"
[grid]
population = [4]
optimize_params = [["min_demand_frac"]]
seed = [1, 2]
[budget]
generations = {generations}
inner_iters = {inner_iters}
horizon = 30
num_farms = 5
hidden = [64, 64]
final_eval_seeds = 0
"""


def run(study_file: Path, results: Path, concurrent: int, cap: int) -> float:
    name = f"c{concurrent}-cap{cap}"
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bilevel_tune.study",
            str(study_file),
            "--wandb",
            "disabled",
            "--results",
            str(results),
            "--name",
            name,
            "--max-concurrent",
            str(concurrent),
            "--thread-cap",
            str(cap),
            "--num-cpus",
            "2",
            "--cpus-per-trial",  # one shard each: this measures trials side by side, not shards
            "1",
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--inner-iters", type=int, default=10)
    args = parser.parse_args(argv)
    total = 2 * args.generations
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        study_file = Path(tmp, "concurrency.toml")
        study_file.write_text(STUDY.format(generations=args.generations, inner_iters=args.inner_iters))
        for concurrent, cap in ((1, 1), (2, 1), (2, 16)):
            wall = run(study_file, Path(tmp, "results"), concurrent, cap)
            out[f"concurrent{concurrent}_cap{cap}"] = round(total / wall * 3600, 1)
            print(
                f"{concurrent} trial(s) at a time, thread cap {cap:2d}: {total} generations in {wall:.1f} s = {out[f'concurrent{concurrent}_cap{cap}']:.0f} generations/hour",
                flush=True,
            )
    out["speedup_2_vs_1"] = round(out["concurrent2_cap1"] / out["concurrent1_cap1"], 3)
    out["cap16_vs_cap1"] = round(out["concurrent2_cap16"] / out["concurrent2_cap1"], 3)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
