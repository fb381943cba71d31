"""The inner-loop contract: what every inner loop meets, its config, its errors, and how a loop is loaded by name.

An *inner loop* trains the farms' policies under a block of candidate rule
sets and evaluates them (docs/inner-loop.md). Built-in loops are named in
`BUILTIN_LOOPS` and loaded exactly as a user's `package.module:Class` is:

    appo             bilevel_tune.appo:PopulationPolicyLoop               real RLlib APPO, one module per block
    appo-multiagent  bilevel_tune.appo.multiagent:MultiAgentPolicyLoop    real RLlib APPO, RLlib's per-agent path
    analytic         bilevel_tune.inner.analytic:AnalyticLoop             a deterministic stand-in
    ppo              bilevel_tune.appo.ppo:PPOPolicyLoop                  real RLlib PPO, one module per block
    frozen           bilevel_tune.appo.frozen:FrozenLoop                  APPO trained under a block's last rules,
                                                                          scored under each candidate's (a held-out
                                                                          learner: docs/verdicts.md)

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

A loop may also train a block of *lakes* of several seeds as one
(`reset_lakes(lakes)`, `evaluate_lakes(seeds per lake)`; `worlds.lakes`): a
trial's final seeds, a held-out job. With lake streams (`InnerLoopConfig.streams`)
the population loops (APPO, PPO, frozen) do, each lake drawing from its own
(seed, index); any other loop runs such a block seed by seed (`Shard.lakes`).
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from bilevel_tune.base import seeds
from bilevel_tune.base.knobs import check_knobs
from bilevel_tune.base.plugins import import_class
from bilevel_tune.base.sections import AppoSettings, NetworkSettings
from bilevel_tune.worlds import DEFAULT_WORLD
from bilevel_tune.worlds.contract import Assessment

BUILTIN_LOOPS = {
    "appo": "bilevel_tune.appo:PopulationPolicyLoop",
    "appo-multiagent": "bilevel_tune.appo.multiagent:MultiAgentPolicyLoop",
    "analytic": "bilevel_tune.inner.analytic:AnalyticLoop",
    "ppo": "bilevel_tune.appo.ppo:PPOPolicyLoop",
    "frozen": "bilevel_tune.appo.frozen:FrozenLoop",
}
LOOP_METHODS = ("reset", "train", "evaluate", "stop")
RESET_PARAMETERS = ("rules", "seed", "candidates")
STOP_MODES = ("leak-free", "none")
LAKE_STREAMS = "lake"
STREAMS = (LAKE_STREAMS, "block")  # where a block's random draws come from: each lake's own, or one the block's


class Seeds:
    """Seeds flow from the trial's seed: ES noise, each generation's RLlib/env seed, evaluation seeds."""

    def __init__(self, seed: int, eval_episodes: int, final_eval_seeds: int):
        self.seed = seed
        self.evaluation = seeds.evaluation_seeds(seed, eval_episodes)
        self.final = seeds.final_seeds(seed, final_eval_seeds)

    @classmethod
    def given(cls, seed: int, evaluation: Sequence[int], final: Sequence[int]) -> "Seeds":
        """A trial's seeds as its plan lists them (`study_data.trial_plan`): the run seed and its derived lists."""
        given = cls.__new__(cls)
        given.seed, given.evaluation, given.final = int(seed), [int(s) for s in evaluation], [int(s) for s in final]
        return given

    def generation(self, g: int) -> int:
        return seeds.generation_seed(self.seed, g)


class InnerLoopError(ValueError):
    """A loop spec that cannot be loaded or does not meet the contract; one line for the user."""


class InnerLoopStopped(Exception):
    """The trial running this inner loop was asked to stop mid-generation."""


