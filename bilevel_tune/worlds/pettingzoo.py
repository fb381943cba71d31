"""A PettingZoo `ParallelEnv` as a world: the multi-agent standard, run as it is, one environment per copy.

A user's environment needs no rewriting for the contract. Declare it:

    from bilevel_tune.worlds.pettingzoo import ParallelEnvWorld

    class Pasture(ParallelEnvWorld):
        name = "pasture"
        rule_specs = (RuleSpec("tax", 0.0, 1.0, 0.0, "paid per unit grazed", "tax"),)
        searched_by_default = ("tax",)
        settings_class = PastureSettings      # optional: the study file's [world] (a dataclass of knobs)
        objective_class = PastureObjective    # optional: its [objective]

        @staticmethod
        def make_env(settings, rules) -> ParallelEnv: ...        # rules: every rule, physical
        @staticmethod
        def season_objective(season, objective) -> dict: ...     # {"objective": …, and its named terms}

and name it in the study file, `[world] kind = "pasture:Pasture"`. A season lasts `settings.horizon` steps
(or the class's `horizon`); `infos[agent]`'s numbers are the step's diagnostics, and `season_objective` gets a
season of them stacked along time, (T, agents) each, agents in `possible_agents` order, with "reward" and
"alive" (1 while the agent is in the season).

Before anything runs, `as_world` builds one environment under the default rules and runs PettingZoo's own
`parallel_api_test` on it — a failure is one line —, reads every agent's spaces and groups the agents into
kinds: by the declaration's `kind_of(agent)` where it has one, else by their spaces (agents whose observation
and action spaces are the same share a kind, named after their common name: `adversary_0`, `adversary_1` →
"adversary"; `bob_0`, `alice_0` → "bob_alice"). Every agent of a kind acts under one policy. Spaces:

* actions: `Box` of any shape (float), `Discrete`, `MultiDiscrete`, `MultiBinary`; they reach the environment
  in the space's own shape and dtype;
* observations: any of those, `Dict` and `Tuple` of them too, flattened by gymnasium's own
  `spaces.flatten` (a Discrete one-hot); infinite bounds (MPE's `Box(-inf, inf)`) are kept as they are;
* anything else (`Graph`, `Sequence`, `Text`) is refused in one line naming the agent and the space.

An agent that terminates or is truncated before the horizon leaves: it is asked no action after, its last
reward counts, and its observation, rewards and diagnostics read 0 from then on. pettingzoo is an optional
extra: `pip install bilevel_tune[pettingzoo]`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from bilevel_tune.worlds.contract import AgentKind, Step, WorldError, rule_values
from bilevel_tune.worlds.single_copy import CopiesOfOne

ALIVE = "alive"  # the season's column: 1 while the agent is in the season


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """A world without settings of its own: its [world] holds only `kind`."""


@dataclasses.dataclass(frozen=True)
class NoObjective:
    """A world whose objective has no weights to set."""


class ParallelEnvWorld:
    """One copy of a world: a user's `ParallelEnv` under one rule set (`make_env`), as `ParallelEnvCopies` steps it."""

    name: str
    rule_specs: tuple
    searched_by_default: tuple
    settings_class: type = NoSettings
    objective_class: type = NoObjective
    horizon: int = 0  # steps in a season, when the settings have no `horizon`
    kind_of = None  # optional: agent name → its kind's name (agents of one kind share a policy); else by spaces

    @staticmethod
    def make_env(settings: Any, rules: Mapping[str, float]):
        raise NotImplementedError

    @staticmethod
    def season_objective(season: Mapping[str, np.ndarray], objective: Any) -> dict[str, float]:
        raise NotImplementedError

    def __init__(self, settings: Any, rules: Mapping[str, float]):
        self.settings, self.rules = settings, dict(rules)
        self.env = type(self).make_env(settings, self.rules)
        self.possible_agents = list(self.env.possible_agents)
        self.horizon = int(getattr(settings, "horizon", 0) or type(self).horizon)

    def reset(self, seed: int):
        return self.env.reset(seed=seed)

    def step(self, actions: Mapping[str, np.ndarray]):
        return self.env.step(dict(actions))


def is_parallel_env_world(world: Any) -> bool:
    return isinstance(world, type) and issubclass(world, ParallelEnvWorld) and world is not ParallelEnvWorld


