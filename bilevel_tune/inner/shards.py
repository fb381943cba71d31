"""The trial's side of the seam: shard actors (`Shard`), each running one loop on a contiguous block of
the population, and the trial's handle on them (`ShardedInnerLoop`), merging their reports in candidate
order (`GenerationResult`). The contract the loops meet is `contract`'s.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from bilevel_tune.core import metrics
from bilevel_tune.inner.census import Census, take_census
from bilevel_tune.inner.contract import (
    LAKE_STREAMS,
    InnerLoopConfig,
    InnerLoopError,
    InnerLoopStopped,
    load_loop_class,
)
from bilevel_tune.worlds.contract import Assessment
from bilevel_tune.worlds.lakes import Lake, groups

logger = logging.getLogger(__name__)

SHARD_STOP_TIMEOUT_S = 30.0
STOP_POLL_S = 0.05


# -- one shard, and what it returns ---------------------------------------------------
@dataclass(frozen=True)
class ShardReport:
    """One shard's generation: its block's outcomes, where and how long it ran, its census."""

    first: int  # the global index of the shard's first candidate
    outcomes: tuple[Assessment, ...]
    census: Census
    node: str
    sec_reset: float
    sec_train: float
    sec_evaluate: float
    stop_confirmed: bool
    node_ip: str = ""
    cpu_s: float = 0.0  # the shard process's CPU seconds over the call (every thread: the learner's too), OS-measured

    @classmethod
    def in_turn(cls, parts: Sequence["ShardReport"]) -> "ShardReport":
        """One shard's report of the blocks it ran one after another: their outcomes in order, their seconds
        summed, the census after the last, confirmed when every stop was."""
        if len(parts) == 1:
            return parts[0]
        return cls(
            first=parts[0].first,
            outcomes=tuple(o for part in parts for o in part.outcomes),
            census=parts[-1].census,
            node=parts[-1].node,
            sec_reset=sum(part.sec_reset for part in parts),
            sec_train=sum(part.sec_train for part in parts),
            sec_evaluate=sum(part.sec_evaluate for part in parts),
            stop_confirmed=all(part.stop_confirmed for part in parts),
            node_ip=parts[-1].node_ip,
            cpu_s=sum(part.cpu_s for part in parts),
        )

    def detail(self) -> dict[str, Any]:
        """The shard's entry in a generation record."""
        return {
            metrics.SHARD_FIRST: self.first,
            metrics.SHARD_SIZE: len(self.outcomes),
            metrics.NODE: self.node,
            metrics.NODE_IP: self.node_ip,
            metrics.SEC_RESET: self.sec_reset,
            metrics.SEC_TRAIN: self.sec_train,
            metrics.SEC_EVALUATE: self.sec_evaluate,
            metrics.SHARD_CORE_S: self.cpu_s,
            **self.census.as_metrics(),
        }


class Shard:
    """The body of one shard actor: a loop instance, driven one generation — or one block of lakes — per call."""

    def __init__(self, spec: str, config: InnerLoopConfig):
        self.loop = load_loop_class(spec)(config)
        self.node, self.node_ip = _node()  # where this actor lives, for its whole life
        # a loop that trains several seeds' lakes as one block, and draws each lake's numbers from its own streams
        self.packs = config.streams == LAKE_STREAMS and callable(getattr(self.loop, "reset_lakes", None))

    def generation(
        self, rules: Sequence[Mapping[str, float]], seed: int, first: int, eval_seeds: Sequence[int], inner_iters: int
    ) -> ShardReport:
        candidates = range(first, first + len(rules))
        reset = lambda: self.loop.reset(rules, seed, candidates)  # noqa: E731
        return self._block(first, len(rules), reset, lambda: self.loop.evaluate(eval_seeds), inner_iters)

    def lakes(
        self, lakes: Sequence[Lake], eval_seeds: Sequence[Sequence[int]], first: int, inner_iters: int
    ) -> ShardReport:
        """A block of lakes — each under its rules and seed, lake k evaluated on `eval_seeds[k]` — trained as one
        where the loop packs; else run group by group (consecutive lakes of one seed and one list of evaluation
        seeds: a generation each, `reset(rules, seed, indices)`, as a loop written before lakes runs them)."""
        if self.packs:
            reset = lambda: self.loop.reset_lakes(lakes)  # noqa: E731
            return self._block(first, len(lakes), reset, lambda: self.loop.evaluate_lakes(eval_seeds), inner_iters)
        parts = []
        for a, n in groups([(lake.seed, tuple(seeds)) for lake, seeds in zip(lakes, eval_seeds)]):
            group, seeds = lakes[a : a + n], eval_seeds[a]
            reset = partial(self.loop.reset, [lake.rules for lake in group], group[0].seed, [lake.index for lake in group])
            parts.append(self._block(first + a, n, reset, partial(self.loop.evaluate, seeds), inner_iters))
        return ShardReport.in_turn(parts)

    def can_pack(self) -> bool:
        return self.packs

    def _block(self, first: int, size: int, reset, evaluate, inner_iters: int) -> ShardReport:
        """reset → K × train → evaluate, timed, with the census after and the process's CPU seconds over it."""
        t0, cpu0 = time.perf_counter(), time.process_time()
        confirmed = reset()
        t1 = time.perf_counter()
        for _ in range(inner_iters):
            self.loop.train()
        t2 = time.perf_counter()
        outcomes = tuple(
            o if hasattr(o, "as_dict") else Assessment.from_dict(o)  # a world's Assessment, or a loop's own record
            for o in evaluate()
        )
        t3 = time.perf_counter()
        if len(outcomes) != size:
            raise InnerLoopError(f"evaluate() returned {len(outcomes)} outcomes for {size} candidates")
        thread_cls = getattr(self.loop, "learner_thread_class", lambda: None)()
        return ShardReport(
            first=first,
            outcomes=outcomes,
            census=take_census(thread_cls),
            node=self.node,
            sec_reset=t1 - t0,
            sec_train=t2 - t1,
            sec_evaluate=t3 - t2,
            stop_confirmed=bool(confirmed),
            node_ip=self.node_ip,
            cpu_s=time.process_time() - cpu0,
        )

    def pid(self) -> int:
        return os.getpid()

    def stop(self) -> bool:
        return self.loop.stop()


