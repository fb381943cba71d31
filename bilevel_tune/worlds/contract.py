"""The world contract: what a world declares and does, so that the ES, the inner loops and the report can run on it.

A world is a class whose instance holds N independent *copies* of the world,
each under its own rule set, stepped together in one call (state as arrays
with a leading N axis). All copies of an instance share one random stream
(common random numbers: candidates are compared on the same season), unless
it declares `copy_streams` and is reset with a generator per copy.

The class declares (docs/worlds.md):

    name                 "fishery": a built-in world's name, also the default study-file label
    settings_class       its [world] section: a frozen dataclass of `base.knobs.knob` fields
    objective_class      its [objective] section, the same way
    rule_specs           its rules (`RuleSpec`: physical range, default, the unit encoding the ES searches in)
    searched_by_default  the rules a study searches unless it says otherwise

An instance, built as `World(settings, rules)` (`rules`: one mapping of physical values per copy), has

    copies, agents                  N, and the agents of one copy
    observation_size                one observation's length
    shared_observation              True: every agent of a copy sees the copy's one observation, (N, obs);
                                    False: each its own, (N, agents, obs)
    action_size, action_low/high    one agent's action: a vector within [low, high]
    horizon                         steps per season
    reset(rng) -> observation       a new season; `rng` is its only source of randomness
    step(actions) -> Step           actions (N, agents, action_size); per-agent rewards and the step's diagnostics
    observe() -> observation        after a step: what the agents see next
    done, failed                    the season is over; (N,) copies whose numbers broke (their objective is NaN)
    assess(seasons, failed, objective)  per copy, an `Assessment` of its evaluated seasons (`failed`: (N,),
                                    the copies that failed in any of them)

and may declare what the summary's tables show of an outcome:

    summary_diagnostics  the fields of a trial's best candidate, in order (diag_<field>); without it, every
                         number its Assessment holds beside the objective and the bound
    scan_terms           the fields a rules scan shows per point beside its objective and bound; none without it

A world whose agents are of several kinds, or act or observe in spaces other
than one flat Box (a PettingZoo environment's, `worlds.pettingzoo`), declares
its agents' kinds instead of the one agent's sizes:

    kinds                           (`AgentKind`, …): each kind's name, its agents (indices in the agents'
                                    order), and its observation and action space, gymnasium spaces as the
                                    environment declares them; every agent of a kind acts under one policy
    reset(rng), observe()           one (N, agents of the kind, flat observation) float32 array per kind
                                    (`gymnasium.spaces.flatten`: a Discrete one-hot, a Dict or Tuple its parts)
    step(actions)                   one array per kind, (N, agents of the kind, *the action space's shape),
                                    in the space's dtype: a Discrete's index, a Box's values within its bounds
    alive                           (N, agents) bool: the agents still in the season; one that has left is
                                    asked no action (its row of actions is ignored) and earns nothing more

and may declare

    copy_streams         True: reset also takes one generator per copy (copies given one generator share its
                         draws, as a world's copies share its one), so a block of lakes of several seeds is one
                         instance (`worlds.lakes`); without it, an instance per seed

and may offer two hooks:

    reward_bound(season) -> (T, N)  the best reward any action could have earned, step by step (given what
                                    was logged): without it the ceiling verdict says no bound is known
    myopic_actions(observation)     each agent's best response to this step alone: without it `--inner
                                    analytic` is refused, naming the world

Plain numpy: no Ray, no RLlib, no study.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Protocol, Sequence

import numpy as np

METHODS_AND_DECLARATIONS = (
    "name", "settings_class", "objective_class", "rule_specs", "searched_by_default",
    "reset", "step", "observe", "assess",
)  # fmt: skip
Season = dict[str, np.ndarray]  # a season's steps stacked along a leading time axis: "reward" and each diagnostic


class WorldError(ValueError):
    """A world that breaks its contract, or cannot be found; the message is one line naming the promise broken."""


@dataclass(frozen=True)
class RuleSpec:
    """One rule: physical = low + span · u for the u in [0, 1] the ES searches.

    [low, low + span] is its search range by default (a study may set another, `with_range`); `limits` are the
    values the world can take at all (by default the search range: a world that names none accepts no more).
    """

    name: str
    low: float
    span: float
    default: float
    meaning: str
    short: str  # in a mechanism's name and label: 2d-floor-risk, "2-D floor+risk"
    limits: tuple[float, float] | None = None  # the physical limits; None: the default search range

    def to_physical(self, u: float) -> float:
        return self.low + self.span * float(u)

    def to_unit(self, physical: float) -> float:
        return (float(physical) - self.low) / self.span

    @property
    def high(self) -> float:
        return self.low + self.span

    @property
    def physical_limits(self) -> tuple[float, float]:
        return self.limits if self.limits is not None else (self.low, self.high)

    def with_range(self, low: float, high: float) -> "RuleSpec":
        """The rule searched over [low, high] instead (its limits, default and meaning kept)."""
        return dataclasses.replace(self, low=float(low), span=float(high) - float(low), limits=self.physical_limits)

    def check_physical(self, value: float) -> float:
        """The value if it lies within the rule's physical limits; ValueError naming rule, value and limits."""
        value = float(value)
        low, high = self.physical_limits
        if not low - 1e-12 <= value <= high + 1e-12:  # also rejects NaN
            raise ValueError(f"rule {self.name}={value:g} is outside its range [{low:g}, {high:g}]")
        return value


