"""Packed trials: a stage's trials of one small population submit their lakes to one `LakePool`, which trains every
member's waiting lakes as one block (docs/inner-loop.md, "Packed trials").

Each member stays a Tune trial of its own — its optimiser state, checkpoint, records, trials.csv row, W&B run and
TensorBoard curve, resume and Ctrl-C are a trial's as ever —; only its inner loop is the pool's, reached through
`PooledInnerLoop`, which a trial uses as it would its own `ShardedInnerLoop`. With lake streams a lake's numbers
are its own (seed, index)'s, whichever lakes share its block, so a member's search does not depend on its
block-mates (to torch's batched kernels' last bits, measured in docs/inner-loop.md).

The pool runs a block when every member it waits for has a request in: its members of this session not yet seen
(for at most `JOIN_WAIT_S` after its oldest request: one Tune could not start yet joins the next block), and the
members seen and not gone (for at most `STRAGGLER_S`: one that died without leaving is dropped, and rejoins by its
next request). Members leave when their trial ends, however it ends. In a block, requests go in member order, so
its make-up does not depend on which request came first.

The pool holds no CPU of its own and neither does its shard: the members' bundles hold it, 1/m of one CPU each
(`pack_share`). A block's CPU seconds are split among its requests by their lakes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from bilevel_tune.inner.contract import InnerLoopConfig, InnerLoopStopped
from bilevel_tune.inner.shards import STOP_POLL_S, GenerationResult, ShardedInnerLoop, ShardReport
from bilevel_tune.worlds.lakes import Lake

JOIN_WAIT_S = 120.0  # how long a block waits for a member of this session that has not asked yet
STRAGGLER_S = 600.0  # … and for one seen before: far above a member's own seconds between blocks (its optimiser)
# a block's most lakes: more waiting lakes run as several blocks, one after another; past about 40 a lake costs more
# (benchmarks/packing.py --blocks), and a pool's final re-evaluations (32 lakes a request) run as its generations do
MAX_BLOCK_LAKES = 48
LEAVE_TIMEOUT_S = 5.0


def pack_share(members: int) -> float:
    """Each member's share of the pool's one CPU, as its trial's bundle holds it (Ray counts CPUs in 1e-4)."""
    return int(1e4 / members) / 1e4


@dataclass
class _Request:
    member: str
    lakes: list[Lake]
    eval_seeds: list[list[int]]
    inner_iters: int
    since: float
    report: ShardReport | None = None
    error: BaseException | None = None
    done: bool = False

    @property
    def kind(self) -> tuple:
        """What lakes of one block share: K, and the seasons each plays (a generation's evaluation seeds, or a
        final lake's one)."""
        return self.inner_iters, tuple(sorted({len(s) for s in self.eval_seeds}))


@dataclass
class _Waiting:
    """Whom the next block waits for: members of this session not seen yet, and members seen and not gone."""

    expected: set[str]
    active: set[str] = field(default_factory=set)


