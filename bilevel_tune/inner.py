"""The inner-loop seam: the contract every inner loop meets, its config, its results, and the trial's handle.

An *inner loop* trains the farms' policies under a block of candidate rule
sets and evaluates them (docs/inner-loop.md). Built-in loops are named in
`BUILTIN_LOOPS` and loaded exactly as a user's `package.module:Class` is:

    appo             bilevel_tune.appo:PopulationPolicyLoop               real RLlib APPO, one module per block
    appo-multiagent  bilevel_tune.appo.multiagent:MultiAgentPolicyLoop    real RLlib APPO, RLlib's per-agent path
    analytic         bilevel_tune.analytic:AnalyticLoop                   a deterministic stand-in

A trial splits its population into S contiguous blocks, one *shard* per
block: a Ray actor holding one CPU of the trial's placement group and one
loop instance. Each generation is one remote call per shard — reset, K ×
train, evaluate — on all shards at once; `GenerationResult` merges their
outcomes in candidate order and keeps each shard's node, timings and census.

A loop can be sharded because candidates are independent given the rules:
each has its own lake, its own policy and its own learner update. So a loop
must (1) treat candidates independently — nothing of candidate k may depend
on which other candidates share its block —, (2) draw everything per
candidate from (generation seed, global candidate index), e.g. initial
weights from `candidate_seed(seed, k)`, and (3) evaluate on the given seeds
only. Then, with no training, every candidate's outcome is the same for any
S; with training it is statistically the same (each process explores with
its own random stream).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from bilevel_tune import metrics as M
from bilevel_tune.census import Census, take_census
from bilevel_tune.declared import check_knobs, section_kwargs
from bilevel_tune.objective import CandidateOutcome, ObjectiveWeights
from bilevel_tune.sections import AppoSettings, NetworkSettings, ObjectiveSettings
from bilevel_tune.world import WorldConfig

logger = logging.getLogger(__name__)

BUILTIN_LOOPS = {
    "appo": "bilevel_tune.appo:PopulationPolicyLoop",
    "appo-multiagent": "bilevel_tune.appo.multiagent:MultiAgentPolicyLoop",
    "analytic": "bilevel_tune.analytic:AnalyticLoop",
}
LOOP_METHODS = ("reset", "train", "evaluate", "stop")
RESET_PARAMETERS = ("rules", "seed", "candidates")
STOP_MODES = ("leak-free", "none")
SHARD_STOP_TIMEOUT_S = 30.0
STOP_POLL_S = 0.05


class InnerLoopError(ValueError):
    """A loop spec that cannot be loaded or does not meet the contract; one line for the user."""


class InnerLoopStopped(Exception):
    """The trial running this inner loop was asked to stop mid-generation."""


@dataclass(frozen=True)
class InnerLoopConfig(ObjectiveSettings, AppoSettings, NetworkSettings, WorldConfig):
    """What every shard of a trial shares: the study's [world], [network], [appo] and [objective] settings.

    Its fields are those sections' (`WorldConfig` first, then `sections`): their defaults, the
    weekend campaign's (docs/weekend.md), and their ranges are declared there, once.
    """

    # "none" skips the stop and keeps old algorithms referenced, as Ray < 2.56 effectively
    # did: the leaking "before" of benchmarks/leak.py and the test that proves the census can fail.
    stop_mode: str = "leak-free"

    def __post_init__(self):
        check_knobs(self)
        _ = self.weights  # not both weights 0
        if self.stop_mode not in STOP_MODES:
            raise ValueError(f"stop_mode={self.stop_mode!r} is unknown; allowed: {', '.join(STOP_MODES)}")

    @classmethod
    def from_study(cls, study) -> "InnerLoopConfig":
        """The config of a `definition.Study`'s trials: its [world], [network], [appo] and [objective] settings."""
        sections = {
            "world": WorldConfig,
            "network": NetworkSettings,
            "appo": AppoSettings,
            "objective": ObjectiveSettings,
        }
        return cls(**{k: v for name, c in sections.items() for k, v in section_kwargs(study.settings, name, c).items()})

    @property
    def world(self) -> WorldConfig:
        return WorldConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(WorldConfig)})

    @property
    def weights(self) -> ObjectiveWeights:
        return ObjectiveWeights(self.econ_weight, self.sus_weight)