@dataclass(frozen=True)
class AgentKind:
    """Agents that act under one policy: the same observation and action spaces (gymnasium spaces)."""

    name: str
    agents: tuple[int, ...]  # their indices in a copy's agents (the world's order)
    observation_space: Any
    action_space: Any


def has_kinds(world) -> bool:
    """Does the world observe and act per kind of agent (`kinds`), not with one (N, agents, …) array?"""
    return getattr(world, "kinds", None) is not None


@dataclass(frozen=True)
class Step:
    """One step of every copy: per-agent rewards (N, agents) and the diagnostics the world's assessment reads."""

    rewards: np.ndarray
    diagnostics: Mapping[str, Any] = field(default_factory=dict)  # each (N, …) per copy, or one value shared


@dataclass(frozen=True)
class Assessment:
    """One copy's evaluated seasons: the objective, its named terms, what the world logged, and its bound."""

    objective: float  # NaN when the copy failed
    terms: Mapping[str, float]  # the objective's named terms: the summary's diagnostic columns
    diagnostics: Mapping[str, float]  # means of what the world logs (requested fraction, catch, …)
    upper_bound: float | None  # the objective's bound from the world's reward bound; None where none is known
    failed: bool
    bound_by_rule: Mapping[str, float] = field(default_factory=dict)  # per rule: the bound with it at its best

    def shown(self) -> dict[str, float]:
        """What the live view and the summary show beside the objective: its terms, then the diagnostics."""
        return {**self.terms, **self.diagnostics}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Assessment":
        """From a flat record (`as_dict`'s, or a loop's own dict): its other numbers are diagnostics; JSON's null
        reads back as NaN (the bound's as None: none known)."""
        skip = ("objective", "upper_bound", "failed", "bound_by_rule")
        value = lambda v: float("nan") if v is None else v  # noqa: E731
        return cls(
            objective=value(data["objective"]),
            terms={},
            diagnostics={k: value(v) for k, v in data.items() if k not in skip},
            upper_bound=data.get("upper_bound"),
            failed=bool(data.get("failed", False)),
            bound_by_rule=dict(data.get("bound_by_rule") or {}),
        )

    def as_dict(self) -> dict[str, Any]:
        """Flat, as a generation's record holds an outcome (no bound known: None, JSON's null)."""
        return {
            "objective": self.objective,
            **self.terms,
            "upper_bound": self.upper_bound,
            **self.diagnostics,
            "failed": self.failed,
            "bound_by_rule": dict(self.bound_by_rule),
        }


class World(Protocol):
    name: ClassVar[str]
    settings_class: ClassVar[type]
    objective_class: ClassVar[type]
    rule_specs: ClassVar[tuple[RuleSpec, ...]]
    searched_by_default: ClassVar[tuple[str, ...]]

    copies: int
    agents: int
    observation_size: int
    shared_observation: bool
    action_size: int
    action_low: np.ndarray
    action_high: np.ndarray
    horizon: int
    failed: np.ndarray

    def __init__(self, settings: Any, rules: Sequence[Mapping[str, float]]) -> None: ...

    def reset(self, rng: np.random.Generator) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> Step: ...

    def observe(self) -> np.ndarray: ...

    @property
    def done(self) -> bool: ...

    def assess(self, seasons: Sequence[Season], failed: np.ndarray, objective: Any) -> list[Assessment]: ...


