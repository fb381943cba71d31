"""A job of final seeds — a trial's final re-evaluation, a held-out job — seed by seed and as one block of lakes.

    python benchmarks/lake_blocks.py [--seeds 16] [--inner-iters 50] [--loops appo,frozen,ppo] [--quick]

A job retrains two rule sets (the final rules and the status quo) on each of its final seeds and evaluates each
on its own seed. With block streams (every run begun before lakes) a loop runs it seed by seed: per seed a fresh
Algorithm, K train() calls on a block of two, one evaluation. With lake streams the population loop runs all of
it as one block of 2 × seeds lakes: one Algorithm, K train() calls, one evaluation. Each way runs in this process,
its torch at one thread as a shard's is, and is priced in the CPU seconds the operating system measured over it
(every thread: RLlib's learner thread too). At the weekend's world and network (5 farms, 150-day seasons, 256 ×
256), or `--quick`'s (2 farms, 10-day seasons, 16 units).

Then, loop by loop, the lake's independence: one lake (rule set 0 on the job's first seed) trained K times alone,
beside another seed's lakes, and beside more of them; its objective each way, and the largest difference from
alone (the population module's batched matmul rounds a lake's rows by where they sit in the block:
docs/inner-loop.md). `ppo` seed by seed is RLlib's per-agent PPO (what a run begun before lakes runs), as one
block the batched PPO: its job before and after. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # as a shard actor's thread cap

import torch  # noqa: E402

from bilevel_tune.inner import InnerLoopConfig  # noqa: E402
from bilevel_tune.inner.shards import Shard  # noqa: E402
from bilevel_tune.worlds.fresh_water import Rules, WorldConfig  # noqa: E402
from bilevel_tune.worlds.lakes import Lake, seed_lakes  # noqa: E402

FINAL = Rules(min_demand_frac=0.2).as_dict()  # a final rule set of the weekend's 1-D search
STATUS_QUO = Rules().as_dict()


def config(quick: bool, streams: str) -> InnerLoopConfig:
    world = WorldConfig(num_farms=2, horizon=10) if quick else WorldConfig(num_farms=5, horizon=150)
    return InnerLoopConfig(hidden=(16,) if quick else (256, 256), world_settings=world, streams=streams)


def job(loop: str, cfg: InnerLoopConfig, seeds: list[int], k: int) -> tuple[float, float]:
    """(core-seconds, wall seconds) of one job."""
    shard = Shard(loop, cfg)
    lakes, eval_seeds = seed_lakes([FINAL, STATUS_QUO], seeds)
    t0, cpu0 = time.perf_counter(), time.process_time()
    shard.lakes(lakes, eval_seeds, 0, k)
    core, wall = time.process_time() - cpu0, time.perf_counter() - t0
    shard.stop()
    return core, wall


def independence(loop: str, cfg: InnerLoopConfig, seeds: list[int], k: int) -> dict[str, float]:
    """The objective of one lake trained by `loop` alone and in blocks with other seeds' lakes."""
    lake = Lake(FINAL, seeds[0], 0)
    others = [Lake(Rules(fixed_quota=0.6 + 0.05 * i).as_dict(), seeds[1], i) for i in range(7)]
    blocks = {"alone": [lake], "after 1 lake": [others[0], lake], "after 3 lakes": [*others[:3], lake],
              "before 7 lakes": [lake, *others]}  # fmt: skip
    out = {}
    for name, block in blocks.items():
        shard = Shard(loop, cfg)
        report = shard.lakes(block, [[b.seed] for b in block], 0, k)
        shard.stop()
        out[name] = report.outcomes[block.index(lake)].objective
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--inner-iters", type=int, default=50)
    parser.add_argument("--loops", default="appo,frozen,ppo")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = [1000 + i for i in range(args.seeds)]
    where = "quick world" if args.quick else "the weekend's world and network"
    print(f"a job of {args.seeds} final seeds × 2 rule sets, K = {args.inner_iters}, at {where}, one thread")
    print(f"{'loop':<8} {'seed by seed core-s':>20} {'one block core-s':>17} {'block / seeds':>14}")
    found = {}
    for loop in args.loops.split(","):
        for streams in ("block", "lake"):  # untimed: a first build imports and warms up what every later one reuses
            job(loop, config(args.quick, streams), seeds[:1], 1)
        core_b, wall_b = job(loop, config(args.quick, "block"), seeds, args.inner_iters)
        core_l, wall_l = job(loop, config(args.quick, "lake"), seeds, args.inner_iters)
        print(f"{loop:<8} {core_b:20.1f} {core_l:17.1f} {core_l / core_b:14.3f}")
        found[loop] = {"seeds_core_s": round(core_b, 2), "block_core_s": round(core_l, 2),
                       "seeds_wall_s": round(wall_b, 2), "block_wall_s": round(wall_l, 2),
                       "block_over_seeds": round(core_l / core_b, 3)}  # fmt: skip
    lakes, largest = {}, {}
    for loop in args.loops.split(","):
        lakes[loop] = lake = independence(loop, config(args.quick, "lake"), seeds, args.inner_iters)
        largest[loop] = max(abs(v - lake["alone"]) for v in lake.values())
        print(f"{loop}: one lake, K train() calls:", ", ".join(f"{name} {value:.12f}" for name, value in lake.items()),
              f"— largest difference from alone {largest[loop]:.2g}")  # fmt: skip
    print(json.dumps({"seeds": args.seeds, "inner_iters": args.inner_iters, "quick": args.quick, "jobs": found,
                      "lake": lakes, "lake_largest_difference": largest}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