class LakePool:
    """The body of a pool actor (threaded: each member's `submit` waits in a thread of its own)."""

    def __init__(
        self,
        spec: str,
        config: InnerLoopConfig,
        members: Sequence[str],
        join_wait_s: float = JOIN_WAIT_S,
        straggler_s: float = STRAGGLER_S,
    ):
        self.inner = ShardedInnerLoop(spec, config, shards=1, num_cpus=0)
        self.waiting = _Waiting(expected=set(members))
        self.pending: dict[str, _Request] = {}
        self.join_wait_s, self.straggler_s = join_wait_s, straggler_s
        self.cond = threading.Condition()
        self.running = False
        self.blocks: list[int] = []  # each block's lakes, in order: what `benchmarks/packing.py` and the tests read

    def submit(self, member: str, lakes: Sequence[Lake], eval_seeds: Sequence[Sequence[int]], inner_iters: int) -> ShardReport:
        """This member's lakes trained and evaluated in the next block: its own report (its outcomes; the block's
        seconds and census; its share of the block's CPU seconds, by lakes)."""
        request = _Request(member, list(lakes), [list(s) for s in eval_seeds], int(inner_iters), time.monotonic())
        with self.cond:
            self.waiting.expected.discard(member)
            self.waiting.active.add(member)
            self.pending[member] = request
            self.cond.notify_all()
        while not request.done:  # this thread runs a block when it finds one ready: its own request's, or another K's
            with self.cond:
                batch = None
                while not request.done and batch is None:
                    batch = self._ready()
                    if batch is None:
                        self.cond.wait(timeout=STOP_POLL_S)
            if batch is not None:
                self._run(batch)
        if request.error is not None:
            raise request.error
        return request.report

    def leave(self, member: str) -> None:
        """A member's trial ended: the pool waits for it no more; its request, if one waits, is withdrawn."""
        with self.cond:
            self.waiting.expected.discard(member)
            self.waiting.active.discard(member)
            request = self.pending.pop(member, None)
            if request is not None:
                request.error, request.done = InnerLoopStopped(f"{member} left the pool"), True
            self.cond.notify_all()

    def block_sizes(self) -> list[int]:
        return list(self.blocks)

    def close(self) -> None:
        self.inner.close()

    # -- inside the lock ---------------------------------------------------------------------------
    def _ready(self) -> list[_Request] | None:
        """The requests of the next block, taken from `pending`, when it may run; None while it waits."""
        if self.running or not self.pending:
            return None
        oldest = min(r.since for r in self.pending.values())
        age = time.monotonic() - oldest
        if age > self.join_wait_s:
            self.waiting.expected.clear()
        if age > self.straggler_s:
            self.waiting.active &= set(self.pending)
        if (self.waiting.expected | self.waiting.active) - set(self.pending):
            return None
        kind = min(self.pending.values(), key=lambda r: r.since).kind  # a block's lakes: one K, as many seasons
        batch = [self.pending.pop(m) for m in sorted(self.pending) if self.pending[m].kind == kind]
        self.running = True
        return batch

    # -- outside it ---------------------------------------------------------------------------------
    def _run(self, batch: list[_Request]) -> None:
        try:
            for part in _parts(batch, MAX_BLOCK_LAKES):
                self._train(part)
        except BaseException as err:  # noqa: BLE001 - every member of the block hears of it, one line each
            for request in batch:
                if not request.done:
                    request.error = err
            if _actor_died(err):  # the members retry (Tune's max_failures): on a live shard
                self.inner.restart(0)
        with self.cond:
            for request in batch:
                request.done = True
            self.running = False
            self.cond.notify_all()

    def _train(self, part: list[_Request]) -> None:
        lakes = [lake for r in part for lake in r.lakes]
        result = self.inner.run_lakes(lakes, [s for r in part for s in r.eval_seeds], part[0].inner_iters)
        self.blocks.append(len(lakes))
        whole = ShardReport.in_turn(result.shards)
        first = 0
        for request in part:
            n = len(request.lakes)
            outcomes = result.outcomes[first : first + n]
            request.report = replace(whole, first=0, outcomes=outcomes, cpu_s=whole.cpu_s * n / len(lakes),
                                     stop_confirmed=True)  # fmt: skip - the pool replaced its own shard if need be
            request.done = True
            first += n


def _actor_died(err: BaseException) -> bool:
    from ray.exceptions import RayActorError

    return isinstance(err, RayActorError)


def _parts(batch: list[_Request], most: int) -> list[list[_Request]]:
    """Requests in order, in consecutive parts of at most `most` lakes (a larger request alone)."""
    parts: list[list[_Request]] = []
    for request in batch:
        if parts and sum(len(r.lakes) for r in parts[-1]) + len(request.lakes) <= most:
            parts[-1].append(request)
        else:
            parts.append([request])
    return parts


class PooledInnerLoop:
    """A packed trial's inner loop: its lakes go to its pool (`LakePool`, a named actor), which trains them with its
    block-mates'; the same calls as a trial's `ShardedInnerLoop`."""

    def __init__(self, pool_name: str, member: str, stop_requested: Callable[[], bool] = lambda: False,
                 inner_iters: int = 1):  # fmt: skip
        import ray

        self.pool = ray.get_actor(pool_name)
        self.member, self.stop_requested, self.inner_iters = member, stop_requested, inner_iters
        self.cpu_s = 0.0

    @property
    def shards(self) -> int:
        return 1

    def run(self, rules, seed: int, eval_seeds: Sequence[int], inner_iters: int | None = None) -> GenerationResult:
        """A generation: candidate k is lake (its rules, the generation's seed, k), every one on `eval_seeds`."""
        lakes = [Lake(dict(r), int(seed), k) for k, r in enumerate(rules)]
        return self.run_lakes(lakes, [list(eval_seeds)] * len(lakes), inner_iters)

    def run_lakes(self, lakes: Sequence[Lake], eval_seeds: Sequence[Sequence[int]], inner_iters: int | None = None) -> GenerationResult:
        import ray

        iters = self.inner_iters if inner_iters is None else inner_iters
        future = self.pool.submit.remote(self.member, list(lakes), [list(s) for s in eval_seeds], iters)
        while not ray.wait([future], timeout=STOP_POLL_S)[0]:
            if self.stop_requested():
                self.close()
                raise InnerLoopStopped("the trial was stopped during a generation")
        report = ray.get(future)
        self.cpu_s += report.cpu_s
        return GenerationResult.merge([report])

    def close(self) -> None:
        import ray

        try:
            ray.get(self.pool.leave.remote(self.member), timeout=LEAVE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a pool already gone waits for no one
            pass

    def __enter__(self) -> "PooledInnerLoop":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()


def start_pool(name: str, spec: str, config: InnerLoopConfig, members: Sequence[str], **waits):
    """A pool actor for these members (their trials' names), named so they find it; it dies with its caller."""
    import ray

    return ray.remote(LakePool).options(name=name, num_cpus=0, max_concurrency=len(members) + 4,
                                        max_restarts=0).remote(spec, config, list(members), **waits)  # fmt: skip
