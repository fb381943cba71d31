"""What a discrete action costs: a generation of MPE2's simple_spread with Discrete(5) actions against its Box one.

    python benchmarks/mpe_generation.py [--population 8] [--inner-iters 10] [--generations 4]

docs/worlds.md's `mpe_worlds:Spread` (saved from the page, as its recipe says), 3 agents, 25-step episodes,
network (64, 64), thread cap 1, the population APPO loop (`appo`) in this process: per action space, a
generation — a fresh Algorithm for the block, K train() calls, one evaluation season — timed after two
warm-up generations, the median over the timed ones, alternating the two spaces so the machine's noise falls on
both. Then simple_adversary (two kinds of agent, a module each) the same way. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bilevel_tune.appo.population import PopulationPolicyLoop
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.runtime import ray_init
from bilevel_tune.worlds import load_world

DOCS = Path(__file__).resolve().parent.parent / "docs" / "worlds.md"


def mpe_module(folder: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    (folder / "mpe_worlds.py").write_text(next(b for b in blocks if b.startswith('"""MPE2')))
    sys.path.insert(0, str(folder))


def config(kind: str, actions: str) -> InnerLoopConfig:
    world = load_world(kind)
    return InnerLoopConfig(
        hidden=(64, 64),
        world_kind=kind,
        world_settings=world.settings_class(actions=actions),
        objective_settings=world.objective_class(),
    )


def generation_seconds(loop: PopulationPolicyLoop, rules, seed: int, inner_iters: int) -> float:
    start = time.perf_counter()
    loop.reset(rules, seed, range(len(rules)))
    for _ in range(inner_iters):
        loop.train()
    loop.evaluate([seed])
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=int, default=8)
    parser.add_argument("--inner-iters", type=int, default=10)
    parser.add_argument("--generations", type=int, default=4)
    args = parser.parse_args()
    out: dict = {"population": args.population, "inner_iters": args.inner_iters}
    with tempfile.TemporaryDirectory() as folder, ray_init.scratch_ray(
        ray_init.RuntimeConfig(num_cpus=2, thread_cap=1, log_to_driver=False)
    ):
        mpe_module(Path(folder))
        for world in ("Spread", "Adversary"):
            kind = f"mpe_worlds:{world}"
            rule = load_world(kind).searched_by_default[0]
            rules = [{rule: (k + 0.5) / args.population} for k in range(args.population)]
            loops = {actions: PopulationPolicyLoop(config(kind, actions)) for actions in ("discrete", "continuous")}
            seconds: dict[str, list[float]] = {actions: [] for actions in loops}
            try:
                # the first two of each warm up: RLlib's first build, then the first release (a full collection
                # before the loop freezes what lives on, docs/inner-loop.md)
                for g in range(args.generations + 2):
                    for actions, loop in loops.items():
                        took = generation_seconds(loop, rules, g, args.inner_iters)
                        if g >= 2:
                            seconds[actions].append(took)
            finally:
                for loop in loops.values():
                    loop.stop()
            median = {actions: float(np.median(s)) for actions, s in seconds.items()}
            ratio = median["discrete"] / median["continuous"]
            out[world.lower()] = {**{a: round(s, 3) for a, s in median.items()}, "discrete_over_continuous": round(ratio, 3)}
            print(
                f"{world}, population {args.population}, K = {args.inner_iters}: a generation takes "
                f"{median['discrete']:.2f} s with Discrete(5) actions, {median['continuous']:.2f} s with a Box of 5 "
                f"({ratio:.2f}×; medians of {args.generations})",
                flush=True,
            )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
