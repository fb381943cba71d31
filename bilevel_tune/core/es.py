"""Ask/tell Evolution Strategy over the searched rules' u (docs/es.md).

The search mean lives in logit space (u clipped to [1e-6, 1 − 1e-6]);
candidates are u = sigmoid(logit μ + σ·ε), with ε for generation g drawn
from SeedSequence([seed, g]) so `ask` is pure and `tell` regenerates it.

* N = 1: a (1+1)-ES with an advantage baseline. Generation 0 evaluates μ
  itself as the baseline; afterwards one child per generation, accepted iff
  strictly better; σ/γ on success, σ·γ on failure.
* N ≥ 2 (even): antithetic pairs ±ε, fitness whitening (z-scores, ddof 0,
  zeros when flat — the user's method) or centred ranks; the gradient
  mean_i (z⁺_i − z⁻_i)·ε_i / (2σ), norm-clipped, moves logit μ by lr·g.
  σ adapts on the population-mean objective against the previous
  generation's: better → σ·γ, worse → σ/γ, within 1e-3 relative → unchanged.

γ = sigma_decay ** sigma_lr. σ is kept in [sigma_min, sigma_max] in both
modes. A failed candidate (NaN/inf objective) ranks worst, never becomes the
best, and is counted; a generation where all fail changes nothing but the
generation counter. With z-scoring the mean's step does not shrink near an
optimum, so it jitters there (benchmarks/es_landscape.py measures how much).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from bilevel_tune.base import seeds
from bilevel_tune.base.knobs import StudyError
from bilevel_tune.base.sections import SHAPINGS, ESSettings
from bilevel_tune.core import metrics
from bilevel_tune.core.outer import OuterOptimizer, fill_failed, generation_metrics

U_EPS = 1e-6
FLAT_STD = 1e-8
SIGMA_TOL = 1e-3


@dataclass(frozen=True)
class ESConfig(ESSettings):
    """The study's [es] settings (`sections.ESSettings`: defaults and ranges) and the trial's population."""

    population: int = dataclasses.field(default=1, kw_only=True)

    def __post_init__(self):
        n = self.population
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not runs_population(n):
            raise ValueError(f"population={n!r} must be 1 or an even integer ≥ 2 (antithetic pairs)")
        super().__post_init__()
        if not self.sigma_min <= self.sigma_max:
            raise ValueError(f"sigma_min={self.sigma_min} must be ≤ sigma_max={self.sigma_max}")
        if not self.sigma_min <= self.sigma <= self.sigma_max:
            raise ValueError(
                f"sigma={self.sigma!r} must be within [sigma_min, sigma_max] = [{self.sigma_min}, {self.sigma_max}]"
            )

    @property
    def sigma_factor(self) -> float:
        """γ = sigma_decay ** sigma_lr: the factor σ is multiplied or divided by in one step."""
        return self.sigma_decay**self.sigma_lr


@dataclass(frozen=True)
class ESState:
    """Everything the ES needs to continue; `to_dict` is the trial's checkpoint."""

    config: ESConfig
    mean_logit: tuple[float, ...]
    sigma: float
    generation: int
    seed: int
    baseline: float | None = None  # N=1: the parent's objective; N≥2: last generation's mean objective
    best_objective: float | None = None
    best_candidate: tuple[float, ...] | None = None
    best_generation: int | None = None
    failed_total: int = 0

    @property
    def dim(self) -> int:
        return len(self.mean_logit)

    @property
    def mean(self) -> np.ndarray:
        return _sigmoid(np.array(self.mean_logit))

    @property
    def incumbent(self) -> np.ndarray:
        """The rules the ES would return now: its mean (`core.outer`)."""
        return self.mean

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["config"] = dataclasses.asdict(self.config)
        for key in ("mean_logit", "best_candidate"):
            out[key] = None if out[key] is None else list(out[key])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ESState":
        data = dict(data)
        data["config"] = ESConfig(**data["config"])
        data["mean_logit"] = tuple(float(x) for x in data["mean_logit"])
        if data.get("best_candidate") is not None:
            data["best_candidate"] = tuple(float(x) for x in data["best_candidate"])
        return cls(**data)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _logit(u: np.ndarray) -> np.ndarray:
    u = np.clip(u, U_EPS, 1.0 - U_EPS)
    return np.log(u) - np.log1p(-u)


