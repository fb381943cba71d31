"""Where the APPO loops meet a world (docs/worlds.md): a block's world from its env_config, one agent's spaces,
and a raw Gaussian action mapped into the world's action bounds.

Any world on the contract runs here, every one the same way: the env_config names the world under "world" (the
default world where it names none, as an env shell made by hand may) beside its [world] settings.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from bilevel_tune.inner.contract import InnerLoopConfig
from bilevel_tune.worlds import DEFAULT_WORLD, load_world

WORLD_KEY, RULES_KEY, SEED_KEY = "world", "rules", "seed"


def block_env_config(config: InnerLoopConfig, rules: Sequence[Any], seed: int) -> dict[str, Any]:
    """A block's world as RLlib carries it to the env runner: the world's settings, one rule set per candidate, the seed."""
    physical = [r.as_dict() if hasattr(r, "as_dict") else dict(r) for r in rules]
    settings = {WORLD_KEY: config.world_kind, **dataclasses.asdict(config.world_settings)}
    return {**settings, RULES_KEY: physical, SEED_KEY: int(seed)}


def block_world(env_config: Mapping[str, Any] | None):
    """(the world's copies, one per rule set, the env_config's seed or None); ValueError naming an unknown key."""
    settings = dict(env_config or {})
    world_class = load_world(settings.pop(WORLD_KEY, DEFAULT_WORLD))
    rules = settings.pop(RULES_KEY, None) or [{}]
    seed = settings.pop(SEED_KEY, None)
    allowed = [f.name for f in dataclasses.fields(world_class.settings_class)]
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise ValueError(
            f"unknown env_config key(s) {unknown}; allowed: {', '.join([*allowed, WORLD_KEY, RULES_KEY, SEED_KEY])}"
        )
    return world_class(world_class.settings_class(**settings), rules), seed


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


def acting_in(world, raw_actions):
    """The policy `play_seasons` runs: the explore-off raw actions of each copy's agents, in the world's bounds,
    (N, agents, action_size); one row per copy (a shared observation) is every agent's."""

    def act(observation: np.ndarray) -> np.ndarray:
        # in float64 before the map, as fresh water's farms always acted (its `farm_fraction`): the same bits
        raw = np.asarray(raw_actions(observation), dtype=np.float64)
        if raw.ndim == 2:  # one action per copy
            raw = np.broadcast_to(raw[:, None, :], (world.copies, world.agents, raw.shape[-1]))
        return unsquash(raw, world.action_low, world.action_high)

    return act
