"""Optuna's samplers as an outer optimiser: `optimizer = "optuna"`, `[optuna] sampler = "tpe"` (docs/es.md).

Each generation rebuilds an Optuna study from the search's history — every candidate so far a finished trial with
its objective, a failed one (a non-finite objective) a failed trial — with the sampler seeded by (seed,
generation), and asks it for `population` points, each u in the unit box. The state is the history alone, kept by
`SearchState`, so a resumed run asks exactly what the uninterrupted one would. The incumbent is Optuna's best
trial so far (`study.best_trial`: the best evaluation, as random search's). Optuna is imported only when a study
names it: `pip install 'bilevel_tune[optuna]'`.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any

import numpy as np

from bilevel_tune.base.knobs import StudyError
from bilevel_tune.core.outer import PendingSearch, SearchState, checked, rows, told

SAMPLERS = {"tpe": "TPESampler", "gp": "GPSampler", "cmaes": "CmaEsSampler", "qmc": "QMCSampler",
            "random": "RandomSampler"}  # fmt: skip  # [optuna] sampler → its class in optuna.samplers


class OptunaSearch(PendingSearch):
    name, section = "optuna", "optuna"

    def check(self, population: int, evaluations: int, where: str) -> None:
        super().check(population, evaluations, where)
        try:
            import optuna  # noqa: F401
        except ImportError:
            raise StudyError(
                f"{where}: optimizer 'optuna' needs Optuna, which is not installed: pip install 'bilevel_tune[optuna]'"
            ) from None

    def init(self, settings, population: int, dim: int, seed: int) -> SearchState:
        state = SearchState(self.name, population, dim, seed, settings=dataclasses.asdict(settings))
        return dataclasses.replace(state, pending=rows(asked(state, 0)))

    def tell(self, state: SearchState, candidates, objectives) -> tuple[SearchState, dict[str, Any]]:
        candidates, f = checked(state, candidates, objectives)
        known = dataclasses.replace(
            state, history=state.history + ((rows(candidates), tuple(float(v) if np.isfinite(v) else None for v in f)),)
        )
        return told(state, candidates, f, asked(known, state.generation + 1))


def asked(state: SearchState, generation: int) -> np.ndarray:
    """The `population` points Optuna's sampler asks next, given every evaluation in `state`'s history."""
    import optuna
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(logging.WARNING)  # no line per trial added
    seed = int(np.random.SeedSequence([state.seed, generation]).generate_state(1)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # GP's and QMC's "experimental" notes
        sampler = getattr(optuna.samplers, SAMPLERS[state.settings["sampler"]])(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    space = {f"u{j}": FloatDistribution(0.0, 1.0) for j in range(state.dim)}
    for candidates, objectives in state.history:
        for u, value in zip(candidates, objectives):
            params = {f"u{j}": float(v) for j, v in enumerate(u)}
            if value is None:
                study.add_trial(create_trial(params=params, distributions=space, state=TrialState.FAIL))
            else:
                study.add_trial(create_trial(params=params, distributions=space, value=float(value)))
    trials = [study.ask(space) for _ in range(state.population)]
    return np.array([[trial.params[f"u{j}"] for j in range(state.dim)] for trial in trials], dtype=float)
