"""Per core: the population APPO loop (`appo`) against RLlib's per-agent path (`appo-multiagent`), in one run.

    python benchmarks/per_core.py [fresh-water|fishery]     # ≈ 4 min on 2 cores (fresh water)

At a world's study world and network — fresh water: the weekend's (5 farms,
150-day seasons, (256, 256)); the fishery: its study's full budget (5
fishers, 100 steps, two actions each, (64, 64)) — thread cap 1, one
process, no extra env runners or learners:

1. train() seconds of both loops at population 16 and 1 (median of the
   timed calls after two warm-up calls), their ratio, and where a
   population-16 train() of the new loop goes (RLlib's own timers);
2. a generation at the weekend's budget (K = 50, one evaluation season) of the new
   loop in a shard actor, population 16 and 1: the share of its wall time
   spent outside its K train() calls and evaluation (the Algorithm's
   rebuild, the census, the call);
3. update equivalence (bilevel_tune.appo.equivalence): one season of the
   per-agent loop, one update of both learners, 4 candidates, one clipped
   and one not;
4. learning parity: K = 50 at fixed rules, 3 seeds each, both loops in
   lockstep (each batch applied before the next season is sampled)
   (fresh water's farms' mean reward; the fishery's objective).

The last line is one JSON object with `speedup_pop16`, `speedup_pop1` and
`equivalent`; compare ratios within one run (the machine is noisy).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import ray

from bilevel_tune.appo.equivalence import learning_parity, update_equivalence
from bilevel_tune.appo.multiagent import MultiAgentPolicyLoop
from bilevel_tune.appo.population import PopulationPolicyLoop
from bilevel_tune.inner import InnerLoopConfig, Shard
from bilevel_tune.runtime import ray_init
from bilevel_tune.worlds.fishery import FisheryObjective, FisherySettings
from bilevel_tune.worlds.fresh_water import Rules

CONFIGS = {
    "fresh-water": InnerLoopConfig(),  # the weekend world and network
    "fishery": InnerLoopConfig(  # studies/fishery.toml's full budget
        hidden=(64, 64), world_kind="fishery", world_settings=FisherySettings(), objective_settings=FisheryObjective()
    ),
}
TIMED_CALLS = {16: 5, 1: 12}
WORLD = sys.argv[1] if len(sys.argv) > 1 else "fresh-water"
if WORLD not in CONFIGS:
    sys.exit(f"per_core.py: world {WORLD!r} is unknown; allowed: {', '.join(CONFIGS)}")
CONFIG = CONFIGS[WORLD]


def block(n: int) -> list[dict[str, float]]:
    """n rule sets spread over the world's first searched rule (fresh water: with the risk penalty on)."""
    if WORLD == "fishery":
        return CONFIG.probe_rules(n)
    return [Rules.at_unit({"min_demand_frac": (k + 0.5) / n}, {"risk_penalty_scale": 1.0}).as_dict() for k in range(n)]


def far_apart() -> list[dict[str, float]]:
    """Four rule sets far apart, for the update check: one candidate clipped, one not."""
    if WORLD == "fishery":
        return [{"quota_max": q, "restoration_subsidy": s} for q, s in ((0.1, 0.0), (0.4, 0.5), (0.7, 0.1), (1.0, 0.3))]
    return [Rules.at_unit({"min_demand_frac": u, "fixed_quota": 1 - u}).as_dict() for u in (0.05, 0.35, 0.65, 0.95)]


def train_seconds(loop_class, n: int, calls: int) -> tuple[float, dict]:
    """(median train() seconds after two warm-up calls, RLlib's timers of the last call)."""
    loop = loop_class(CONFIG)
    try:
        loop.reset(block(n), seed=1, candidates=range(n))
        for _ in range(2):
            loop.train()
        seconds = []
        for _ in range(calls):
            start = time.perf_counter()
            result = loop.train()
            seconds.append(time.perf_counter() - start)
        return float(np.median(seconds)), result.get("timers", {})
    finally:
        loop.stop()


def generation_share(n: int, inner_iters: int = 50) -> dict[str, float]:
    """A weekend-budget generation of the new loop in a shard actor: its wall and the share outside train and evaluation."""
    actor = ray.remote(Shard).options(num_cpus=1).remote("appo", CONFIG)
    try:
        rows = []
        # the first starts the actor's RLlib and the second frees the first Algorithm before gc.freeze
        # (docs/inner-loop.md): a trial's start, not its steady generation, which the third one is
        for g in range(3):
            start = time.perf_counter()
            report = ray.get(actor.generation.remote(block(n), g, 0, [7], inner_iters))
            rows.append((time.perf_counter() - start, report))
        wall, report = rows[-1]
        return {
            "wall_s": round(wall, 2),
            "reset_s": round(report.sec_reset, 3),
            "outside_share": round((wall - report.sec_train - report.sec_evaluate) / wall, 4),
        }
    finally:
        ray.get(actor.stop.remote())
        ray.kill(actor)


def main() -> int:
    start = time.perf_counter()
    with ray_init.scratch_ray(ray_init.RuntimeConfig(num_cpus=2, thread_cap=1, log_to_driver=False)):
        out: dict = {"world": WORLD}
        print(f"train() seconds, {WORLD}: its study's world and network, thread cap 1, one process:", flush=True)
        for n, calls in TIMED_CALLS.items():
            old, _ = train_seconds(MultiAgentPolicyLoop, n, calls)
            new, timers = train_seconds(PopulationPolicyLoop, n, calls)
            out[f"speedup_pop{n}"] = round(old / new, 2)
            out[f"train_s_pop{n}"] = {"appo": round(new, 4), "appo-multiagent": round(old, 4)}
            print(
                f"  population {n:2d}: appo {new:.3f} s, appo-multiagent {old:.3f} s: {old / new:.1f}× "
                f"(appo: sampling {timers.get('sample', float('nan')):.3f} s, "
                f"learner update {timers.get('learner_update_timer', float('nan')):.3f} s)",
                flush=True,
            )
        print("a generation of K = 50 (the weekend's budget) of appo in a shard actor:", flush=True)
        for n in TIMED_CALLS:
            share = generation_share(n)
            out[f"outside_share_pop{n}"] = share["outside_share"]
            print(
                f"  population {n:2d}: {share['wall_s']:.1f} s, of which rebuild {share['reset_s']:.2f} s; "
                f"outside train() and evaluation: {100 * share['outside_share']:.1f} %",
                flush=True,
            )
        report = update_equivalence(CONFIG, far_apart(), seed=3)
        out["equivalent"] = report.equivalent and report.clipped_and_not
        print(
            f"update equivalence, 4 candidates: initial weights identical {report.initial_weights_identical}; "
            f"grad clip {report.grad_clip:.3g}, clipped {[c.clipped for c in report.candidates]}; "
            f"max |Δg|/max|g| per candidate {[f'{c.gradient_difference:.1e}' for c in report.candidates]}, "
            f"after the step max |Δθ| {[f'{c.max_abs_difference:.1e}' for c in report.candidates]} "
            f"({max(c.max_step_share for c in report.candidates):.1%} of one Adam step); "
            f"equivalent {out['equivalent']}",
            flush=True,
        )
        parity = learning_parity(CONFIG, block(2), seeds=(1, 2, 3))
        out["parity_within_seed_noise"], out["parity_rises"] = parity.within_seed_noise, parity.rises
        out["parity_gap"] = round(parity.gap, 4)
        print(f"learning parity, population 2, K = 50, seeds 1–3: {parity.summary()}", flush=True)
    out["wall_s"] = round(time.perf_counter() - start, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