def stack_steps(steps: Sequence[Step]) -> Season:
    """A season's steps as arrays with a leading time axis: "reward" (T, N, agents) and each diagnostic."""
    season = {"reward": np.stack([np.asarray(s.rewards) for s in steps])}
    for key in steps[0].diagnostics:
        season[key] = np.stack([np.asarray(s.diagnostics[key]) for s in steps])
    return season


def play_seasons(world: World, seeds: Sequence[int], act) -> tuple[list[Season], np.ndarray]:
    """One season per seed, every agent acting `act(observation)` (N, agents, action_size).

    The seasons, stacked, and (N,) the copies that failed in any of them.
    """
    seasons, failed = [], np.zeros(world.copies, dtype=bool)
    for seed in seeds:
        observation = world.reset(np.random.default_rng(int(seed)))
        steps = []
        while not world.done:
            steps.append(world.step(act(observation)))
            observation = world.observe()
        seasons.append(stack_steps(steps))
        failed |= world.failed
    return seasons, failed


def rule_values(specs: Sequence[RuleSpec], given: Mapping[str, float] | None = None) -> dict[str, float]:
    """Every rule's physical value: the given ones (checked: known, in range), the others at their defaults."""
    by_name = {s.name: s for s in specs}
    given = dict(given or {})
    unknown = [name for name in given if name not in by_name]
    if unknown:
        raise WorldError(f"rule {unknown[0]!r} is unknown; allowed: {', '.join(by_name)}")
    return {s.name: s.check_physical(given[s.name]) if s.name in given else s.default for s in specs}


def searched_rules(
    specs: Sequence[RuleSpec], params: Sequence[str], u: Sequence[float], fixed: Mapping[str, float]
) -> dict[str, float]:
    """One candidate's every rule, physical: `u[i]` in [0, 1] sets `params[i]`, the others are `fixed`."""
    by_name = {s.name: s for s in specs}
    u = np.asarray(u, dtype=float).reshape(-1)
    if u.shape[0] != len(params):
        raise WorldError(f"candidate has {u.shape[0]} values for {len(params)} searched rules {list(params)}")
    rules = rule_values(specs, fixed)
    for name, x in zip(params, u):
        if not 0.0 <= float(x) <= 1.0:  # also rejects NaN
            raise WorldError(f"rule {name!r}: u={float(x)!r} is outside [0, 1]")
        rules[name] = by_name[name].to_physical(x)
    return rules


def rule_columns(specs: Sequence[RuleSpec], rules: Sequence[Mapping[str, float]]) -> dict[str, np.ndarray]:
    """The copies' rules as one (N,) column per rule, physical values."""
    full = [rule_values(specs, r) for r in rules]
    return {s.name: np.array([r[s.name] for r in full], dtype=float) for s in specs}


@dataclass(frozen=True)
class Mechanisms:
    """How a world's mechanisms — its sets of searched rules — are named in trial names and tables.

    By their dimensionality and their rules' short names (`RuleSpec.short`): 2d-floor-risk, "2-D floor+risk";
    by their dimensionality alone where the rules are a prefix of the world's optional `plain_search` (fresh
    water's: the campaign's 1d and 2d, "1-D" and "2-D").
    """

    short: Mapping[str, str]
    plain: tuple[str, ...] = ()

    @classmethod
    def of(cls, world) -> "Mechanisms":
        return cls({s.name: s.short for s in world.rule_specs}, tuple(getattr(world, "plain_search", ())))

    def _parts(self, params: Sequence[str]) -> list[str]:
        params = tuple(params)
        return [] if params == self.plain[: len(params)] else [self.short.get(p, p) for p in params]

    def name(self, params: Sequence[str]) -> str:
        """In a trial or file name: 1d, 2d, 2d-floor-risk."""
        return "-".join([f"{len(params)}d", *self._parts(params)])

    def label(self, params: Sequence[str]) -> str:
        """As tables and plots show it: 1-D, 2-D, 2-D floor+risk."""
        parts = self._parts(params)
        return f"{len(params)}-D" + (" " + "+".join(parts) if parts else "")


def unit_rules(specs: Sequence[RuleSpec], columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """(N, rules) the copies' rules as u in [0, 1]: the rule block of an observation."""
    return np.clip(np.stack([(columns[s.name] - s.low) / s.span for s in specs], axis=1), 0.0, 1.0)