def init(config: ESConfig, dim: int, seed: int, mean=None) -> ESState:
    """A fresh search over `dim` rules, mean u (default 0.5 each)."""
    if not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim={dim!r} must be an integer ≥ 1")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r} must be an integer ≥ 0")
    u = np.full(dim, 0.5) if mean is None else np.asarray(mean, dtype=float).reshape(-1)
    if u.shape != (dim,) or not np.all((u >= 0) & (u <= 1)):
        raise ValueError(f"initial mean {u.tolist()} must be {dim} values in [0, 1]")
    return ESState(config, tuple(_logit(u).tolist()), float(config.sigma), 0, int(seed))


def _noise(state: ESState) -> np.ndarray:
    """The generation's perturbations ε (rows), regenerated from (seed, generation)."""
    rng = seeds.optimizer_generator(state.seed, state.generation)
    n = state.config.population
    if n == 1:
        return rng.standard_normal((1, state.dim))
    half = rng.standard_normal((n // 2, state.dim))
    return np.concatenate([half, -half])


def _candidate_logits(state: ESState) -> np.ndarray:
    mu = np.array(state.mean_logit)
    if state.config.population == 1 and state.generation == 0:
        return mu[None, :]
    return mu + state.sigma * _noise(state)


def ask(state: ESState) -> np.ndarray:
    """(N, dim) candidates in [0, 1]; pure in `state`."""
    return _sigmoid(_candidate_logits(state))


def shape_fitness(objectives: np.ndarray, method: str = "zscore") -> np.ndarray:
    """Whitened fitness: z-scores (ddof 0; zeros when flat) or centred average ranks in [−0.5, 0.5].

    Non-finite values must be replaced before shaping (see `fill_failed`).
    """
    f = np.asarray(objectives, dtype=float)
    if method == "zscore":
        std = f.std()
        return (f - f.mean()) / std if std > FLAT_STD else np.zeros_like(f)
    if method == "centered_rank":
        if f.size == 1:
            return np.zeros(1)
        order = np.argsort(f, kind="stable")
        ranks = np.empty(f.size)
        ranks[order] = np.arange(f.size, dtype=float)
        for value in np.unique(f):  # average ranks for ties
            tied = f == value
            ranks[tied] = ranks[tied].mean()
        return ranks / (f.size - 1) - 0.5
    raise ValueError(f"shaping={method!r} is unknown; allowed: {', '.join(SHAPINGS)}")


def _scaled_sigma(config: ESConfig, sigma: float, factor: float) -> float:
    return float(np.clip(sigma * factor, config.sigma_min, config.sigma_max))


@dataclass(frozen=True)
class _Step:
    """What one update changes: the mean (logit), σ, the baseline, and metrics of its own."""

    mean_logit: np.ndarray
    sigma: float
    baseline: float | None
    metrics: dict[str, Any]


def _one_plus_one(state: ESState, f: np.ndarray) -> _Step:
    """(1+1)-ES: generation 0 sets the baseline; a child replaces the parent iff strictly better.

    Success widens the search (σ/γ), failure narrows it (σ·γ).
    """
    cfg, mu = state.config, np.array(state.mean_logit)
    if state.generation == 0:
        return _Step(mu, state.sigma, float(f[0]), {})
    accepted = state.baseline is None or f[0] > state.baseline
    mu, baseline = (_candidate_logits(state)[0], float(f[0])) if accepted else (mu, state.baseline)
    sigma = _scaled_sigma(cfg, state.sigma, 1.0 / cfg.sigma_factor if accepted else cfg.sigma_factor)
    return _Step(mu, sigma, baseline, {metrics.ACCEPTED: bool(accepted)})


def _antithetic(state: ESState, f: np.ndarray) -> _Step:
    """Whitened antithetic gradient step; σ narrows while the population mean improves, widens while it worsens."""
    cfg, sigma = state.config, state.sigma
    z = shape_fitness(fill_failed(f), cfg.shaping)
    half = cfg.population // 2
    eps = _noise(state)[:half]
    grad = ((z[:half] - z[half:])[:, None] * eps).mean(axis=0) / (2.0 * sigma)
    norm = float(np.linalg.norm(grad))
    if norm > cfg.grad_clip:
        grad *= cfg.grad_clip / norm
    current = float(f[np.isfinite(f)].mean())
    if state.baseline is not None:
        margin = SIGMA_TOL * max(1.0, abs(state.baseline), abs(current))
        if current > state.baseline + margin:
            sigma = _scaled_sigma(cfg, sigma, cfg.sigma_factor)
        elif current < state.baseline - margin:
            sigma = _scaled_sigma(cfg, sigma, 1.0 / cfg.sigma_factor)
    return _Step(np.array(state.mean_logit) + cfg.lr * grad, sigma, current, {metrics.GRAD_NORM: norm})


def tell(state: ESState, candidates, objectives) -> tuple[ESState, dict[str, Any]]:
    """Update the search with the objectives of `ask(state)`; returns the new state and metrics."""
    candidates, f = _checked(state, candidates, objectives)
    finite = np.isfinite(f)
    if not finite.any():  # nothing to learn from: only the generation advances
        step = _Step(np.array(state.mean_logit), state.sigma, state.baseline, {})
    elif state.config.population == 1:
        step = _one_plus_one(state, f)
    else:
        step = _antithetic(state, f)

    gen_best = int(np.argmax(np.where(finite, f, -np.inf))) if finite.any() else None
    improved = gen_best is not None and (state.best_objective is None or f[gen_best] > state.best_objective)
    new_state = dataclasses.replace(
        state,
        mean_logit=tuple(np.asarray(step.mean_logit, dtype=float).tolist()),
        sigma=float(step.sigma),
        generation=state.generation + 1,
        baseline=step.baseline,
        best_objective=float(f[gen_best]) if improved else state.best_objective,
        best_candidate=tuple(candidates[gen_best].tolist()) if improved else state.best_candidate,
        best_generation=state.generation if improved else state.best_generation,
        failed_total=state.failed_total + int((~finite).sum()),
    )
    reported = generation_metrics(state.generation, new_state, candidates, f, gen_best, new_state.sigma, step.metrics)
    return new_state, reported


def _checked(state: ESState, candidates, objectives) -> tuple[np.ndarray, np.ndarray]:
    expected = ask(state)
    candidates = np.asarray(candidates, dtype=float)
    if candidates.shape != expected.shape or not np.allclose(candidates, expected, rtol=0, atol=1e-12):
        raise ValueError(
            f"tell() got candidates of shape {candidates.shape} that are not ask(state) for generation {state.generation}"
        )
    f = np.asarray(objectives, dtype=float).reshape(-1)
    if f.shape[0] != state.config.population:
        raise ValueError(f"tell() got {f.shape[0]} objectives for a population of {state.config.population}")
    return candidates, f


def runs_population(n: int) -> bool:
    """The ES's one rule on its population: 1 (the (1+1)-ES), or even (antithetic pairs)."""
    return n == 1 or (n >= 2 and n % 2 == 0)


class EvolutionStrategy(OuterOptimizer):
    """The ES as one outer optimiser among several (`core.outer`): [es] settings, a population of 1 or even."""

    name, section = "es", "es"

    def check(self, population: int, evaluations: int, where: str) -> None:
        super().check(population, evaluations, where)
        if not runs_population(population):
            raise StudyError(f"{where}: optimizer 'es' needs population 1 or even (antithetic pairs), not {population}")

    def init(self, settings: ESSettings, population: int, dim: int, seed: int) -> ESState:
        return init(ESConfig(population=population, **dataclasses.asdict(settings)), dim, seed)

    def ask(self, state: ESState) -> np.ndarray:
        return ask(state)

    def tell(self, state: ESState, candidates, objectives) -> tuple[ESState, dict[str, Any]]:
        return tell(state, candidates, objectives)

    def from_dict(self, data: dict[str, Any]) -> ESState:
        return ESState.from_dict(data)