class InnerLoop(Protocol):
    """What a trial asks of an inner loop; one instance lives in one shard actor."""

    def __init__(self, config: InnerLoopConfig) -> None: ...

    def reset(self, rules: Sequence[Mapping[str, float]], seed: int, candidates: Sequence[int]) -> bool:
        """Fresh policies for these candidates (physical rules; `candidates` their global indices).

        False when the previous policies' resources could not be confirmed
        released (the APPO learner thread): the shard is then replaced.
        """
        ...

    def train(self) -> Any:
        """One training iteration (APPO: one `algo.train()`); the return value is ignored."""
        ...

    def evaluate(self, seeds: Sequence[int]) -> Sequence[CandidateOutcome]:
        """Explore-off evaluation on these seeds: one outcome per candidate, in order."""
        ...

    def stop(self) -> bool:
        """Release everything; True when confirmed."""
        ...


def candidate_seed(generation_seed: int, candidate: int) -> int:
    """The seed of everything candidate `candidate` draws this generation, whichever shard runs it."""
    return int(np.random.SeedSequence([int(generation_seed), int(candidate)]).generate_state(1)[0])


# -- loading a loop ----------------------------------------------------------------
def loop_path(spec: str) -> str:
    """'appo' → 'bilevel_tune.appo:PopulationPolicyLoop'; a 'package.module:Class' spec is its own path."""
    return BUILTIN_LOOPS.get(spec, spec)


def check_loop_spec(spec: str) -> str:
    """The spec if it names a built-in loop or a loadable class that meets the contract."""
    if spec in BUILTIN_LOOPS:
        return spec  # imported in its shard only: the APPO loops pull in torch and RLlib
    load_loop_class(spec)
    return spec


