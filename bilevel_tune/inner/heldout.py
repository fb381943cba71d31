"""Retraining recorded rules on final seeds, on Ray: each job one block of rules under one loop, on its seeds.

    for scored in score(jobs, cpus=4): ...     # scored.scores: per seed, one objective per rule set of the block

A job is a block of rule sets — the held-out step's (final rules, status quo), the re-scoring's (best-so-far rules,
search mean's rules) — run by a loop exactly as a trial's final re-evaluation runs its own: per final seed a fresh
reset under that seed (rule set k at candidate index k, so its initial weights are a trial's k-th), K train()
calls, one evaluation season on it — in a `Shard` actor of one CPU; a loop that packs (lake streams) trains the
job's seeds as one block of lakes, one reset and K train() calls for all of them (`Shard.lakes`). Jobs are grouped by learner; each learner's jobs run on up to `cpus` actors at once, in the
order given, and each job is handed back as soon as it ends (the caller records it: an interrupted step resumes
where it stopped). A job whose loop fails is handed back with NaN scores and the error's first line.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from bilevel_tune.inner.contract import InnerLoopConfig, InnerLoopStopped
from bilevel_tune.inner.shards import STOP_POLL_S, Shard
from bilevel_tune.worlds.lakes import seed_lakes

POLL_S = STOP_POLL_S


@dataclass(frozen=True)
class Job:
    key: Any  # the caller's: which trial and learner
    loop: str  # the learner's loop spec
    config: InnerLoopConfig
    rules: tuple[Mapping[str, float], ...]  # the block, physical: e.g. (the final rules, the status quo)
    seeds: tuple[int, ...]  # final re-evaluation seeds
    inner_iters: int


@dataclass(frozen=True)
class Scored:
    job: Job
    scores: tuple[tuple[float, ...], ...]  # per seed: each rule set's objective, in the block's order
    seconds: float
    error: str | None = None
    detail: dict = field(default_factory=dict, compare=False)
    cpu_s: float = float("nan")  # the CPU seconds its shard used, OS-measured (NaN: the job failed)


def score(
    jobs: Sequence[Job], cpus: int, stop_requested: Callable[[], bool] = lambda: False
) -> Iterator[Scored]:
    """Every job scored, learner by learner (a learner's jobs on up to `cpus` shard actors at once); each handed
    back as it ends. Raises InnerLoopStopped when `stop_requested()` turns true (the actors killed first)."""
    for _, group in itertools.groupby(jobs, key=lambda j: (j.loop, j.config, j.inner_iters)):
        yield from _score_group(list(group), max(1, cpus), stop_requested)


def _score_group(jobs: list[Job], cpus: int, stop_requested) -> Iterator[Scored]:
    import ray

    actors = [
        ray.remote(Shard).options(num_cpus=1, max_restarts=0).remote(jobs[0].loop, jobs[0].config)
        for _ in range(min(cpus, len(jobs)))
    ]
    pending = list(jobs)
    running: dict[Any, tuple[Job, Any, list, float]] = {}  # the last call of a job's chain → (job, actor, calls, t0)

    def start(actor) -> None:
        import time

        job = pending.pop(0)
        lakes, eval_seeds = seed_lakes(job.rules, job.seeds)  # one block: a loop that packs trains it as one
        calls = [actor.lakes.remote(lakes, eval_seeds, 0, job.inner_iters)]
        running[calls[-1]] = (job, actor, calls, time.perf_counter())

    try:
        for actor in actors:
            if pending:
                start(actor)
        while running:
            done, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            if stop_requested():
                raise InnerLoopStopped("the held-out step was stopped")
            for ref in done:
                job, actor, calls, started = running.pop(ref)
                yield _collect(job, calls, started)
                if pending:
                    start(actor)  # the actor that finished takes the next job
    finally:
        for actor in actors:
            ray.kill(actor)


def _collect(job: Job, calls: list, started: float) -> Scored:
    import time

    import ray

    try:
        reports = ray.get(calls)
    except Exception as err:  # noqa: BLE001 - a learner's failure is the job's, recorded; the step goes on
        message = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        nan = tuple(float("nan") for _ in job.rules)
        return Scored(job, tuple(nan for _ in job.seeds), time.perf_counter() - started, message[:300])
    outcomes = [float(o.objective) for r in reports for o in r.outcomes]  # seed by seed, the block's rule sets
    width = len(job.rules)
    scores = tuple(tuple(outcomes[i : i + width]) for i in range(0, len(outcomes), width))
    detail = {
        "sec_reset": sum(r.sec_reset for r in reports),
        "sec_train": sum(r.sec_train for r in reports),
        "sec_evaluate": sum(r.sec_evaluate for r in reports),
    }
    return Scored(job, scores, time.perf_counter() - started, None, detail, sum(r.cpu_s for r in reports))
