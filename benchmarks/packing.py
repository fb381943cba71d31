"""Core-seconds per evaluation by population, each trial alone and packed 32 lakes to a block (`[runtime] pack`).

    python benchmarks/packing.py [--generations 3] [--inner-iters 50] [--populations 1,2,4,16] [--quick]
    python benchmarks/packing.py --compare PACKED_RUN ALONE_RUN
    python benchmarks/packing.py --blocks 6,16,32,38,48,64

Alone, a trial of population p trains its p lakes a generation as one block: a fresh Algorithm, K train() calls,
one evaluation — the fixed part of that price is most of it at p = 1. Packed, 32/p trials' generations are one
block of 32 lakes (`planning.packing.PACK_LAKES`; each lake its own seed's and index's: `inner.lake_pool`),
whatever p. Each way runs `generations`
generations in this process, its torch at one thread as a shard's is, priced in the CPU seconds the operating
system measured over them (every thread: RLlib's learner thread too), divided by the evaluations they made. At the
weekend's world and network (5 farms, 150-day seasons, 256 × 256; one evaluation season a candidate), or
`--quick`'s (2 farms, 10-day seasons, 16 units).

The last line is one JSON object: per population its core-seconds per evaluation alone and packed,
`packed_over_pop16` (a population-1 evaluation packed 32 to a block over a population-16 trial's evaluation alone) and
`unpacked_over_pop16` (the same alone: the shipped runs measured 4.7–5.8×).

`--blocks` prices a block by its lakes (population 16's generations, the last one's cut short), each size run once
untimed first, as a pool's shard has run it before: the curve `planning.packing` cuts pools and parts by
(`MAX_BLOCK_LAKES`).

`--compare` reads two run folders of one command, with `[runtime] pack` auto and off (`python -m
bilevel_tune.study weekend --quick --seed 1,2,3,4 [--set runtime.pack=off]`): each population's core-seconds per
evaluation from trials.csv (what the operating system measured, a packed trial's share of its pool's), whether
their answers.csv have the same rows, and the largest difference between a trial's finals and best-so-far.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # as a shard actor's thread cap

import torch  # noqa: E402

from bilevel_tune.base.seeds import generation_seed  # noqa: E402
from bilevel_tune.inner import InnerLoopConfig  # noqa: E402
from bilevel_tune.inner.shards import Shard  # noqa: E402
from bilevel_tune.planning.packing import PACK_LAKES  # noqa: E402 - a pool's lakes a generation, as runs pack them
from bilevel_tune.worlds.fresh_water import Rules, WorldConfig  # noqa: E402
from bilevel_tune.worlds.lakes import Lake  # noqa: E402


def config(quick: bool) -> InnerLoopConfig:
    world = WorldConfig(num_farms=2, horizon=10) if quick else WorldConfig(num_farms=5, horizon=150)
    return InnerLoopConfig(hidden=(16,) if quick else (256, 256), world_settings=world, streams="lake")


def candidates(trial: int, population: int) -> list[dict[str, float]]:
    """A generation's rule sets: the weekend's 1-D search around its start."""
    return [Rules.at_unit({"min_demand_frac": 0.3 + 0.4 * ((trial * population + k) % 7) / 6}).as_dict()
            for k in range(population)]  # fmt: skip


def alone(shard: Shard, population: int, generations: int, k: int) -> float:
    """Core-seconds per evaluation of one trial of this population, generation by generation."""
    cpu0 = time.process_time()
    for g in range(generations):
        shard.generation(candidates(0, population), generation_seed(1, g), 0, [100 + g], k)
    return (time.process_time() - cpu0) / (generations * population)


def packed(shard: Shard, population: int, generations: int, k: int) -> float:
    """Core-seconds per evaluation of 32/p trials of this population, each generation one block of their lakes."""
    trials = max(1, PACK_LAKES // population)
    cpu0 = time.process_time()
    for g in range(generations):
        lakes = [Lake(rules, generation_seed(1 + t, g), i) for t in range(trials)
                 for i, rules in enumerate(candidates(t, population))]  # fmt: skip
        shard.lakes(lakes, [[100 + g]] * len(lakes), 0, k)
    return (time.process_time() - cpu0) / (generations * trials * population)


def block_curve(shard: Shard, sizes: list[int], generations: int, k: int) -> dict[int, float]:
    """Core-seconds a lake of a block of n lakes, n by n: population 16's generations, 16 lakes a seed."""
    def block(n: int, g: int) -> list[Lake]:
        return [Lake(candidates(j // 16, 16)[j % 16], generation_seed(1 + j // 16, g), j % 16) for j in range(n)]

    print(f"{'lakes':>6} {'core-s a block':>15} {'a lake':>8}")
    found = {}
    for n in sizes:
        shard.lakes(block(n, 99), [[99]] * n, 0, k)  # untimed: a size the shard has run before
        cpu0 = time.process_time()
        for g in range(generations):
            shard.lakes(block(n, g), [[100 + g]] * n, 0, k)
        per_block = (time.process_time() - cpu0) / generations
        print(f"{n:>6} {per_block:15.2f} {per_block / n:8.3f}")
        found[n] = round(per_block / n, 4)
    return found


def compare(packed_run: str, alone_run: str) -> dict:
    """Two runs of one command, packed and `--set runtime.pack=off`: core-seconds per evaluation by population,
    and whether their answers and finals agree."""
    import pandas as pd

    runs = {name: Path(run) for name, run in (("packed", packed_run), ("alone", alone_run))}
    trials = {name: pd.read_csv(run / "trials.csv").sort_values(["population", "dims", "seed"]) for name, run in runs.items()}
    per_eval = {name: (t.core_s / t.evaluations).groupby(t.population).mean() for name, t in trials.items()}
    print(f"{'population':>10} {'packed':>8} {'alone':>8} {'packed / alone':>15}   core-seconds per evaluation, trials.csv")
    out: dict = {"populations": {}}
    for p in per_eval["alone"].index:
        a, b = per_eval["packed"][p], per_eval["alone"][p]
        print(f"{p:>10} {a:8.3f} {b:8.3f} {a / b:15.3f}")
        out["populations"][int(p)] = {"packed_core_s": round(float(a), 4), "alone_core_s": round(float(b), 4)}
    answers = {name: pd.read_csv(run / "answers.csv") for name, run in runs.items()}
    shown = [c for c in answers["alone"].columns if not c.startswith(("wall", "core"))]  # what each run spent differs
    out["answers_same_rows"] = bool(answers["packed"][shown].equals(answers["alone"][shown]))
    for column in ("final_objective", "best_objective"):
        gap = abs(trials["packed"][column].to_numpy() - trials["alone"][column].to_numpy())
        out[f"{column}_largest_difference"] = float(gap.max())
    print(f"answers.csv the same rows: {out['answers_same_rows']}; largest difference of a trial's final "
          f"{out['final_objective_largest_difference']:.2g}, of its best-so-far {out['best_objective_largest_difference']:.2g}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--inner-iters", type=int, default=50)
    parser.add_argument("--populations", default="1,2,4,16")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--compare", nargs=2, metavar=("PACKED_RUN", "ALONE_RUN"))
    parser.add_argument("--blocks", help="lakes a block, comma-separated: core-seconds a lake by block size")
    args = parser.parse_args()
    if args.compare:
        print(json.dumps(compare(*args.compare)))
        return 0
    torch.set_num_threads(1)
    cfg = config(args.quick)
    shard = Shard("appo", cfg)
    shard.generation(candidates(0, 1), 1, 0, [1], 1)  # untimed: the first build imports and warms up what the rest reuse
    where = "quick world" if args.quick else "the weekend's world and network"
    if args.blocks:
        print(f"{args.generations} generations a size, K = {args.inner_iters}, at {where}, one thread")
        curve = block_curve(shard, [int(n) for n in args.blocks.split(",")], args.generations, args.inner_iters)
        shard.stop()
        print(json.dumps({"generations": args.generations, "inner_iters": args.inner_iters, "quick": args.quick,
                          "core_s_a_lake": curve}))  # fmt: skip
        return 0
    populations = [int(p) for p in args.populations.split(",")]
    print(f"{args.generations} generations, K = {args.inner_iters}, at {where}, one thread; core-seconds per evaluation")
    print(f"{'population':>10} {'alone':>8} {'packed':>8} {'packed / alone':>15}")
    found = {}
    for p in populations:
        one = alone(shard, p, args.generations, args.inner_iters)
        many = packed(shard, p, args.generations, args.inner_iters) if p < PACK_LAKES else one
        print(f"{p:>10} {one:8.3f} {many:8.3f} {many / one:15.3f}")
        found[p] = {"alone_core_s": round(one, 4), "packed_core_s": round(many, 4)}
    shard.stop()
    out = {"generations": args.generations, "inner_iters": args.inner_iters, "quick": args.quick, "populations": found}
    if 1 in found and 16 in found:
        base = found[16]["alone_core_s"]
        out["packed_over_pop16"] = round(found[1]["packed_core_s"] / base, 3)
        out["unpacked_over_pop16"] = round(found[1]["alone_core_s"] / base, 3)
        print(f"a population-1 evaluation over a population-16 one: packed {out['packed_over_pop16']:.2f}×, "
              f"alone {out['unpacked_over_pop16']:.2f}×")  # fmt: skip
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
