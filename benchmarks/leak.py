"""Learner-thread leak benchmark: N generations of reset → K × train → evaluate in a real PolicyActor (an APPO shard).

    python benchmarks/leak.py --generations 100            # leak-free stop (the fix), the population loop
    python benchmarks/leak.py --generations 100 --no-stop  # skip the stop, keep old algorithms referenced
    python benchmarks/leak.py --loop appo-multiagent       # RLlib's per-agent loop

Prints one line per generation (seconds, threads, RSS) and a final JSON line:
sgen_ratio (median s/gen of the last 10 % of generations over the first 10 %),
threads_delta (threads_os last − first; threads_delta_own without gRPC's
self-scaling pools), learner_threads_max, rss_growth
(last-decile median RSS / first-decile median − 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import ray

from bilevel_tune.core import metrics
from bilevel_tune.inner import InnerLoopConfig, Shard
from bilevel_tune.runtime import ray_init
from bilevel_tune.worlds.fresh_water import Rules, WorldConfig


def leak_summary(seconds: list[float], censuses: list[dict]) -> dict:
    decile = max(1, len(seconds) // 10)
    censuses = [c.as_metrics() if hasattr(c, "as_metrics") else c for c in censuses]
    rss = [c[metrics.RSS_MB] for c in censuses]
    return {
        "generations": len(seconds),
        "sgen_first": round(float(np.median(seconds[:decile])), 4),
        "sgen_last": round(float(np.median(seconds[-decile:])), 4),
        "sgen_ratio": round(float(np.median(seconds[-decile:]) / np.median(seconds[:decile])), 3),
        "threads_delta": censuses[-1][metrics.THREADS_OS] - censuses[0][metrics.THREADS_OS],
        # the same, less gRPC's self-scaling pools (they come and go whatever our code does)
        "threads_delta_own": (censuses[-1][metrics.THREADS_OS] - censuses[-1][metrics.THREADS_GRPC])
        - (censuses[0][metrics.THREADS_OS] - censuses[0][metrics.THREADS_GRPC]),
        "learner_threads_max": max(c[metrics.LEARNER_THREADS] for c in censuses),
        "rss_growth": round(float(np.median(rss[-decile:]) / np.median(rss[:decile]) - 1), 4),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=100)
    parser.add_argument("--inner-iters", type=int, default=10)
    parser.add_argument("--population", type=int, default=2)
    parser.add_argument("--no-stop", action="store_true", help="the leaking variant (Ray < 2.56 behaviour)")
    parser.add_argument("--loop", default="appo", choices=("appo", "appo-multiagent"), help="which APPO loop")
    args = parser.parse_args(argv)
    if args.generations < 2 or args.inner_iters < 1 or args.population < 1:
        parser.error("--generations ≥ 2, --inner-iters ≥ 1 and --population ≥ 1 are required")

    with ray_init.scratch_ray(ray_init.RuntimeConfig(num_cpus=2, thread_cap=1, log_to_driver=False)):
        inner = InnerLoopConfig(
            world_settings=WorldConfig(num_farms=2, horizon=20), hidden=(16,),
            stop_mode="none" if args.no_stop else "leak-free",
        )  # fmt: skip
        rules = [Rules.at_unit({"min_demand_frac": u}).as_dict() for u in np.linspace(0.1, 0.9, args.population)]
        actor = ray.remote(Shard).options(num_cpus=1).remote(args.loop, inner)
        seconds, censuses = [], []
        print(
            f"ray {ray.__version__}, loop {args.loop}, stop_mode={inner.stop_mode}, K={args.inner_iters}, "
            f"population={args.population}"
        )
        for g in range(args.generations):
            start = time.perf_counter()
            c = ray.get(actor.generation.remote(rules, g, 0, [0], args.inner_iters)).census
            seconds.append(time.perf_counter() - start)
            censuses.append(c.as_metrics())
            print(
                f"gen {g:4d}  {seconds[-1]:.3f} s  threads_os {c.threads_os:3d}  learner_threads {c.learner_threads:3d}  rss {c.rss_mb:.1f} MB",
                flush=True,
            )
        ray.get(actor.stop.remote())
    print(
        json.dumps(
            {"loop": args.loop, "stop_mode": inner.stop_mode, "ray": ray.__version__, **leak_summary(seconds, censuses)}
        )
    )


if __name__ == "__main__":
    sys.exit(main())