def load_loop_class(spec: str) -> type:
    """Import a loop class by spec and check the contract; InnerLoopError names what is wrong."""
    path = loop_path(spec)
    if not isinstance(path, str) or path.count(":") != 1:
        raise InnerLoopError(f"{spec!r} is unknown; allowed: {', '.join(BUILTIN_LOOPS)}, or package.module:Class")
    module_name, _, class_name = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as err:
        raise InnerLoopError(f"{spec!r} cannot be imported ({err})") from None
    missing = [m for m in LOOP_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise InnerLoopError(f"{spec!r} lacks the inner-loop method(s) {', '.join(missing)}")
    parameters = list(inspect.signature(cls.reset).parameters)[1:]
    if len(parameters) < len(RESET_PARAMETERS):
        raise InnerLoopError(
            f"{spec!r}: reset{tuple(parameters)} must take {', '.join(RESET_PARAMETERS)} "
            "(the candidates' global indices; see docs/inner-loop.md)"
        )
    return cls


# -- one shard, and what it returns ---------------------------------------------------
@dataclass(frozen=True)
class ShardReport:
    """One shard's generation: its block's outcomes, where and how long it ran, its census."""

    first: int  # the global index of the shard's first candidate
    outcomes: tuple[CandidateOutcome, ...]
    census: Census
    node: str
    sec_reset: float
    sec_train: float
    sec_evaluate: float
    stop_confirmed: bool

    def detail(self) -> dict[str, Any]:
        """The shard's entry in a generation record."""
        return {
            M.SHARD_FIRST: self.first,
            M.SHARD_SIZE: len(self.outcomes),
            M.NODE: self.node,
            M.SEC_RESET: self.sec_reset,
            M.SEC_TRAIN: self.sec_train,
            M.SEC_EVALUATE: self.sec_evaluate,
            **self.census.as_metrics(),
        }


class Shard:
    """The body of one shard actor: a loop instance, driven one generation per call."""

    def __init__(self, spec: str, config: InnerLoopConfig):
        self.loop = load_loop_class(spec)(config)

    def generation(
        self, rules: Sequence[Mapping[str, float]], seed: int, first: int, eval_seeds: Sequence[int], inner_iters: int
    ) -> ShardReport:
        t0 = time.perf_counter()
        confirmed = self.loop.reset(rules, seed, range(first, first + len(rules)))
        t1 = time.perf_counter()
        for _ in range(inner_iters):
            self.loop.train()
        t2 = time.perf_counter()
        outcomes = tuple(
            o if isinstance(o, CandidateOutcome) else CandidateOutcome.from_dict(o)
            for o in self.loop.evaluate(eval_seeds)
        )
        t3 = time.perf_counter()
        if len(outcomes) != len(rules):
            raise InnerLoopError(f"evaluate() returned {len(outcomes)} outcomes for {len(rules)} candidates")
        thread_cls = getattr(self.loop, "learner_thread_class", lambda: None)()
        return ShardReport(
            first=first,
            outcomes=outcomes,
            census=take_census(thread_cls),
            node=_node_id(),
            sec_reset=t1 - t0,
            sec_train=t2 - t1,
            sec_evaluate=t3 - t2,
            stop_confirmed=bool(confirmed),
        )

    def pid(self) -> int:
        return os.getpid()

    def stop(self) -> bool:
        return self.loop.stop()


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""


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


@dataclass(frozen=True)
class GenerationResult:
    """A generation's outcomes in candidate order, with every shard's report."""

    outcomes: tuple[CandidateOutcome, ...]
    shards: tuple[ShardReport, ...]

    @property
    def objectives(self) -> np.ndarray:
        return np.array([o.objective for o in self.outcomes], dtype=float)

    @property
    def census(self) -> Census:
        return Census.total([s.census for s in self.shards])

    @property
    def timing(self) -> dict[str, float]:
        """Each phase as long as its slowest shard took: the trial waits for all of them."""
        return {
            M.SEC_RESET: max(s.sec_reset for s in self.shards),
            M.SEC_TRAIN: max(s.sec_train for s in self.shards),
            M.SEC_EVALUATE: max(s.sec_evaluate for s in self.shards),
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
        self, spec: str, config: InnerLoopConfig, shards: int = 1, stop_requested: Callable[[], bool] = lambda: False
    ):
        if shards < 1:
            raise ValueError(f"shards={shards} must be ≥ 1")
        self.spec, self.config, self.stop_requested = spec, config, stop_requested
        self.actors = [self._start() for _ in range(shards)]

    def _start(self):
        import ray

        return ray.remote(Shard).options(num_cpus=1, max_restarts=0).remote(self.spec, self.config)

    @property
    def shards(self) -> int:
        return len(self.actors)

    def run(
        self, rules: Sequence[Mapping[str, float]], seed: int, eval_seeds: Sequence[int], inner_iters: int
    ) -> GenerationResult:
        """reset → K × train → evaluate on every shard at once, one remote call each."""
        import ray

        work = blocks(len(rules), self.shards)
        futures = [
            actor.generation.remote(list(rules[first : first + size]), seed, first, list(eval_seeds), inner_iters)
            for actor, (first, size) in zip(self.actors, work)
        ]
        pending = futures
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=STOP_POLL_S)
            if pending and self.stop_requested():
                # Our owner is being stopped: end the shards' calls ourselves, before Ray ends
                # this process under them (a shard whose caller vanished mid-call crashes loudly).
                self.close(timeout=0)
                raise InnerLoopStopped("the trial was stopped during a generation")
        reports = ray.get(futures)
        for i, report in enumerate(reports):
            if not report.stop_confirmed:
                self._replace(i)
        return GenerationResult.merge(reports)

    def _replace(self, i: int) -> None:
        import ray

        if not ShardedInnerLoop._warned:
            logger.warning(
                "could not confirm that RLlib's learner thread stopped on Ray %s; replacing the inner-loop actor "
                "whenever that happens, so no thread accumulates",
                ray.__version__,
            )
            ShardedInnerLoop._warned = True
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
