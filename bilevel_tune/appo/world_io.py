"""Where the APPO loops meet a world (docs/worlds.md): a block's world from its env_config, its agents' kinds as
modules see them, and a module's raw actions mapped into the world's actions.

Any world on the contract runs here, every one the same way: the env_config names the world under "world" (the
default world where it names none, as an env shell made by hand may) beside its [world] settings.

A module learns for one kind of agent (`KindIO`). A world of one flat Box (fresh water, the fishery) is one kind,
`DEFAULT_KIND`, whose Gaussian action is mapped into the world's bounds (`unsquash`). A world that declares its
kinds (`contract.AgentKind`: a PettingZoo environment's) gives each kind its own module: its observation
flattened, its action space as a module reads it — a Box flattened to one dimension (its Gaussian mapped into the
Box's finite bounds, reshaped to the Box's shape, in its dtype), a Discrete or MultiDiscrete as it is (the index,
shifted by the space's start), a MultiBinary as a MultiDiscrete of twos.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from bilevel_tune.inner.contract import InnerLoopConfig
from bilevel_tune.worlds import DEFAULT_WORLD, load_world
from bilevel_tune.worlds.contract import has_kinds
from bilevel_tune.worlds.lakes import Lake, LakeWorlds

WORLD_KEY, RULES_KEY, SEED_KEY = "world", "rules", "seed"
LAKES_KEY = "lakes"  # a block of lakes: each copy's (seed, index), its streams' (`worlds.lakes`)
DEFAULT_KIND = "default"  # the one kind of a world of one flat Box: its module is RLlib's default module


def block_env_config(
    config: InnerLoopConfig, rules: Sequence[Any], seed: int, lakes: Sequence[Lake] = ()
) -> dict[str, Any]:
    """A block's world as RLlib carries it to the env runner: the world's settings, one rule set per candidate, the
    seed — and for a block of lakes, each lake's (seed, index)."""
    physical = [r.as_dict() if hasattr(r, "as_dict") else dict(r) for r in rules]
    settings = {WORLD_KEY: config.world_kind, **dataclasses.asdict(config.world_settings)}
    per_lake = {LAKES_KEY: [[int(lake.seed), int(lake.index)] for lake in lakes]} if lakes else {}
    return {**settings, RULES_KEY: physical, SEED_KEY: int(seed), **per_lake}


def block_world(env_config: Mapping[str, Any] | None):
    """(the world's copies, one per rule set, the env_config's seed or None); ValueError naming an unknown key.
    A block of lakes is their `LakeWorlds`, a world per group of one seed's lakes."""
    settings = dict(env_config or {})
    world_class = load_world(settings.pop(WORLD_KEY, DEFAULT_WORLD))
    rules = settings.pop(RULES_KEY, None) or [{}]
    seed = settings.pop(SEED_KEY, None)
    lakes = settings.pop(LAKES_KEY, None)
    allowed = [f.name for f in dataclasses.fields(world_class.settings_class)]
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        keys = [*allowed, WORLD_KEY, RULES_KEY, SEED_KEY, LAKES_KEY]
        raise ValueError(f"unknown env_config key(s) {unknown}; allowed: {', '.join(keys)}")
    world_settings = world_class.settings_class(**settings)
    if lakes:
        block = [Lake(r, int(s), int(k)) for r, (s, k) in zip(rules, lakes)]
        return LakeWorlds.of(world_class, world_settings, block), seed
    return world_class(world_settings, rules), seed


def agent_spaces(world) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """(observation, action) space of one agent: the observation within the world's optional bounds (else
    unbounded), the action within [action_low, action_high]."""
    observation = gym.spaces.Box(
        getattr(world, "observation_low", -np.inf),
        getattr(world, "observation_high", np.inf),
        (int(world.observation_size),),
        np.float32,
    )
    low, high = (np.asarray(bound, dtype=np.float32).reshape(-1) for bound in (world.action_low, world.action_high))
    return observation, gym.spaces.Box(low, high, (int(world.action_size),), np.float32)


