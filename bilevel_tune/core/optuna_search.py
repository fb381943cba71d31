"""Optuna's samplers as an outer optimiser: `optimizer = "optuna"`, `[optuna] sampler = "tpe"` (docs/es.md).

Each generation rebuilds an Optuna study from the search's history — every candidate so far a finished trial with
its objective, a failed one (a non-finite objective) a failed trial — with the sampler seeded by (seed,
generation), and asks it for `population` points, each u in the unit box. The state is the history alone, kept by
`SearchState`, so a resumed run asks exactly what the uninterrupted one would. The incumbent is Optuna's best
trial so far (`study.best_trial`: the best evaluation, as random search's). `[optuna] options` are the sampler's own
keyword settings, checked against its signature before any trial starts. Optuna is imported only when a study
names it: `pip install 'bilevel_tune[optuna]'`.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import warnings
from typing import Any

import numpy as np

from bilevel_tune.base import seeds
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

    def check_settings(self, settings, where: str) -> None:
        sampler = sampler_class(settings.sampler)
        takes = keywords(sampler)
        for name, value in settings.options:
            if name not in takes:
                raise StudyError(
                    f"{where}: optuna.options {name}={value!r}: {sampler.__name__} takes no such setting here; it takes "
                    f"{', '.join(takes) or 'none'}{' (the seed is the trial’s)' if name == 'seed' else ''}"
                )
            if _kind(value) not in takes[name] and not (_kind(value) == "int" and "float" in takes[name]):
                raise StudyError(
                    f"{where}: optuna.options {name}={value!r} must be {' or '.join(takes[name])} ({sampler.__name__})"
                )
        try:
            made(settings.sampler, dict(settings.options), seed=0)
        except (ValueError, TypeError) as err:  # a value the sampler's own check refuses (n_startup_trials=-1)
            raise StudyError(
                f"{where}: optuna.options {shown_options(settings.options)}: {sampler.__name__} refuses them: {err}"
            ) from None

    def init(self, settings, population: int, dim: int, seed: int) -> SearchState:
        as_json = {**dataclasses.asdict(settings), "options": dict(settings.options)}  # the checkpoint's, as it reads back
        state = SearchState(self.name, population, dim, seed, settings=as_json)
        return dataclasses.replace(state, pending=rows(asked(state, 0)))

    def tell(self, state: SearchState, candidates, objectives) -> tuple[SearchState, dict[str, Any]]:
        candidates, f = checked(state, candidates, objectives)
        known = dataclasses.replace(
            state, history=state.history + ((rows(candidates), tuple(float(v) if np.isfinite(v) else None for v in f)),)
        )
        return told(state, candidates, f, asked(known, state.generation + 1))


def sampler_class(name: str) -> type:
    import optuna

    return getattr(optuna.samplers, SAMPLERS[name])


def made(name: str, options: dict[str, Any], seed: int):
    """The sampler `[optuna] sampler` names, with its options and this seed."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # GP's, QMC's, multivariate's notes
        return sampler_class(name)(seed=seed, **options)


def shown_options(options) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in options)


SCALARS = ("bool", "int", "float", "str")  # what a study file's options table can hold


def keywords(sampler: type) -> dict[str, tuple[str, ...]]:
    """The keyword settings `[optuna] options` may give a sampler, each with the kinds it takes: its constructor's
    parameters annotated as flags, numbers or words (none of its callables or samplers; the seed is the trial's)."""
    takes = {}
    for name, parameter in inspect.signature(sampler).parameters.items():
        annotation = parameter.annotation
        if not isinstance(annotation, str):  # evaluated annotations: the default's own kind
            default = parameter.default
            annotation = type(default).__name__ if isinstance(default, (bool, int, float, str)) else ""
        kinds = tuple(part.strip() for part in annotation.split("|") if part.strip() != "None")
        if name != "seed" and kinds and all(kind in SCALARS for kind in kinds):
            takes[name] = kinds
    return takes


def _kind(value: Any) -> str:
    return type(value).__name__


def asked(state: SearchState, generation: int) -> np.ndarray:
    """The `population` points Optuna's sampler asks next, given every evaluation in `state`'s history."""
    import optuna
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(logging.WARNING)  # no line per trial added
    seed = seeds.optimizer_seed(state.seed, generation)
    options = dict(state.settings.get("options", ()))  # none in a checkpoint from before [optuna] options
    sampler = made(state.settings["sampler"], options, seed)
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
