"""The RLlib shell's own check (in the spirit of Gymnasium's check_env): `WorldEnv` over any world keeps RLlib's
multi-agent contract.

    python -m bilevel_tune.appo.env_check [--world fresh-water] [--copies 3] [--seed 0]

Exit 0 when every promise holds, 1 with a message naming what broke and how
to fix it, 2 on bad arguments. Checks: spaces covering exactly the live agents,
every observation inside its space, keys of every step, truncation at the
horizon only, finite rewards, seeded determinism, a pickle round trip mid-season
(Ray ships envs). What the world itself promises — shapes, its physics (fresh
water's water balance), its assessment — is the world contract's check,
`python -m bilevel_tune.worlds.check`.
"""

from __future__ import annotations

import argparse
import pickle
import sys

import numpy as np

from bilevel_tune.worlds import BUILTIN_WORLDS, DEFAULT_WORLD, WorldError, load_world
from bilevel_tune.worlds.contract import searched_rules


class ContractError(AssertionError):
    """A broken env contract; the message names the contract and the fix."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ContractError(message)


def _seeded_actions(env, rng: np.random.Generator) -> dict:
    return {a: _in_space(env.action_spaces[a], rng) for a in env.agents}


def _in_space(space, rng: np.random.Generator) -> np.ndarray:
    return (space.low + (space.high - space.low) * rng.random(space.shape)).astype(space.dtype)


def _rollout(env, seed: int, steps: int):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    trace = [obs]
    for _ in range(steps):
        obs, rew, _, trunc, _ = env.step(_seeded_actions(env, rng))
        trace += [obs, rew]
        if trunc["__all__"]:
            break
    return trace


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    return np.array_equal(a, b)


def check_env(env_config: dict, seed: int = 0) -> None:
    """Raise ContractError naming the first broken promise of the shell over `env_config`'s world."""
    from bilevel_tune.appo.world_env import WorldEnv

    env = WorldEnv(env_config)
    obs, _ = env.reset(seed=seed)
    _require(
        set(env.observation_spaces) == set(env.agents) == set(env.action_spaces),
        "observation_spaces/action_spaces must cover exactly env.agents",
    )
    _require(
        set(obs) == set(env.agents),
        f"reset() returned observations for {sorted(set(obs) ^ set(env.agents))[:3]}…; every live agent needs one",
    )
    rng = np.random.default_rng(seed)
    horizon = env.world.horizon
    for step in range(horizon):
        for agent, o in obs.items():
            _require(
                env.observation_spaces[agent].contains(np.asarray(o, dtype=env.observation_spaces[agent].dtype)),
                f"step {step}: the observation of {agent} is outside its space; clip it or widen the world's bounds",
            )
        obs, rewards, terminated, truncated, _ = env.step(_seeded_actions(env, rng))
        _require(
            set(obs) == set(rewards) == set(env.agents),
            f"step {step}: step() keys differ from env.agents; return obs and reward for every live agent",
        )
        _require(terminated == {"__all__": False}, f"step {step}: terminated={terminated}; seasons end by truncation")
        _require(
            truncated["__all__"] == (step == horizon - 1),
            f"step {step}: truncated={truncated} but the horizon is {horizon}",
        )
        _require(bool(np.all(np.isfinite(list(rewards.values())))), f"step {step}: rewards must be finite")

    a, b = WorldEnv(env_config), WorldEnv(env_config)
    _require(
        all(_same(x, y) for x, y in zip(_rollout(a, seed, 50), _rollout(b, seed, 50))),
        "two same-seeded envs diverged within 50 steps; draw every random number from the reset seed's generator",
    )
    a.reset(seed=seed + 1)
    a.step(_seeded_actions(a, np.random.default_rng(1)))
    clone = pickle.loads(pickle.dumps(a))
    act = _seeded_actions(a, np.random.default_rng(2))
    _require(
        _same(a.step(act)[0], clone.step(act)[0]),
        "a pickled copy stepped differently from the original; keep all state picklable (Ray ships envs)",
    )


def env_config(world: str, copies: int) -> dict:
    """The shell's config for `copies` copies of a world, its first searched rule spread over its range."""
    world_class = load_world(world)
    first = world_class.searched_by_default[0]
    rules = [searched_rules(world_class.rule_specs, [first], [u], {}) for u in np.linspace(0, 1, copies)]
    return {"world": world, "rules": rules}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bilevel_tune.appo.env_check", description=__doc__.splitlines()[0])
    parser.add_argument("--world", default=DEFAULT_WORLD, help=f"{', '.join(BUILTIN_WORLDS)} or module:Class")
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.copies < 1:
        parser.error(f"--copies={args.copies} must be ≥ 1")
    try:
        check_env(env_config(args.world, args.copies), seed=args.seed)
    except WorldError as err:
        print(f"bilevel_tune.appo.env_check: error: {err}", file=sys.stderr)
        return 2
    except ContractError as err:
        print(f"contract broken: {err}", file=sys.stderr)
        return 1
    print(f"the RLlib shell over {args.world} keeps its contract ({args.copies} copies, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
