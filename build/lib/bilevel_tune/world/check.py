"""Contract check for FreshWaterEnv (in the spirit of Gymnasium's check_env).

    python -m bilevel_tune.world.check [--num-farms 5] [--population 3] [--horizon 150] [--seed 0]

Exit 0 when every contract holds, 1 with a message naming what broke and
how to fix it, 2 on bad arguments. Checks: spaces, seeded determinism,
live-agent keys, observations inside their space, pickle round trip,
water balance (1e-9 relative, every day), rule bounds, reward ≤ 1.
"""

from __future__ import annotations

import argparse
import pickle
import sys

import numpy as np

from bilevel_tune.world.hydrology import CAPACITY_M3, SECONDS_PER_DAY
from bilevel_tune.world.rules import RULE_SPECS, Rules

WATER_BALANCE_RTOL = 1e-9


class ContractError(AssertionError):
    """A broken env contract; the message names the contract and the fix."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ContractError(message)


def _seeded_actions(env, rng: np.random.Generator) -> dict:
    return {a: rng.random(1).astype(np.float32) for a in env.agents}


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


def check_rule_bounds() -> None:
    for spec in RULE_SPECS:
        for u in (0.0, 0.5, 1.0):
            value = getattr(Rules.from_unit({spec.name: u}), spec.name)
            _require(
                spec.low - 1e-12 <= value <= spec.high + 1e-12,
                f"rule {spec.name}: u={u} maps to {value} outside [{spec.low}, {spec.high}]",
            )
        try:
            Rules.from_unit({spec.name: 1.5})
        except ValueError:
            pass
        else:
            raise ContractError(f"rule {spec.name}: u=1.5 was accepted; Rules.from_unit must reject u outside [0, 1]")


def check_env(env_config: dict, seed: int = 0) -> None:
    """Raise ContractError naming the first broken contract."""
    from bilevel_tune.world.env import FreshWaterEnv

    env = FreshWaterEnv(env_config)
    obs, _ = env.reset(seed=seed)

    # spaces and keys
    _require(
        set(env.observation_spaces) == set(env.agents) == set(env.action_spaces),
        "observation_spaces/action_spaces must cover exactly env.agents",
    )
    _require(
        set(obs) == set(env.agents),
        f"reset() returned observations for {sorted(set(obs) ^ set(env.agents))[:3]}…; every live agent needs one",
    )
    rng = np.random.default_rng(seed)
    horizon = env.basin.config.horizon
    for day in range(horizon):
        for agent, o in obs.items():
            _require(
                env.observation_spaces[agent].contains(o),
                f"day {day}: observation of {agent} {o} is outside its space; clip it or widen the Box",
            )
        obs, rewards, terminated, truncated, _ = env.step(_seeded_actions(env, rng))
        _require(
            set(obs) == set(rewards) == set(env.agents),
            f"day {day}: step() keys differ from env.agents; return obs and reward for every live agent",
        )
        _require(
            terminated == {"__all__": False}, f"day {day}: terminated={terminated}; the env ends by truncation only"
        )
        _require(
            truncated["__all__"] == (day == horizon - 1),
            f"day {day}: truncated={truncated} but the horizon is {horizon}",
        )
        r = np.array(list(rewards.values()))
        _require(
            bool(np.all(np.isfinite(r)) and np.all(r <= 1.0 + 1e-12)),
            f"day {day}: rewards must be finite and ≤ 1, got max {r.max()}",
        )
        d = env.last_day
        inflow = d.inflow_m3s
        change = d.level * CAPACITY_M3 - d.volume_start_m3
        flows = (inflow - d.withdrawal_m3s - d.release_m3s - d.spill_m3s) * SECONDS_PER_DAY
        _require(
            bool(np.all(np.abs(change - flows) <= WATER_BALANCE_RTOL * CAPACITY_M3)),
            f"day {day}: water balance does not close (ΔV − flows = {np.max(np.abs(change - flows)):.3g} m³)",
        )
        _require(
            bool(min(d.withdrawal_m3s.min(), d.release_m3s.min(), d.spill_m3s.min(), d.level.min()) >= 0),
            f"day {day}: a flow or the volume went negative",
        )

    # seeded determinism over 50 steps
    a, b = FreshWaterEnv(env_config), FreshWaterEnv(env_config)
    _require(
        all(_same(x, y) for x, y in zip(_rollout(a, seed, 50), _rollout(b, seed, 50))),
        "two same-seeded envs diverged within 50 steps; draw every random number from the reset seed's generator",
    )

    # pickle round trip mid-episode continues identically
    a.reset(seed=seed + 1)
    a.step(_seeded_actions(a, np.random.default_rng(1)))
    clone = pickle.loads(pickle.dumps(a))
    act = _seeded_actions(a, np.random.default_rng(2))
    _require(
        _same(a.step(act)[0], clone.step(act)[0]),
        "a pickled copy stepped differently from the original; keep all state picklable (Ray ships envs)",
    )
    check_rule_bounds()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bilevel_tune.world.check", description=__doc__.splitlines()[0])
    parser.add_argument("--num-farms", type=int, default=5)
    parser.add_argument("--population", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("num_farms", "population", "horizon"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)} must be ≥ 1")
    rules = [
        Rules.from_unit({"fixed_quota": u, "min_demand_frac": 1 - u}).as_dict()
        for u in np.linspace(0, 1, args.population)
    ]
    config = {"num_farms": args.num_farms, "horizon": args.horizon, "rules": rules}
    try:
        check_env(config, seed=args.seed)
    except ContractError as err:
        print(f"contract broken: {err}", file=sys.stderr)
        return 1
    print(
        f"FreshWaterEnv contract holds ({args.population} candidates × {args.num_farms} farms, {args.horizon} days, seed {args.seed})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
