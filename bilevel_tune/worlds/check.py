"""The contract check: does a world keep the promises of bilevel_tune.worlds.contract? One line names the first broken.

    python -m bilevel_tune.worlds.check fishery
    python -m bilevel_tune.worlds.check my_world:Tragedy

Run on every world before a study starts (in the spirit of Gymnasium's env
checker): the declarations (settings and objective sections, rules with their
ranges, the searched ones), then a few seasons of copies under the default
rules, the rules' ends and random rules, with random actions within the bounds:
shapes and dtypes of observations, rewards and diagnostics, no NaN, the season's
length, determinism under a seed, the assessment, and the hooks it offers — its
own invariants among them (fresh water's water balance).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

import numpy as np

from bilevel_tune.base.knobs import StudyError, knob_fields
from bilevel_tune.base.plugins import in_users_code
from bilevel_tune.worlds import BUILTIN_WORLDS, load_world
from bilevel_tune.worlds.contract import (
    METHODS_AND_DECLARATIONS,
    Assessment,
    RuleSpec,
    Step,
    WorldError,
    has_kinds,
    play_seasons,
)

SIZES = ("copies", "agents", "observation_size", "action_size", "horizon")
KIND_SIZES = ("copies", "agents", "horizon")  # a world that declares its agents' kinds: their spaces say the rest


def check_declarations(world: type) -> None:
    """The class's declarations: its sections, its rules, the rules it searches by default."""
    label = getattr(world, "__name__", repr(world))
    missing = [name for name in METHODS_AND_DECLARATIONS if not hasattr(world, name)]
    if missing:
        raise WorldError(f"{label} is not a world: it lacks {', '.join(missing)} (docs/worlds.md)")
    for section in ("settings_class", "objective_class"):
        cls = getattr(world, section)
        if not dataclasses.is_dataclass(cls):
            raise WorldError(f"{label}.{section} must be a dataclass of knob fields (bilevel_tune.base.knobs)")
        unknobbed = [f.name for f in dataclasses.fields(cls) if f not in knob_fields(cls)]
        if unknobbed:
            raise WorldError(f"{label}.{section} field {unknobbed[0]!r} is not declared with knob(): it has no range")
        try:
            cls()
        except (TypeError, ValueError) as err:
            raise WorldError(f"{label}.{section}() with its defaults fails: {err}") from None
    specs = tuple(world.rule_specs)
    if not specs or not all(isinstance(s, RuleSpec) for s in specs):
        raise WorldError(f"{label}.rule_specs must be a non-empty tuple of RuleSpec")
    for s in specs:
        if not (np.isfinite(s.low) and np.isfinite(s.span) and s.span > 0):
            raise WorldError(f"{label} rule {s.name!r}: its range must be finite with span > 0 (got {s.span!r})")
        if not s.low <= s.default <= s.high:
            raise WorldError(
                f"{label} rule {s.name!r}: its default {s.default:g} is outside its range [{s.low:g}, {s.high:g}]"
            )
        lowest, highest = s.physical_limits
        if not lowest <= s.low < s.high <= highest:
            raise WorldError(
                f"{label} rule {s.name!r}: its search range [{s.low:g}, {s.high:g}] must lie within its limits "
                f"[{lowest:g}, {highest:g}]"
            )
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise WorldError(f"{label}.rule_specs repeats a rule name")
    wrong = [n for n in world.searched_by_default if n not in names] or ([] if world.searched_by_default else ["none"])
    if wrong:
        raise WorldError(f"{label}.searched_by_default {wrong[0]!r} is not one of its rules: {', '.join(names)}")


def _rule_sets(world: type, copies: int, rng: np.random.Generator) -> list[dict[str, float]]:
    """Defaults, every rule's low and high ends, and random rules in range: `copies` rule sets in all."""
    specs = world.rule_specs
    sets = [{}, {s.name: s.low for s in specs}, {s.name: s.high for s in specs}]
    while len(sets) < copies:
        sets.append({s.name: s.low + s.span * float(rng.random()) for s in specs})
    return sets[:copies]


def _random_actions(instance: Any, rng: np.random.Generator):
    if has_kinds(instance):
        return [_random_in(kind.action_space, (instance.copies, len(kind.agents)), rng) for kind in instance.kinds]
    low, high = np.broadcast_to(instance.action_low, (instance.action_size,)), instance.action_high
    shape = (instance.copies, instance.agents, instance.action_size)
    return low + (np.broadcast_to(high, low.shape) - low) * rng.random(shape)