def as_world(declaration: type) -> type:
    """The declaration checked — PettingZoo's API test on one environment, its spaces, a horizon — and its agents
    grouped into kinds: the world class of N copies (`ParallelEnvCopies`). WorldError in one line."""
    label = getattr(declaration, "name", declaration.__name__)
    try:
        from pettingzoo.test import parallel_api_test
    except ImportError:
        raise WorldError(
            f"world {label!r} is a PettingZoo ParallelEnv: pip install bilevel_tune[pettingzoo] (pettingzoo)"
        ) from None
    settings = declaration.settings_class()
    defaults = rule_values(declaration.rule_specs, {})
    try:
        probe = declaration(settings, defaults)
    except Exception as err:  # noqa: BLE001 - the user's factory: its failure is one line, whatever it is
        first = str(err).splitlines()[0] if str(err) else ""
        raise WorldError(
            f"world {label!r}: make_env under the default rules fails: {type(err).__name__}: {first}"
        ) from None
    if probe.horizon < 1:
        raise WorldError(f"world {label!r}: a season needs a horizon ≥ 1 (settings.horizon, or the class's horizon)")
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("error")  # PettingZoo warns of what its test tolerates; a world may not
            parallel_api_test(declaration.make_env(settings, defaults), num_cycles=probe.horizon)
    except Exception as err:  # noqa: BLE001 - PettingZoo's test asserts and warns; either is one line here
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise WorldError(f"world {label!r} fails PettingZoo's parallel_api_test: {first}") from None
    kinds = agent_kinds(declaration, probe.env, probe.possible_agents, label)
    return type(
        declaration.__name__,
        (ParallelEnvCopies,),
        {
            "one": declaration,
            "name": declaration.name,
            "settings_class": declaration.settings_class,
            "objective_class": declaration.objective_class,
            "rule_specs": tuple(declaration.rule_specs),
            "searched_by_default": tuple(declaration.searched_by_default),
            "kinds": kinds,
            "agent_names": tuple(probe.possible_agents),
            "__module__": declaration.__module__,
        },
    )


# -- spaces and kinds ------------------------------------------------------------------------------------------
def check_space(space, what: str, where: str) -> None:
    """A space this adapter can carry: actions Box (float) / Discrete / MultiDiscrete / MultiBinary; observations
    those, and Dict and Tuple of them. WorldError naming it otherwise."""
    from gymnasium import spaces

    flat = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
    if what == "action":
        if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
            return
        if isinstance(space, flat[1:]):
            return
        raise WorldError(
            f"{where}: its action space {space} is not supported; allowed: Box (float, any shape), Discrete, "
            "MultiDiscrete, MultiBinary"
        )
    if isinstance(space, flat):
        return
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        for part in space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces:
            check_space(part, what, where)
        return
    raise WorldError(
        f"{where}: its observation space {space} is not supported; allowed: Box, Discrete, MultiDiscrete, "
        "MultiBinary, and Dict or Tuple of them"
    )


def agent_kinds(declaration: type, env, agents: Sequence[str], label: str) -> tuple[AgentKind, ...]:
    """The agents grouped into kinds: by the declaration's `kind_of`, else by their (observation, action) spaces."""
    if not agents:
        raise WorldError(f"world {label!r}: its environment has no possible_agents")
    spaces_of = {}
    for agent in agents:
        observation, action = env.observation_space(agent), env.action_space(agent)
        check_space(observation, "observation", f"world {label!r} agent {agent!r}")
        check_space(action, "action", f"world {label!r} agent {agent!r}")
        spaces_of[agent] = (observation, action)
    kind_of = declaration.kind_of
    if kind_of is not None:
        groups: dict[str, list[str]] = {}
        for agent in agents:
            groups.setdefault(str(kind_of(agent)), []).append(agent)
        for name, members in groups.items():
            if len({repr(spaces_of[a]) for a in members}) > 1:
                raise WorldError(
                    f"world {label!r}: kind {name!r} holds agents of different spaces ({members[0]!r}: "
                    f"{spaces_of[members[0]]}); a kind's agents share one policy"
                )
    else:
        by_spaces: dict[str, list[str]] = {}
        for agent in agents:
            by_spaces.setdefault(repr(spaces_of[agent]), []).append(agent)
        names = [_common_name(members) for members in by_spaces.values()]
        if len(set(names)) < len(names) or not all(names):
            names = [f"kind{j}" for j in range(len(names))]
        groups = dict(zip(names, by_spaces.values()))
    index = {agent: i for i, agent in enumerate(agents)}
    return tuple(
        AgentKind(name, tuple(index[a] for a in members), *spaces_of[members[0]]) for name, members in groups.items()
    )


def _common_name(agents: Sequence[str]) -> str:
    """The agents' name less its number: adversary_0, adversary_1 → adversary; agents of different names, theirs
    joined: bob_0, alice_0 → bob_alice (what RLlib module ids may hold)."""
    stems = dict.fromkeys(re.sub(r"[_\-.]*\d+$", "", a) for a in agents)
    return re.sub(r"[^A-Za-z0-9_]", "_", "_".join(stems))


def flat_size(space) -> int:
    from gymnasium import spaces

    return int(spaces.flatdim(space))


def flatten(space, value) -> np.ndarray:
    from gymnasium import spaces

    return np.asarray(spaces.flatten(space, value), dtype=np.float32)


