"""The outer optimiser: what every one meets, and where a study finds one by name (docs/es.md).

An outer optimiser searches the mechanism's rules as u in the unit box [0, 1]^d through one frozen-state
ask/tell contract — the ES's (`core.es`):

    state = optimizer.init(settings, population, dim, seed)
    while state.generation < generations:
        u = optimizer.ask(state)                          # (population, dim), the same for the same state
        state, metrics = optimizer.tell(state, u, objectives)
    state.best_candidate, state.incumbent                 # what the final re-evaluation retrains

Every one keeps the ES's promises: the same seed asks the same candidates; a failed candidate (a non-finite
objective) is counted, ranks worst and never becomes the best; a state restored from its `to_dict` asks exactly
what the uninterrupted run would. The incumbent is the rules the optimiser would return now (the ES's mean, CMA's
mean, BO's best posterior mean, random search's best): the summary reads its value off the rules scan's landscape.

`OPTIMIZERS` names the built-in ones, found like the worlds and the inner loops (`base.plugins`); each module is
imported only when a study names it (CMA-ES needs `cma`, BO `botorch`, Optuna's samplers `optuna`). Plain numpy here: no world, no Ray.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from bilevel_tune.base import seeds
from bilevel_tune.base.knobs import StudyError
from bilevel_tune.base.plugins import import_class
from bilevel_tune.base.sections import OPTIMIZER_NAMES
from bilevel_tune.core import metrics

OPTIMIZERS = {
    "es": "bilevel_tune.core.es:EvolutionStrategy",
    "cma": "bilevel_tune.core.cma_search:CMAES",
    "bo": "bilevel_tune.core.bayes_opt:BayesianOptimisation",
    "random": "bilevel_tune.core.random_search:RandomSearch",
    "optuna": "bilevel_tune.core.optuna_search:OptunaSearch",
}
assert tuple(OPTIMIZERS) == OPTIMIZER_NAMES  # the [outer] optimizer knob's choices
LABELS = {"es": "ES", "cma": "CMA-ES", "bo": "BO", "random": "random search", "optuna": "Optuna"}  # as a reader sees the built-in ones


class OuterOptimizer:
    """One outer optimiser: its name, its study-file section, what it can run, and the ask/tell contract."""

    name: str = ""
    label: str = ""  # how the report names it ("shrinking box"); empty: its name as the study gives it
    section: str | None = None  # its settings' study-file section ([es], [cma], [bo]); None: it has none
    min_population: int = 1
    max_evaluations: int | None = None  # a run's evaluations it is meant for at most; None: any number
    max_evaluations_why: str = ""  # why, as the refusal says it

    def init(self, settings, population: int, dim: int, seed: int):
        raise NotImplementedError

    def ask(self, state) -> np.ndarray:
        raise NotImplementedError

    def tell(self, state, candidates, objectives) -> tuple[Any, dict[str, Any]]:
        raise NotImplementedError

    def from_dict(self, data: dict[str, Any]):
        raise NotImplementedError

    def check_settings(self, settings, where: str) -> None:
        """Settings of its section that are each in range but that this optimiser cannot take (a sampler's keyword
        it does not have): StudyError, one line naming the value and what is allowed."""

    def check(self, population: int, evaluations: int, where: str) -> None:
        """A run this optimiser cannot make: StudyError, one line naming the value and what is allowed."""
        if population < self.min_population:
            raise StudyError(f"{where}: optimizer {self.name!r} needs population ≥ {self.min_population}, not {population}")
        if self.max_evaluations is not None and evaluations > self.max_evaluations:
            raise StudyError(
                f"{where}: optimizer {self.name!r} {self.max_evaluations_why}, so a run makes at most "
                f"{self.max_evaluations:,} of them, not {evaluations:,} (fewer generations, or budget.evaluations)"
            )


class PendingSearch(OuterOptimizer):
    """An optimiser whose state is a `SearchState`: asking hands out the candidates its state holds."""

    def ask(self, state: "SearchState") -> np.ndarray:
        return np.array(state.pending)

    def from_dict(self, data: dict[str, Any]) -> "SearchState":
        return SearchState.from_dict(data)


def load(name: str) -> OuterOptimizer:
    """The outer optimiser a study names (`[outer] optimizer`): a built-in one, or a user's `module:Class`, a
    subclass of `OuterOptimizer` (one with settings of its own reads none from the study file: `section` None)."""
    cls = import_class(name, OPTIMIZERS, StudyError, what="optimizer ")
    if not (isinstance(cls, type) and issubclass(cls, OuterOptimizer)):
        raise StudyError(f"optimizer {name!r} is not an outer optimiser: subclass bilevel_tune.core.outer.OuterOptimizer")
    if name not in OPTIMIZERS and cls.section is not None:
        raise StudyError(f"optimizer {name!r}: a user's optimiser has no study-file section; set its section = None")
    optimizer = cls()
    optimizer.name = optimizer.name or name  # its checkpoint key and records name it as the study does
    return optimizer


def label_of(name: str) -> str:
    """How the report names an optimiser: a built-in's label (ES, CMA-ES, …), a user's class's `label`, else its
    name as the study gives it — also where its module cannot be imported now (a shipped folder read elsewhere)."""
    if name in LABELS:
        return LABELS[name]
    try:
        cls = import_class(name, OPTIMIZERS, StudyError, what="optimizer ")
    except StudyError:
        return name
    return str(getattr(cls, "label", "") or name)


# -- what every optimiser but the ES keeps: its evaluations so far, the candidates it asks next -----------------
@dataclass(frozen=True)
class SearchState:
    """A history-keeping optimiser's state (CMA-ES, BO, random search); `to_dict` is the trial's checkpoint.

    `pending` is what `ask` returns: computed when the state is made, so asking is free and pure and a restored
    state asks exactly what it was about to. `history` holds every generation's candidates and objectives (None:
    failed), which is all CMA-ES and the GP need to be rebuilt.
    """

    optimizer: str
    population: int
    dim: int
    seed: int
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)  # its section's settings as run
    generation: int = 0
    pending: tuple[tuple[float, ...], ...] = ()
    history: tuple[tuple[tuple[tuple[float, ...], ...], tuple[float | None, ...]], ...] = ()
    incumbent_u: tuple[float, ...] | None = None
    best_objective: float | None = None
    best_candidate: tuple[float, ...] | None = None
    best_generation: int | None = None
    failed_total: int = 0
    scale: float | None = None  # the optimiser's own step size where it has one (CMA's σ), for the curves

    @property
    def incumbent(self) -> np.ndarray:
        """The rules it would return now; before any evaluation, the box's centre."""
        return np.array(self.incumbent_u if self.incumbent_u is not None else [0.5] * self.dim)

    @property
    def mean(self) -> np.ndarray:
        """The incumbent under the name the trial's curves and final re-evaluation read (the ES's mean)."""
        return self.incumbent

    def evaluations(self) -> tuple[np.ndarray, np.ndarray]:
        """Every candidate evaluated so far (rows) and its objective (NaN: failed)."""
        if not self.history:
            return np.empty((0, self.dim)), np.empty(0)
        xs = np.concatenate([np.array(x, dtype=float) for x, _ in self.history])
        ys = np.array([np.nan if y is None else y for _, f in self.history for y in f], dtype=float)
        return xs, ys

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # JSON as it stands: failed objectives are kept as None, tuples write as lists

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SearchState":
        data = dict(data)
        data["pending"] = rows(data["pending"]) if data["pending"] else ()
        data["history"] = tuple((rows(x), tuple(f)) for x, f in data["history"])
        for key in ("incumbent_u", "best_candidate"):
            data[key] = None if data.get(key) is None else tuple(float(v) for v in data[key])
        return cls(**data)


