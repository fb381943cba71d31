"""Population shards: one population-16 trial with 1 and with 2 shards, and the K = 0 equivalence.

    python benchmarks/scaling.py [--generations 4] [--inner-iters 25]

1. The weekend's world and network (5 farms, 150-day seasons, (256, 256)),
   population 16, 2-D, seed 42, run as a real study (Tune, APPO, W&B off)
   with --cpus-per-trial 1 and then 2, each in a Ray of its own with 2 CPUs.
   Generations per hour come from the records' seconds per generation,
   generation 0 aside (it also starts the shards); the whole trial's rate,
   start included, is printed too.
2. With no training (K = 0) the 16 candidates of the ES's first generation
   are evaluated with S = 1 and S = 2: every outcome must be identical,
   since a candidate's initial weights depend only on the generation's seed
   and its index.

The last line is one JSON object; compare ratios, not absolutes (one run, one machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import numpy as np

from bilevel_tune.cli.runner import RunOptions, run_study
from bilevel_tune.core import es, metrics
from bilevel_tune.inner import InnerLoopConfig, ShardedInnerLoop
from bilevel_tune.runtime import ray_init
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.run_folder import trial_records
from bilevel_tune.tune_edge.trainable import Seeds, candidate_rules

CELL = {"populations": (16,), "optimize_params": ("min_demand_frac", "fixed_quota"), "seeds": (42,)}


def generations_per_hour(shards: int, generations: int, inner_iters: int) -> tuple[float, float]:
    """(steady generations/hour, whole-trial generations/hour) of one trial run with `shards` shards."""
    with tempfile.TemporaryDirectory() as results:
        options = RunOptions(
            study="weekend", **CELL, outer_iters=generations, inner_iters=inner_iters, cpus_per_trial=shards,
            num_cpus=2, wandb="disabled", results=results, name="run",
        )  # fmt: skip
        outcome = run_study(options, out=lambda line: None)
        if outcome.exit_code:
            sys.exit(f"the S={shards} study failed: {outcome.last_line}")
        ((rows, final),) = trial_records(outcome.run_dir).values()
    seconds = [r[metrics.SEC_PER_GEN] for r in rows]
    assert {r[metrics.SHARDS] for r in rows} == {shards}
    return 3600 / float(np.median(seconds[1:])), 3600 * len(seconds) / sum(seconds)


def k0_identical() -> bool:
    """The first generation's 16 candidates, untrained, evaluated with one and with two shards."""
    study = load_study("weekend").with_overrides(populations=[16], seeds=[42])
    params = CELL["optimize_params"]
    state = es.EvolutionStrategy().init(study.es, 16, len(params), 42)
    rules = candidate_rules(study, params, es.ask(state))
    seeds = Seeds(42, study.budget.eval_episodes, 0)
    outcomes = []
    with ray_init.scratch_ray(ray_init.RuntimeConfig(num_cpus=2, log_to_driver=False)):
        for shards in (1, 2):
            with ShardedInnerLoop("appo", InnerLoopConfig.from_study(study), shards) as inner:
                outcomes.append(inner.run(rules, seeds.generation(0), seeds.evaluation, inner_iters=0).outcomes)
    return outcomes[0] == outcomes[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--inner-iters", type=int, default=25)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rates = {}
    for shards in (1, 2):
        steady, whole = generations_per_hour(shards, args.generations, args.inner_iters)
        rates[shards] = steady
        print(
            f"S = {shards}: {steady:.1f} generations/hour steady (K = {args.inner_iters}), "
            f"{whole:.1f} over the whole trial with its start",
            flush=True,
        )
    identical = k0_identical()
    print(f"K = 0: every candidate's evaluation identical with 1 and 2 shards: {identical}")
    result = {
        "inner_iters": args.inner_iters,
        "gens_per_hour_s1": round(rates[1], 1),
        "gens_per_hour_s2": round(rates[2], 1),
        "speedup_s2_vs_s1": round(rates[2] / rates[1], 3),
        "k0_outcomes_identical": identical,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