# -- N copies ------------------------------------------------------------------------------------------------------
class ParallelEnvCopies(CopiesOfOne):
    """N environments of a declaration, one per rule set, stepped one after another; observed and acted per kind."""

    one: type
    kinds: tuple[AgentKind, ...]
    agent_names: tuple[str, ...]

    def __init__(self, settings: Any, rules: Sequence[Mapping[str, float]]):
        if not rules:
            raise ValueError(f"{self.name} needs at least one rule set")
        self.settings = settings
        self.envs = [self.one(settings, rule_values(self.rule_specs, r)) for r in rules]
        self.agent_ids = list(self.agent_names)
        # the spaces under these settings (a setting may change them: MPE's continuous_actions), grouped as declared
        self.kinds = agent_kinds(self.one, self.envs[0].env, self.agent_ids, self.name)
        self._index = {agent: i for i, agent in enumerate(self.agent_ids)}
        self.copies, self.agents = len(self.envs), len(self.agent_ids)
        self.horizon = int(self.envs[0].horizon)
        self.failed = np.zeros(self.copies, dtype=bool)
        self.alive = np.zeros((self.copies, self.agents), dtype=bool)
        self._observations = [
            np.zeros((self.copies, len(kind.agents), flat_size(kind.observation_space)), dtype=np.float32)
            for kind in self.kinds
        ]
        self._diagnostic_keys: tuple[str, ...] | None = None
        self.t = 0

    def _observe_into(self, k: int, observations: Mapping[str, Any]) -> None:
        """Copy k's observations as the environment gave them: an agent leaving at this step keeps its last (a
        value bootstraps from it); one gone before reads 0."""
        for j, kind in enumerate(self.kinds):
            for r, i in enumerate(kind.agents):
                agent = self.agent_ids[i]
                value = flatten(kind.observation_space, observations[agent]) if agent in observations else 0.0
                self._observations[j][k, r] = value

    def reset(self, rng: np.random.Generator) -> list[np.ndarray]:
        seed = int(rng.integers(2**31 - 1))
        self.failed[:] = False
        self.t = 0
        for k, env in enumerate(self.envs):
            observations, _ = env.reset(seed=seed)
            self.alive[k] = [agent in env.env.agents for agent in self.agent_ids]
            self._observe_into(k, observations)
        return self.observe()

    def observe(self) -> list[np.ndarray]:
        out = []
        for observation in self._observations:
            observation = observation.copy()
            observation[self.failed] = 0.0
            out.append(observation)
        return out

    def step(self, actions: Sequence[np.ndarray]) -> Step:
        """One step of every copy: `actions[j]` the kind's (N, its agents, *action shape), in its space's dtype."""
        rewards = np.zeros((self.copies, self.agents))
        infos_per_copy = []
        was_alive = self.alive.copy()
        for k, env in enumerate(self.envs):
            acting = {
                self.agent_ids[i]: actions[j][k, r]
                for j, kind in enumerate(self.kinds)
                for r, i in enumerate(kind.agents)
                if self.alive[k, i]
            }
            if not acting:  # everyone has left this copy: nothing to step
                infos_per_copy.append({})
                continue
            observations, step_rewards, _, _, infos = env.step(acting)
            for agent in acting:
                rewards[k, self._index[agent]] = float(step_rewards.get(agent, 0.0))  # a leaving agent's last counts
            still = set(env.env.agents)
            self.alive[k] = [agent in still and was_alive[k, i] for i, agent in enumerate(self.agent_ids)]
            self._observe_into(k, observations)
            infos_per_copy.append(infos)
        diagnostics = self._diagnostics(infos_per_copy, was_alive)
        observed_finite = np.logical_and.reduce([np.isfinite(o).all(axis=(1, 2)) for o in self._observations])
        self.failed |= ~(np.isfinite(rewards).all(axis=1) & observed_finite)
        self.t += 1
        return Step(rewards=rewards, diagnostics=diagnostics)

    def _diagnostics(self, infos_per_copy: list[Mapping[str, Any]], acted: np.ndarray) -> dict[str, np.ndarray]:
        """The infos' numbers (the first step's keys, for every step of every season), per copy and agent; 0 for an
        agent that did not act; and ALIVE: 1 for those that did."""
        if self._diagnostic_keys is None:
            keys: dict[str, None] = {}
            for infos in infos_per_copy:
                for info in infos.values():
                    for key, value in (info or {}).items():
                        if isinstance(value, (int, float, np.number, bool)) and key != ALIVE:
                            keys.setdefault(str(key), None)
            self._diagnostic_keys = tuple(keys)
        out = {key: np.zeros((self.copies, self.agents)) for key in self._diagnostic_keys}
        for k, infos in enumerate(infos_per_copy):
            for i, agent in enumerate(self.agent_ids):
                info = infos.get(agent) or {}
                for key in self._diagnostic_keys:
                    value = info.get(key, 0.0)
                    out[key][k, i] = float(value) if isinstance(value, (int, float, np.number, bool)) else 0.0
        out[ALIVE] = acted.astype(float)
        return out