def unsquash(raw: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """A raw Gaussian action in the world's bounds, as RLlib's `normalize_actions` maps it for the per-agent loop
    (`unsquash_action`: low + (a + 1)·(high − low)/2, then clipped to [low, high]), in the raw action's dtype.

    On [0, 1] this is (clip(a, −1, 1) + 1)/2 bit for bit: fresh water's `farm_fraction`.
    """
    low, high = np.asarray(low, dtype=raw.dtype), np.asarray(high, dtype=raw.dtype)
    return np.clip(low + (raw + 1.0) * (high - low) / 2.0, low, high)


@dataclasses.dataclass(frozen=True)
class KindIO:
    """One kind of agent as its module sees it: its agents, the module's spaces, its actions into the world's."""

    name: str
    agents: tuple[int, ...]  # indices in a copy's agents
    observation_space: gym.spaces.Box  # flat, float32
    action_space: gym.Space  # a 1-D float32 Box (a Gaussian's), Discrete or MultiDiscrete (categorical)
    world_action_space: gym.Space | None = None  # the world's own, for a world that declares kinds
    shared_observation: bool = False  # one observation per copy, every agent's (fresh water's lakes)

    @property
    def categorical(self) -> bool:
        return isinstance(self.action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete))

    @property
    def action_width(self) -> int:
        """Numbers per agent in a raw action (a Gaussian's dimensions, a multi-categorical's choices; a Discrete: 1)."""
        if isinstance(self.action_space, gym.spaces.Discrete):
            return 1
        return int(np.prod(self.action_space.shape))

    def raw_dtype(self):
        return np.int64 if self.categorical else np.float32

    def to_world(self, raw: np.ndarray, world) -> np.ndarray:
        """A module's raw actions of this kind's agents, (N, agents of the kind, action width) (a Discrete's:
        (N, agents)), as the world takes them."""
        space = self.world_action_space
        if space is None:  # one flat Box: the world's bounds (fresh water's farm fraction, bit for bit)
            return unsquash(raw, world.action_low, world.action_high)
        lead = raw.shape[:2]
        if isinstance(space, gym.spaces.Box):
            low, high = space.low.reshape(-1).astype(raw.dtype), space.high.reshape(-1).astype(raw.dtype)
            bounded = np.isfinite(low) & np.isfinite(high)  # an unbounded dimension takes the raw value
            mapped = np.where(bounded, unsquash(raw, np.where(bounded, low, -1), np.where(bounded, high, 1)), raw)
            return mapped.reshape(*lead, *space.shape).astype(space.dtype)
        start = np.asarray(getattr(space, "start", 0))
        return (np.asarray(raw).reshape(*lead, *space.shape) + start).astype(space.dtype)


def kinds_of(world) -> tuple[KindIO, ...]:
    """The world's agents as modules see them: its declared kinds, or one kind of every agent."""
    if not has_kinds(world):
        observation, action = agent_spaces(world)
        agents = tuple(range(world.agents))
        return (KindIO(DEFAULT_KIND, agents, observation, action, None, bool(world.shared_observation)),)
    return tuple(
        KindIO(kind.name, tuple(kind.agents), flat_observation_space(kind.observation_space),
               module_action_space(kind.action_space), kind.action_space)
        for kind in world.kinds
    )  # fmt: skip


def flat_observation_space(space: gym.Space) -> gym.spaces.Box:
    """The space flattened as `gymnasium.spaces.flatten` flattens its values, float32 (infinite bounds kept)."""
    flat = gym.spaces.flatten_space(space)
    return gym.spaces.Box(flat.low.astype(np.float32), flat.high.astype(np.float32), flat.shape, np.float32)


def module_action_space(space: gym.Space) -> gym.Space:
    """The action space a module acts in for a world's: a Box flattened to one dimension, a MultiBinary as a
    MultiDiscrete of twos, a Discrete or MultiDiscrete from 0."""
    if isinstance(space, gym.spaces.Box):
        low, high = (np.asarray(b, dtype=np.float32).reshape(-1) for b in (space.low, space.high))
        return gym.spaces.Box(low, high, low.shape, np.float32)
    if isinstance(space, gym.spaces.Discrete):
        return gym.spaces.Discrete(int(space.n))
    if isinstance(space, gym.spaces.MultiBinary):
        return gym.spaces.MultiDiscrete(np.full(int(np.prod(space.shape)), 2))
    return gym.spaces.MultiDiscrete(np.asarray(space.nvec).reshape(-1))


def kind_observations(world, observation) -> list[np.ndarray]:
    """A world's observation per kind: a world of one flat Box gives its one array as its one kind's."""
    return list(observation) if has_kinds(world) else [observation]


def world_actions(world, kinds: Sequence[KindIO], raw: Sequence[np.ndarray]):
    """Each kind's raw actions as the world takes them: one array for a world of one flat Box, else one per kind."""
    actions = [kind.to_world(r, world) for kind, r in zip(kinds, raw)]
    return actions if has_kinds(world) else actions[0]


def acting_in(world, raw_actions):
    """The policy `play_seasons` runs: the explore-off raw actions of each kind's agents, as the world takes them.
    `raw_actions(observations per kind)` gives one array per kind; a shared observation's one row per copy is every
    agent's."""
    kinds = kinds_of(world)

    def act(observation):
        raw = []
        for kind, actions in zip(kinds, raw_actions(kind_observations(world, observation))):
            actions = np.asarray(actions)
            if not kind.categorical:  # in float64 before the map, as fresh water's farms always acted: the same bits
                actions = actions.astype(np.float64)
            if kind.shared_observation and actions.ndim == 2:  # one action per copy: every agent's
                actions = np.broadcast_to(actions[:, None, :], (world.copies, len(kind.agents), actions.shape[-1]))
            raw.append(actions)
        return world_actions(world, kinds, raw)

    return act