@dataclass(frozen=True)
class InnerLoopConfig(AppoSettings, NetworkSettings):
    """What every shard of a trial shares: the study's [network] and [appo] settings (these fields, declared once in
    `base.sections`) and its world — which one, and its own [world] and [objective] sections, carried whole, the
    same way for every world (the world's defaults where a config gives none)."""

    # "none" skips the stop and keeps old algorithms referenced, as Ray < 2.56 effectively
    # did: the leaking "before" of benchmarks/leak.py and the test that proves the census can fail.
    stop_mode: str = "leak-free"
    world_kind: str = DEFAULT_WORLD  # a built-in world's name or "module:Class" (docs/worlds.md)
    world_settings: Any = None  # its [world] section (its settings_class); None: the defaults
    objective_settings: Any = None  # its [objective] section (its objective_class); None: the defaults
    # "lake": each lake draws from its own (seed, index), whichever lakes share its block (`worlds.lakes`);
    # "block": one stream for the block's exploration, as every run begun before lakes drew (and resumes so)
    streams: str = "block"

    def __post_init__(self):
        check_knobs(self)
        if self.stop_mode not in STOP_MODES:
            raise ValueError(f"stop_mode={self.stop_mode!r} is unknown; allowed: {', '.join(STOP_MODES)}")
        if self.streams not in STREAMS:
            raise ValueError(f"streams={self.streams!r} is unknown; allowed: {', '.join(STREAMS)}")
        world = self.world_class
        if self.world_settings is None:
            object.__setattr__(self, "world_settings", world.settings_class())
        if self.objective_settings is None:
            object.__setattr__(self, "objective_settings", world.objective_class())

    @classmethod
    def from_study(cls, study) -> "InnerLoopConfig":
        """The config of a `definition.Study`'s trials: its [network] and [appo] sections, its world's two."""
        flat = {k: v for section in (study.network, study.appo) for k, v in dataclasses.asdict(section).items()}
        return cls(**flat, world_kind=study.world_kind, world_settings=study.world, objective_settings=study.objective,
                   streams=study.streams)  # fmt: skip

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "InnerLoopConfig":
        """The config back from `dataclasses.asdict` through JSON (the CPU plan's probe takes it so)."""
        fields = {**record, "hidden": tuple(record["hidden"])}
        world = _world(fields.get("world_kind", DEFAULT_WORLD))
        fields["world_settings"] = world.settings_class(**_frozen(fields.get("world_settings") or {}))
        fields["objective_settings"] = world.objective_class(**(fields.get("objective_settings") or {}))
        return cls(**fields)

    @property
    def world_class(self) -> type:
        return _world(self.world_kind)

    def probe_rules(self, n: int) -> list[dict[str, float]]:
        """n rule sets spread over the world's first searched rule (u = (k + ½)/n), the others at their defaults."""
        from bilevel_tune.worlds.contract import searched_rules

        world = self.world_class
        first = world.searched_by_default[0]
        return [searched_rules(world.rule_specs, [first], [(k + 0.5) / n], {}) for k in range(n)]

    @property
    def season_length(self) -> int:
        """Steps in one season of the config's world."""
        return int(self.build_world([{}]).horizon)

    def build_world(self, rules: Sequence[Mapping[str, float]]):
        """The world's copies under these rules (physical), as the contract builds them: `World(settings, rules)`."""
        return self.world_class(self.world_settings, rules)


def _world(kind: str) -> type:
    from bilevel_tune.worlds import load_world  # a user's world is imported only where a config names it

    return load_world(kind)


def _frozen(values: Mapping[str, Any]) -> dict[str, Any]:
    """JSON's lists back as the tuples a settings class holds."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


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

    def evaluate(self, seeds: Sequence[int]) -> Sequence[Assessment]:
        """Explore-off evaluation on these seeds: one `Assessment` per candidate, in order (its world's)."""
        ...

    def stop(self) -> bool:
        """Release everything; True when confirmed."""
        ...


def candidate_seed(generation_seed: int, candidate: int) -> int:
    """The seed of everything candidate `candidate` draws this generation, whichever shard runs it."""
    return seeds.candidate_seed(generation_seed, candidate)


# -- loading a loop ----------------------------------------------------------------
def loop_path(spec: str) -> str:
    """'appo' → 'bilevel_tune.appo:PopulationPolicyLoop'; a 'package.module:Class' spec is its own path."""
    return BUILTIN_LOOPS.get(spec, spec)


def check_loop_on_world(spec: str, world_kind: str) -> None:
    """InnerLoopError naming the world when this loop cannot run it: the analytic loop needs the world's myopic
    best response (the APPO loops run any world on the contract)."""
    if spec != "analytic":
        return
    if not callable(getattr(_world(world_kind), "myopic_actions", None)):
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