def rows(values) -> tuple[tuple[float, ...], ...]:
    """Candidates as the state keeps them: a tuple of rows of Python floats (exact through JSON)."""
    return tuple(tuple(float(v) for v in row) for row in np.atleast_2d(np.asarray(values, dtype=float)))


def checked(state: SearchState, candidates, objectives) -> tuple[np.ndarray, np.ndarray]:
    """`tell`'s arguments, held to what `ask(state)` returned: ValueError otherwise."""
    candidates, expected = np.asarray(candidates, dtype=float), np.array(state.pending)
    if candidates.shape != expected.shape or not np.allclose(candidates, expected, rtol=0, atol=1e-12):
        raise ValueError(
            f"tell() got candidates of shape {candidates.shape} that are not ask(state) for generation {state.generation}"
        )
    f = np.asarray(objectives, dtype=float).reshape(-1)
    if f.shape[0] != len(expected):
        raise ValueError(f"tell() got {f.shape[0]} objectives for {len(expected)} candidates")
    return candidates, f


def told(state: SearchState, candidates: np.ndarray, f: np.ndarray, pending, incumbent=None, scale=None):
    """The state after a generation: its history, best so far and failures, the next candidates and the incumbent
    (None: the best evaluation so far); with the metrics every optimiser reports (the ES's names)."""
    finite = np.isfinite(f)
    gen_best = int(np.argmax(np.where(finite, f, -np.inf))) if finite.any() else None
    improved = gen_best is not None and (state.best_objective is None or f[gen_best] > state.best_objective)
    best = tuple(candidates[gen_best].tolist()) if improved else state.best_candidate
    if incumbent is None:
        incumbent = best
    new = dataclasses.replace(
        state,
        generation=state.generation + 1,
        pending=rows(pending),
        history=state.history + ((rows(candidates), tuple(float(v) if np.isfinite(v) else None for v in f)),),
        incumbent_u=None if incumbent is None else tuple(float(v) for v in np.asarray(incumbent).reshape(-1)),
        best_objective=float(f[gen_best]) if improved else state.best_objective,
        best_candidate=best,
        best_generation=state.generation if improved else state.best_generation,
        failed_total=state.failed_total + int((~finite).sum()),
        scale=scale,
    )
    sigma = float("nan") if scale is None else scale
    return new, generation_metrics(state.generation, new, candidates, f, gen_best, sigma)


