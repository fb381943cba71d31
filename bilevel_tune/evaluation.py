"""Evaluating a policy on the basin: per-candidate outcomes and a process census.

Shared by the real inner loop (bilevel_tune.actor) and its analytic
stand-in (bilevel_tune.analytic); plain numpy, no Ray.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Sequence

import numpy as np

from bilevel_tune import metrics as M
from bilevel_tune.objective import ObjectiveWeights, candidate_outcomes
from bilevel_tune.world import Basin, Rules, WorldConfig, stack_days

Policy = Callable[[np.ndarray], np.ndarray]  # obs (N, 11) -> requested fraction (N,)


# gRPC (inside Ray's core worker) grows and shrinks these pools on its own, whatever our code does.
GRPC_THREAD_PREFIXES = ("grpc_global_tim", "event_engine", "timer_manager")


def _os_thread_names() -> list[str] | None:
    task_dir = f"/proc/{os.getpid()}/task"
    if not os.path.isdir(task_dir):
        return None
    names = []
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # the thread ended while we looked
            pass
    return names


def census(learner_thread_cls: type | None = None) -> dict[str, float]:
    """Threads (Python, OS, gRPC's self-scaling share of OS, live learner threads of `learner_thread_cls`; −1 if unknown) and RSS."""
    import psutil

    names = _os_thread_names()
    alive = threading.enumerate()
    return {
        M.THREADS_PY: len(alive),
        M.THREADS_OS: len(names) if names is not None else psutil.Process().num_threads(),
        M.THREADS_GRPC: sum(n.startswith(GRPC_THREAD_PREFIXES) for n in names) if names is not None else -1,
        M.LEARNER_THREADS: sum(isinstance(t, learner_thread_cls) for t in alive) if learner_thread_cls else -1,
        M.RSS_MB: psutil.Process().memory_info().rss / 2**20,
        M.PID: os.getpid(),
    }


def evaluate_policy(
    world: WorldConfig, weights: ObjectiveWeights, rules: Sequence[Rules], seeds: Sequence[int], policy: Policy
) -> list[dict[str, Any]]:
    """Roll one season per seed, every farm of candidate k acting `policy(obs)[k]`; outcomes per candidate."""
    basin = Basin(world, rules)
    episodes, failed = [], np.zeros(len(rules), dtype=bool)
    for seed in seeds:
        obs = basin.reset(np.random.default_rng(int(seed)))
        days = []
        while not basin.done:
            fractions = np.repeat(np.asarray(policy(obs), dtype=float)[:, None], world.num_farms, axis=1)
            days.append(basin.step(fractions))
            obs = basin.observe()
        episodes.append(stack_days(days))
        failed |= basin.failed
    return candidate_outcomes(episodes, rules, weights, failed)