def _node() -> tuple[str, str]:
    """(Ray's node id, the node's address) of this process; empty outside Ray (an in-process shard)."""
    import ray

    if not ray.is_initialized():
        return "", ""
    return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()


def blocks(population: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous (first, size) blocks of candidates, sizes differing by at most one, larger first."""
    shards = max(1, min(shards, population))
    base, extra = divmod(population, shards)
    out, first = [], 0
    for s in range(shards):
        size = base + (1 if s < extra else 0)
        out.append((first, size))
        first += size
    return out


def in_turns(first: int, size: int, max_block: int | None) -> list[tuple[int, int]]:
    """A shard's block as the (first, size) calls it runs one after another: itself, or — larger than `max_block` —
    the fewest near-equal parts of at most `max_block` candidates."""
    if max_block is None or size <= max_block:
        return [(first, size)]
    return [(first + f, s) for f, s in blocks(size, -(-size // max_block))]


@dataclass(frozen=True)
class GenerationResult:
    """A generation's outcomes in candidate order, with every shard's report."""

    outcomes: tuple[Assessment, ...]
    shards: tuple[ShardReport, ...]

    @property
    def objectives(self) -> np.ndarray:
        return np.array([o.objective for o in self.outcomes], dtype=float)

    @property
    def census(self) -> Census:
        return Census.total([s.census for s in self.shards])

    @property
    def cpu_s(self) -> float:
        """The CPU seconds its shards used, summed."""
        return float(sum(s.cpu_s for s in self.shards))

    @property
    def timing(self) -> dict[str, float]:
        """Each phase as long as its slowest shard took: the trial waits for all of them."""
        return {
            metrics.SEC_RESET: max(s.sec_reset for s in self.shards),
            metrics.SEC_TRAIN: max(s.sec_train for s in self.shards),
            metrics.SEC_EVALUATE: max(s.sec_evaluate for s in self.shards),
        }

    def shard_detail(self) -> list[dict[str, Any]]:
        return [s.detail() for s in self.shards]

    @classmethod
    def merge(cls, reports: Sequence[ShardReport]) -> "GenerationResult":
        reports = tuple(sorted(reports, key=lambda r: r.first))
        return cls(outcomes=tuple(o for r in reports for o in r.outcomes), shards=reports)


# -- the trial's handle ------------------------------------------------------------------
class ShardedInnerLoop:
    """A trial's inner loop: `shards` actors of one CPU each, run together every generation.

    Inside a Tune trial the actors land in the trial's placement group (one
    CPU bundle per shard). A shard whose previous learner could not be
    confirmed stopped is replaced after the generation, so a leak never
    accumulates.
    """

    _warned = False

    def __init__(
        self,
        spec: str,
        config: InnerLoopConfig,
        shards: int = 1,
        stop_requested: Callable[[], bool] = lambda: False,
        inner_iters: int = 1,
        num_cpus: float = 1,
    ):
        if shards < 1:
            raise ValueError(f"shards={shards} must be ≥ 1")
        self.spec, self.config, self.stop_requested, self.inner_iters = spec, config, stop_requested, inner_iters
        self.num_cpus = num_cpus  # each shard's; 0 in a lake pool, whose CPU its members' bundles hold
        self.actors = [self._start() for _ in range(shards)]
        self.cpu_s = 0.0  # what every call's shards used so far, summed: a trial's inner-loop CPU seconds
        self._packs: bool | None = None

    def _start(self):
        import ray

        return ray.remote(Shard).options(num_cpus=self.num_cpus, max_restarts=0).remote(self.spec, self.config)

    @property
    def shards(self) -> int:
        return len(self.actors)

    @property
    def packs(self) -> bool:
        """Does its loop train several seeds' lakes as one block (`Shard.packs`)? Asked of its first shard once."""
        if self._packs is None:
            import ray

            self._packs = bool(ray.get(self.actors[0].can_pack.remote()))
        return self._packs

    def run(
        self,
        rules: Sequence[Mapping[str, float]],
        seed: int,
        eval_seeds: Sequence[int],
        inner_iters: int | None = None,
        max_block: int | None = None,
    ) -> GenerationResult:
        """reset → K × train → evaluate on every shard at once (K: this loop's, unless given).

        One remote call per shard; with `max_block` (a scan's grid), a shard's block larger than that runs as
        several calls, one after another in its actor, each candidate keeping its global index (its seeds).
        """
        inner_iters = self.inner_iters if inner_iters is None else inner_iters
        calls = [
            [
                actor.generation.remote(list(rules[first : first + size]), seed, first, list(eval_seeds), inner_iters)
                for first, size in in_turns(block_first, block_size, max_block)
            ]
            for actor, (block_first, block_size) in zip(self.actors, blocks(len(rules), self.shards))
        ]
        return self._gather(calls)

    def run_lakes(
        self, lakes: Sequence[Lake], eval_seeds: Sequence[Sequence[int]], inner_iters: int | None = None
    ) -> GenerationResult:
        """A block of lakes (a trial's final re-evaluation: its final seeds × its rule sets) split over the shards as
        a population is, each shard's part one call (`Shard.lakes`); outcomes in lake order.

        Where the loop does not pack (block streams, or a loop written before lakes), each group of one seed's lakes
        — indices 0, 1, … — is a generation of its own, `run(rules, seed, its evaluation seeds)`, as before lakes.
        """
        inner_iters = self.inner_iters if inner_iters is None else inner_iters
        if not self.packs:
            parts = []
            for a, n in groups([(lake.seed, tuple(s)) for lake, s in zip(lakes, eval_seeds)]):
                group = lakes[a : a + n]
                if [lake.index for lake in group] != list(range(n)):
                    raise InnerLoopError(f"lakes of seed {group[0].seed} have indices {[g.index for g in group]}, "
                                         f"not 0 … {n - 1}: a loop that does not pack runs them as a population")  # fmt: skip
                parts.append(self.run([lake.rules for lake in group], group[0].seed, eval_seeds[a], inner_iters))
            return GenerationResult(tuple(o for p in parts for o in p.outcomes), tuple(r for p in parts for r in p.shards))
        calls = [
            [actor.lakes.remote(list(lakes[first : first + size]), [list(s) for s in eval_seeds[first : first + size]],
                                first, inner_iters)]
            for actor, (first, size) in zip(self.actors, blocks(len(lakes), self.shards))
        ]  # fmt: skip
        return self._gather(calls)

    def _gather(self, calls: list[list]) -> GenerationResult:
        """Every shard's calls waited for (stopping them all when the trial is asked to stop), a shard whose learner
        stop was unconfirmed replaced, the reports merged in candidate order."""
        import ray

        futures = [future for per_shard in calls for future in per_shard]
        pending = futures
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=STOP_POLL_S)
            if pending and self.stop_requested():
                # Our owner is being stopped: end the shards' calls ourselves, before Ray ends
                # this process under them (a shard whose caller vanished mid-call crashes loudly).
                self.close(timeout=0)
                raise InnerLoopStopped("the trial was stopped during a generation")
        reports = [ShardReport.in_turn(ray.get(per_shard)) for per_shard in calls]
        for i, report in enumerate(reports):
            if not report.stop_confirmed:
                self._replace(i)
        result = GenerationResult.merge(reports)
        self.cpu_s += result.cpu_s
        return result

    def _replace(self, i: int) -> None:
        import ray

        if not ShardedInnerLoop._warned:
            logger.warning(
                "could not confirm that RLlib's learner thread stopped on Ray %s; replacing the inner-loop actor "
                "whenever that happens, so no thread accumulates",
                ray.__version__,
            )
            ShardedInnerLoop._warned = True
        self.restart(i)

    def restart(self, i: int) -> None:
        """Shard i ended and a fresh one in its place (a leaked learner, or an actor that died)."""
        import ray

        ray.kill(self.actors[i])
        self.actors[i] = self._start()

    def close(self, timeout: float = SHARD_STOP_TIMEOUT_S) -> None:
        """Stop every shard's loop (waiting up to `timeout`), then end the actors."""
        import ray

        stops = [actor.stop.remote() for actor in self.actors] if timeout > 0 else []
        try:
            ray.get(stops, timeout=timeout)
        except Exception:  # noqa: BLE001 - an actor may already be dead; all are killed below either way
            pass
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []

    def __enter__(self) -> "ShardedInnerLoop":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # Ending with an error or a stop (Tune is tearing this trial down): kill, send no last call —
        # a call that reaches a shard after its caller is gone crashes that shard, loudly.
        stopping = exc_type is not None or self.stop_requested()
        self.close(timeout=0 if stopping else SHARD_STOP_TIMEOUT_S)
