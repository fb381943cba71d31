"""A world written for one copy, PettingZoo-ParallelEnv style, as a world of N copies: slower, same results.

Such a class takes its rules at construction and steps one copy with dicts keyed by agent:

    class Tragedy:
        name, settings_class, objective_class, rule_specs, searched_by_default   # as any world declares
        observation_size, action_size, action_low, action_high, horizon          # one agent's, one season's
        def __init__(self, settings, rules: dict[str, float]): ...              # rules: every rule, physical
        possible_agents: list[str]
        def reset(self, seed: int) -> tuple[dict[str, obs], dict[str, dict]]
        def step(self, actions: dict[str, action]) -> (observations, rewards, terminations, truncations, infos)
        def season_objective(self, season: dict[str, np.ndarray], objective) -> dict[str, float]

`infos[agent]` holds the step's numbers (its diagnostics); `season_objective`
gets one season of them stacked along time, (T, agents) each, with "reward",
and returns the objective's named terms and "objective" itself. Every agent
sees its own observation. `single_copy(Tragedy)` is the world class the
contract asks for: it builds one instance per copy, resets them all with one
seed drawn from the season's rng (the copies share their randomness, as the
copies of a vectorized world do), and loops over them each step.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from bilevel_tune.worlds.contract import Assessment, Season, Step, WorldError, rule_values

SINGLE_COPY_MEMBERS = ("possible_agents", "season_objective", "reset", "step")


def is_single_copy(world: type) -> bool:
    """A class that steps one copy with per-agent dicts (it declares `season_objective`), not N copies at once."""
    return hasattr(world, "season_objective") and not hasattr(world, "assess")


def single_copy(world: type) -> type:
    """The world class of N copies that loops over instances of the one-copy `world`."""
    missing = [name for name in SINGLE_COPY_MEMBERS if not hasattr(world, name)]
    if missing and not hasattr(world, "possible_agents"):
        missing = [m for m in missing if m != "possible_agents"]  # an instance attribute: checked once built
    if missing:
        raise WorldError(f"{world.__name__} is not a one-copy world: it lacks {', '.join(missing)} (docs/worlds.md)")

    class Copies(CopiesOfOne):
        one = world
        name = world.name
        settings_class = world.settings_class
        objective_class = world.objective_class
        rule_specs = tuple(world.rule_specs)
        searched_by_default = tuple(world.searched_by_default)
        observation_size = world.observation_size
        action_size = world.action_size
        action_low = np.asarray(world.action_low, dtype=float).reshape(world.action_size)
        action_high = np.asarray(world.action_high, dtype=float).reshape(world.action_size)
        observation_low = getattr(world, "observation_low", -np.inf)  # the RLlib shell's Box: unbounded without
        observation_high = getattr(world, "observation_high", np.inf)

    Copies.__name__ = Copies.__qualname__ = f"{world.__name__}Copies"
    return Copies


class CopiesOfOne:
    """N instances of a one-copy world behind the N-copy contract."""

    one: type
    rule_specs: tuple
    shared_observation = False  # every agent its own observation: (N, agents, obs)

    def __init__(self, settings: Any, rules: Sequence[Mapping[str, float]]):
        if not rules:
            raise ValueError(f"{self.name} needs at least one rule set")
        self.settings = settings
        self.envs = [self.one(settings, rule_values(self.rule_specs, r)) for r in rules]
        self.agent_ids = list(self.envs[0].possible_agents)
        self.copies, self.agents = len(self.envs), len(self.agent_ids)
        self.horizon = int(self.envs[0].horizon)
        self.failed = np.zeros(self.copies, dtype=bool)
        self._observation = np.zeros((self.copies, self.agents, self.observation_size), dtype=np.float32)
        self.t = 0

    @property
    def done(self) -> bool:
        return self.t >= self.horizon

    def _stack(self, per_copy: Sequence[Mapping[str, Any]]) -> np.ndarray:
        return np.array([[np.asarray(d[a], dtype=float) for a in self.agent_ids] for d in per_copy])

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        seed = int(rng.integers(2**31 - 1))
        self._observation = self._stack([env.reset(seed=seed)[0] for env in self.envs]).astype(np.float32)
        self.failed[:] = False
        self.t = 0
        return self.observe()

    def observe(self) -> np.ndarray:
        observation = self._observation.copy()
        observation[self.failed] = 0.0
        return observation

    def step(self, actions: np.ndarray) -> Step:
        actions = np.asarray(actions, dtype=float).reshape(self.copies, self.agents, self.action_size)
        results = [
            env.step({a: actions[k, i] for i, a in enumerate(self.agent_ids)}) for k, env in enumerate(self.envs)
        ]
        self._observation = self._stack([r[0] for r in results]).astype(np.float32)
        rewards = self._stack([r[1] for r in results])
        infos = [r[4] for r in results]
        keys = list(infos[0][self.agent_ids[0]]) if infos and infos[0] else []
        diagnostics = {key: self._stack([{a: info[a][key] for a in self.agent_ids} for info in infos]) for key in keys}
        self.failed |= ~(np.isfinite(rewards).all(axis=1) & np.isfinite(self._observation).all(axis=(1, 2)))
        self.t += 1
        return Step(rewards=rewards, diagnostics=diagnostics)

    def assess(self, seasons: Sequence[Season], failed: np.ndarray, objective: Any) -> list[Assessment]:
        out = []
        for k, env in enumerate(self.envs):
            per_season = [
                env.season_objective({key: value[:, k] for key, value in s.items()}, objective) for s in seasons
            ]
            terms = {key: float(np.mean([p[key] for p in per_season])) for key in per_season[0] if key != "objective"}
            value = float(np.mean([p["objective"] for p in per_season]))
            broke = bool(failed[k]) or not np.isfinite(value)
            diagnostics = {
                key: float(np.mean([s[key][:, k].mean() for s in seasons])) for key in seasons[0] if key != "reward"
            }
            out.append(
                Assessment(
                    objective=float("nan") if broke else value,
                    terms=terms,
                    diagnostics={
                        "mean_reward": float(np.mean([s["reward"][:, k].mean() for s in seasons])),
                        **diagnostics,
                    },
                    upper_bound=None,
                    failed=broke,
                )
            )
        return out
