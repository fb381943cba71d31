"""Farm-steps per second of the world alone: 5 farms × 16 candidates, random actions.

    python benchmarks/env_throughput.py [--seconds 5]

Prints the numpy core (`Basin`) and the RLlib env shell (`WorldEnv` on fresh water,
dict in / dict out, as RLlib drives it); the core's figure comes last.
"""

import argparse
import time

import numpy as np

from bilevel_tune.appo.world_env import WorldEnv
from bilevel_tune.worlds.fresh_water import Basin, Rules, WorldConfig

FARMS, CANDIDATES = 5, 16


def farm_steps_per_second(step, reset, seconds: float) -> float:
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        done = reset()
        while not done():
            step()
            steps += FARMS * CANDIDATES
    return steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rules = [Rules()] * CANDIDATES

    env = WorldEnv({"world": "fresh-water", "num_farms": FARMS, "rules": [r.as_dict() for r in rules]})
    state = {"done": False}

    def env_reset():
        env.reset(seed=int(rng.integers(1 << 30)))
        state["done"] = False
        return lambda: state["done"]

    def env_step():
        actions = dict(zip(env.agents, rng.random((len(env.agents), 1), dtype=np.float32)))
        state["done"] = env.step(actions)[3]["__all__"]

    shell = farm_steps_per_second(env_step, env_reset, args.seconds)
    print(f"env shell (WorldEnv, dicts): {shell:,.0f} farm-steps/s")

    basin = Basin(WorldConfig(num_farms=FARMS), rules)

    def basin_reset():
        basin.reset(np.random.default_rng(int(rng.integers(1 << 30))))
        return lambda: basin.done

    core = farm_steps_per_second(lambda: basin.step(rng.random((CANDIDATES, FARMS))), basin_reset, args.seconds)
    print(f"world core (Basin, numpy, {FARMS} farms x {CANDIDATES} candidates): {core:,.0f} farm-steps/s")


if __name__ == "__main__":
    main()
