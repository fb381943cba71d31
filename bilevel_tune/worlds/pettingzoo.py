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
season of them stacked along time, (T, agents) each, with "reward". Before anything runs, `as_world` builds one
environment under the default rules and runs PettingZoo's own `parallel_api_test` on it — a failure is one
line —, reads one agent's observation and action Boxes from it, and hands the class to `single_copy`, which
steps one environment per copy. pettingzoo is an optional extra: `pip install bilevel_tune[pettingzoo]`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import warnings
from typing import Any, Mapping

import numpy as np

from bilevel_tune.worlds.contract import WorldError, rule_values


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """A world without settings of its own: its [world] holds only `kind`."""


@dataclasses.dataclass(frozen=True)
class NoObjective:
    """A world whose objective has no weights to set."""


class ParallelEnvWorld:
    """One copy of a world: a user's `ParallelEnv` under one rule set (`make_env`), as `single_copy` steps it."""

    name: str
    rule_specs: tuple
    searched_by_default: tuple
    settings_class: type = NoSettings
    objective_class: type = NoObjective
    horizon: int = 0  # steps in a season, when the settings have no `horizon`

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
    """The declaration checked — PettingZoo's API test on one environment, Box spaces, a horizon — and given one
    agent's spaces: the one-copy class `single_copy` turns into a world of N copies. WorldError in one line."""
    label = getattr(declaration, "name", declaration.__name__)
    try:
        from gymnasium import spaces
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
        raise WorldError(
            f"world {label!r}: make_env under the default rules fails: {type(err).__name__}: {err}"
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
    agent = probe.possible_agents[0]
    observation, action = probe.env.observation_space(agent), probe.env.action_space(agent)
    for what, space in (("observation", observation), ("action", action)):
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise WorldError(f"world {label!r}: its {what} space must be a 1-D Box (got {space})")
    return type(
        declaration.__name__,
        (declaration,),
        {
            "observation_size": int(observation.shape[0]),
            "observation_low": float(np.min(observation.low)),
            "observation_high": float(np.max(observation.high)),
            "action_size": int(action.shape[0]),
            "action_low": np.asarray(action.low, dtype=float),
            "action_high": np.asarray(action.high, dtype=float),
        },
    )