def _random_in(space, lead: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Actions drawn from a space (a Box's bounded dimensions uniformly, its unbounded ones from N(0, 1)), `lead`
    of them, in the space's dtype."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
        bounded = np.isfinite(low) & np.isfinite(high)
        uniform = np.where(bounded, low, 0) + np.where(bounded, high - low, 1) * rng.random((*lead, *space.shape))
        return np.where(bounded, uniform, rng.standard_normal((*lead, *space.shape))).astype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return (space.start + rng.integers(0, space.n, lead)).astype(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, (*lead, *space.shape)).astype(space.dtype)
    nvec = np.asarray(space.nvec)
    return (np.asarray(getattr(space, "start", 0)) + (rng.random((*lead, *nvec.shape)) * nvec).astype(int)).astype(
        space.dtype
    )


def _observation_shapes(instance: Any) -> list[tuple[int, ...]]:
    n, agents = instance.copies, instance.agents
    if has_kinds(instance):
        from gymnasium.spaces import flatdim

        return [(n, len(kind.agents), flatdim(kind.observation_space)) for kind in instance.kinds]
    return [(n, instance.observation_size) if instance.shared_observation else (n, agents, instance.observation_size)]


def _season(instance: Any, seed: int, label: str) -> tuple[list[np.ndarray], list[Step]]:
    """One season of random actions, checking each step's shapes and values as it goes."""
    rng = np.random.default_rng(seed + 1)
    n, agents = instance.copies, instance.agents
    shapes = _observation_shapes(instance)
    observations, steps = [instance.reset(np.random.default_rng(seed))], []
    for t in range(instance.horizon):
        per_kind = list(observations[-1]) if has_kinds(instance) else [observations[-1]]
        for obs, obs_shape in zip(per_kind, shapes):
            obs = np.asarray(obs)
            if obs.shape != obs_shape:
                raise WorldError(f"{label}: an observation has shape {obs.shape}; the contract asks {obs_shape}")
            if not np.issubdtype(obs.dtype, np.floating) or not np.isfinite(obs).all():
                raise WorldError(f"{label}: an observation holds {obs.dtype} values that are not all finite floats")
        if has_kinds(instance) and np.asarray(instance.alive).shape != (n, agents):
            raise WorldError(f"{label}: alive has shape {np.asarray(instance.alive).shape}; the contract asks {(n, agents)}")
        if instance.done:
            raise WorldError(f"{label}: done after {t} steps; its horizon is {instance.horizon}")
        step = instance.step(_random_actions(instance, rng))
        rewards = np.asarray(step.rewards)
        if rewards.shape != (n, agents):
            raise WorldError(f"{label}: step() gave rewards of shape {rewards.shape}; the contract asks {(n, agents)}")
        if not np.isfinite(rewards).all():
            raise WorldError(f"{label}: step() gave non-finite rewards (NaN or inf) for actions within the bounds")
        for key, value in step.diagnostics.items():
            value = np.asarray(value)
            if value.ndim and value.shape[0] != n:
                raise WorldError(f"{label}: diagnostic {key!r} has shape {value.shape}; per copy it must lead with {n}")
        steps.append(step)
        observations.append(instance.observe())
    if not instance.done:
        raise WorldError(f"{label}: not done after its horizon of {instance.horizon} steps")
    return observations, steps


def check_world(world: type, copies: int = 4, seed: int = 0) -> None:
    """Every promise of the contract, on `copies` copies; WorldError naming the first one broken."""
    check_declarations(world)
    label = world.name
    settings, objective = world.settings_class(), world.objective_class()
    rules = _rule_sets(world, copies, np.random.default_rng(seed))
    try:
        instance = world(settings, rules)
    except (StudyError, ValueError, TypeError) as err:
        raise WorldError(f"{label}: building {copies} copies under rules in their ranges fails: {err}") from None
    sizes = KIND_SIZES if has_kinds(instance) else SIZES
    declared = ("alive",) if has_kinds(instance) else ("shared_observation", "action_low", "action_high")
    missing = [name for name in sizes + declared if not hasattr(instance, name)]
    if missing:
        raise WorldError(f"{label}: an instance lacks {', '.join(missing)}")
    if instance.copies != copies:
        raise WorldError(f"{label}: built for {copies} rule sets, it has copies={instance.copies}")
    for name in sizes:
        value = getattr(instance, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise WorldError(f"{label}: {name}={value!r} must be an integer ≥ 1")
    if has_kinds(instance):
        placed = sorted(i for kind in instance.kinds for i in kind.agents)
        if placed != list(range(instance.agents)):
            raise WorldError(f"{label}: its kinds must hold every agent once (they hold {placed})")
    else:
        low, high = np.asarray(instance.action_low, dtype=float), np.asarray(instance.action_high, dtype=float)
        if low.shape != (instance.action_size,) or high.shape != (instance.action_size,) or not (low <= high).all():
            raise WorldError(f"{label}: action_low/high must be ({instance.action_size},) arrays with low ≤ high")

    observations, steps = _season(instance, seed, label)
    again, steps_again = _season(instance, seed, label)
    flat = lambda season: [np.asarray(o) for obs in season for o in (obs if has_kinds(instance) else [obs])]  # noqa: E731
    same = all(np.array_equal(a, b) for a, b in zip(flat(observations), flat(again))) and all(
        np.array_equal(a.rewards, b.rewards) for a, b in zip(steps, steps_again)
    )
    if not same:
        raise WorldError(f"{label}: two seasons under one seed differ: all randomness must come from reset's rng")

    acting = np.random.default_rng(seed + 2)
    seasons, failed = play_seasons(instance, [seed, seed + 1], lambda obs: _random_actions(instance, acting))
    if callable(getattr(instance, "invariants", None)):  # the world's own physics (fresh water: its water balance)
        for season in seasons:
            broken_law = instance.invariants(season)
            if broken_law:
                raise WorldError(f"{label}: {broken_law}")
    assessed = instance.assess(seasons, failed, objective)
    if len(assessed) != copies or not all(isinstance(a, Assessment) for a in assessed):
        raise WorldError(f"{label}: assess() must give one Assessment per copy ({copies})")
    broken = [k for k, a in enumerate(assessed) if not np.isfinite(a.objective)]
    if broken:
        raise WorldError(
            f"{label}: copy {broken[0]}'s objective is {assessed[broken[0]].objective} for actions within the bounds"
        )

    if callable(getattr(instance, "reward_bound", None)):
        bound = np.asarray(instance.reward_bound(seasons[0]))
        if bound.shape != (instance.horizon, copies):
            raise WorldError(
                f"{label}: reward_bound() has shape {bound.shape}; the contract asks {(instance.horizon, copies)}"
            )
        earned = seasons[0]["reward"].max(axis=2)
        if (earned > bound + 1e-9).any():
            raise WorldError(f"{label}: reward_bound() lies below a reward an agent earned: it is not an upper bound")
    if not has_kinds(instance) and callable(getattr(instance, "myopic_actions", None)):
        actions = np.asarray(instance.myopic_actions(instance.reset(np.random.default_rng(seed))))
        if actions.shape != (copies, instance.agents, instance.action_size):
            raise WorldError(f"{label}: myopic_actions() has shape {actions.shape}")
        if not ((actions >= low - 1e-12) & (actions <= high + 1e-12)).all():
            raise WorldError(f"{label}: myopic_actions() leaves the action bounds")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bilevel_tune.worlds.check", description=__doc__.splitlines()[0])
    parser.add_argument("world", nargs="*", help=f"a built-in world ({', '.join(BUILTIN_WORLDS)}) or module:Class")
    args = parser.parse_args(argv)
    for spec in args.world or list(BUILTIN_WORLDS):
        try:
            check_world(load_world(spec))
        except WorldError as err:  # it names the world
            print(f"bilevel_tune.worlds.check: error: {err}", file=sys.stderr)
            return 2
        except StudyError as err:  # a declared setting out of its range: the user's to fix as well
            print(f"bilevel_tune.worlds.check: error: {spec}: {err}", file=sys.stderr)
            return 2
        except Exception as err:  # the world's own code raised: one line naming where
            where = in_users_code(err)
            if where is None:
                raise
            print(f"bilevel_tune.worlds.check: error: {spec}: {where}", file=sys.stderr)
            return 2
        print(f"{spec}: keeps the world contract")
    return 0


if __name__ == "__main__":
    sys.exit(main())