def generation_metrics(
    generation: int, new, candidates, f, gen_best: int | None, sigma: float, extra: dict | None = None
) -> dict[str, Any]:
    """The metrics of one told generation, by the names `core.metrics` gives them (the ES's and every other's)."""
    finite_f = f[np.isfinite(f)]
    nan = float("nan")
    return {
        metrics.GENERATION: generation,
        metrics.SIGMA: sigma,
        metrics.MEAN: new.mean,
        metrics.GEN_BEST_OBJECTIVE: float(f[gen_best]) if gen_best is not None else nan,
        metrics.GEN_BEST_CANDIDATE: candidates[gen_best] if gen_best is not None else None,
        metrics.OBJECTIVE_MEAN: float(finite_f.mean()) if finite_f.size else nan,
        metrics.OBJECTIVE_STD: float(finite_f.std()) if finite_f.size else nan,
        metrics.BEST_OBJECTIVE: new.best_objective if new.best_objective is not None else nan,
        metrics.BEST_CANDIDATE: None if new.best_candidate is None else np.array(new.best_candidate),
        metrics.BEST_GENERATION: new.best_generation if new.best_generation is not None else -1,
        metrics.FAILED: int((~np.isfinite(f)).sum()),
        metrics.ALL_FAILED: not finite_f.size,
        **(extra or {}),
    }


def uniform(seed: int, generation: int, shape: Sequence[int], stream: int = 0) -> np.ndarray:
    """Uniform draws in the unit box, fixed by (seed, generation): the same run asks the same points."""
    return seeds.optimizer_generator(seed, generation, stream).random(tuple(shape))


def fill_failed(objectives) -> np.ndarray:
    """Failed (non-finite) objectives take the generation's worst finite value: ranked worst, by every optimiser."""
    f = np.asarray(objectives, dtype=float)
    finite = np.isfinite(f)
    return np.where(finite, f, f[finite].min()) if finite.any() else f


def chosen(sections) -> tuple[OuterOptimizer, Any]:
    """The optimiser a study (anything holding its typed sections: `study.outer`, `study.es`, …) runs, and its
    settings (None for one without a section)."""
    optimizer = load(sections.outer.optimizer)
    return optimizer, getattr(sections, optimizer.section) if optimizer.section else None
