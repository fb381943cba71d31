"""The inner-loop contract: what every inner loop meets, its config, its errors, and how a loop is loaded by name.

An *inner loop* trains the farms' policies under a block of candidate rule
sets and evaluates them (docs/inner-loop.md). Built-in loops are named in
`BUILTIN_LOOPS` and loaded exactly as a user's `package.module:Class` is:

    appo             bilevel_tune.appo:PopulationPolicyLoop               real RLlib APPO, one module per block
    appo-multiagent  bilevel_tune.appo.multiagent:MultiAgentPolicyLoop    real RLlib APPO, RLlib's per-agent path
    analytic         bilevel_tune.inner.analytic:AnalyticLoop             a deterministic stand-in

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
import inspect
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from bilevel_tune.core.objective import CandidateOutcome, ObjectiveWeights
from bilevel_tune.core.plugins import import_class
from bilevel_tune.study_data.declared import check_knobs
from bilevel_tune.study_data.sections import AppoSettings, NetworkSettings, ObjectiveSettings
from bilevel_tune.world import WorldConfig

FRESH_WATER_KIND = "fresh-water"  # the world a config names unless it names another
BUILTIN_LOOPS = {
    "appo": "bilevel_tune.appo:PopulationPolicyLoop",
    "appo-multiagent": "bilevel_tune.appo.multiagent:MultiAgentPolicyLoop",
    "analytic": "bilevel_tune.inner.analytic:AnalyticLoop",
}
LOOP_METHODS = ("reset", "train", "evaluate", "stop")
RESET_PARAMETERS = ("rules", "seed", "candidates")
STOP_MODES = ("leak-free", "none")


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
    # The world the loop runs on (docs/worlds.md): fresh water's [world] and [objective] are this config's own
    # fields above; another world's sections are carried whole.
    world_kind: str = FRESH_WATER_KIND
    world_settings: Any = None
    objective_settings: Any = None

    def __post_init__(self):
        check_knobs(self)
        _ = self.weights  # not both weights 0
        if self.stop_mode not in STOP_MODES:
            raise ValueError(f"stop_mode={self.stop_mode!r} is unknown; allowed: {', '.join(STOP_MODES)}")

    @classmethod
    def from_study(cls, study) -> "InnerLoopConfig":
        """The config of a `definition.Study`'s trials: its [world], [network], [appo] and [objective] sections."""
        if study.world_kind != FRESH_WATER_KIND:
            flat = {k: v for section in (study.network, study.appo) for k, v in dataclasses.asdict(section).items()}
            return cls(
                **flat, world_kind=study.world_kind, world_settings=study.world, objective_settings=study.objective
            )
        sections = (study.world, study.network, study.appo, study.objective)
        return cls(**{k: v for section in sections for k, v in dataclasses.asdict(section).items()})

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "InnerLoopConfig":
        """The config back from `dataclasses.asdict` through JSON (the CPU plan's probe takes it so)."""
        fields = {**record, "hidden": tuple(record["hidden"])}
        if fields.get("world_kind", FRESH_WATER_KIND) != FRESH_WATER_KIND:
            from bilevel_tune.worlds import load_world

            world = load_world(fields["world_kind"])
            fields["world_settings"] = world.settings_class(**fields["world_settings"])
            fields["objective_settings"] = world.objective_class(**fields["objective_settings"])
        return cls(**fields)

    def probe_rules(self, n: int) -> list[dict[str, float]]:
        """n rule sets spread over the world's first searched rule (u = (k + ½)/n), the others at their defaults."""
        from bilevel_tune.worlds import load_world
        from bilevel_tune.worlds.contract import searched_rules

        world = load_world(self.world_kind)
        first = world.searched_by_default[0]
        return [searched_rules(world.rule_specs, [first], [(k + 0.5) / n], {}) for k in range(n)]

    @property
    def season_length(self) -> int:
        """Steps in one season of the config's world (fresh water's `horizon` days)."""
        return self.horizon if self.fresh_water else int(self.build_world([{}]).horizon)

    @property
    def fresh_water(self) -> bool:
        return self.world_kind == FRESH_WATER_KIND

    @property
    def world(self) -> WorldConfig:
        return WorldConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(WorldConfig)})

    def build_world(self, rules: Sequence[Mapping[str, float]]):
        """The world's copies under these rules (physical), as the contract builds them: `World(settings, rules)`."""
        from bilevel_tune.worlds import load_world

        if self.fresh_water:
            return load_world(FRESH_WATER_KIND)(self.world, rules)
        return load_world(self.world_kind)(self.world_settings, rules)

    @property
    def objective_section(self):
        """The world's [objective], as its `assess` takes it."""
        return ObjectiveSettings(econ_weight=self.econ_weight, sus_weight=self.sus_weight) if self.fresh_water else (
            self.objective_settings
        )  # fmt: skip

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


def check_loop_on_world(spec: str, world_kind: str) -> None:
    """InnerLoopError naming the world when this loop cannot run it: the analytic loop needs the world's myopic
    best response (the APPO loops run any world on the contract)."""
    if world_kind == FRESH_WATER_KIND or spec != "analytic":
        return
    from bilevel_tune.worlds import load_world

    if not callable(getattr(load_world(world_kind), "myopic_actions", None)):
        raise InnerLoopError(f"world {world_kind!r} offers no myopic_actions: --inner analytic cannot run it")


def check_loop_spec(spec: str) -> str:
    """The spec if it names a built-in loop or a loadable class that meets the contract."""
    if spec in BUILTIN_LOOPS:
        return spec  # imported in its shard only: the APPO loops pull in torch and RLlib
    load_loop_class(spec)
    return spec


def load_loop_class(spec: str) -> type:
    """Import a loop class by spec and check the contract; InnerLoopError names what is wrong."""
    cls = import_class(spec, BUILTIN_LOOPS, InnerLoopError, form="package.module:Class")
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
