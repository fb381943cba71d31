"""Ask/tell Evolution Strategy over the searched rules' u (DESIGN §4).

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
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bilevel_tune import metrics as M

SHAPINGS = ("zscore", "centered_rank")
U_EPS = 1e-6
FLAT_STD = 1e-8
SIGMA_TOL = 1e-3


@dataclass(frozen=True)
class ESConfig:
    population: int = 1
    sigma: float = 0.15
    lr: float = 0.10
    sigma_lr: float = 0.02
    sigma_decay: float = 0.99
    sigma_min: float = 0.01
    sigma_max: float = 0.25
    shaping: str = "zscore"
    grad_clip: float = 5.0

    def __post_init__(self):
        n = self.population
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 or (n > 1 and n % 2):
            raise ValueError(f"population={n!r} must be 1 or an even integer ≥ 2 (antithetic pairs)")
        for name in ("sigma_min", "sigma_max", "lr", "sigma_lr", "grad_clip"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name}={value!r} must be a finite number > 0")
        if not 0 < self.sigma_decay <= 1:
            raise ValueError(f"sigma_decay={self.sigma_decay!r} must be in (0, 1]")
        if not self.sigma_min <= self.sigma_max:
            raise ValueError(f"sigma_min={self.sigma_min} must be ≤ sigma_max={self.sigma_max}")
        if not (isinstance(self.sigma, (int, float)) and self.sigma_min <= self.sigma <= self.sigma_max):
            raise ValueError(
                f"sigma={self.sigma!r} must be within [sigma_min, sigma_max] = [{self.sigma_min}, {self.sigma_max}]"
            )
        if self.shaping not in SHAPINGS:
            raise ValueError(f"shaping={self.shaping!r} is unknown; allowed: {', '.join(SHAPINGS)}")

    @property
    def gamma(self) -> float:
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
    rng = np.random.default_rng(np.random.SeedSequence([state.seed, state.generation]))
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


def fill_failed(objectives: np.ndarray) -> np.ndarray:
    """Failed (non-finite) objectives take the generation's worst finite value."""
    f = np.asarray(objectives, dtype=float)
    finite = np.isfinite(f)
    return np.where(finite, f, f[finite].min()) if finite.any() else f


def _scaled_sigma(config: ESConfig, sigma: float, factor: float) -> float:
    return float(np.clip(sigma * factor, config.sigma_min, config.sigma_max))


def tell(state: ESState, candidates, objectives) -> tuple[ESState, dict[str, Any]]:
    """Update the search with the objectives of `ask(state)`; returns the new state and metrics."""
    cfg = state.config
    expected = ask(state)
    candidates = np.asarray(candidates, dtype=float)
    if candidates.shape != expected.shape or not np.allclose(candidates, expected, rtol=0, atol=1e-12):
        raise ValueError(
            f"tell() got candidates of shape {candidates.shape} that are not ask(state) for generation {state.generation}"
        )
    f = np.asarray(objectives, dtype=float).reshape(-1)
    if f.shape[0] != cfg.population:
        raise ValueError(f"tell() got {f.shape[0]} objectives for a population of {cfg.population}")
    finite = np.isfinite(f)
    n_failed = int((~finite).sum())
    mu, sigma, baseline = np.array(state.mean_logit), state.sigma, state.baseline
    extras: dict[str, Any] = {}

    if not finite.any():
        extras[M.ALL_FAILED] = True
    elif cfg.population == 1:
        if state.generation == 0:
            baseline = float(f[0])
        else:
            # (1+1)-ES: success widens the search (σ/γ), failure narrows it (σ·γ)
            accepted = baseline is None or f[0] > baseline
            extras[M.ACCEPTED] = bool(accepted)
            if accepted:
                mu, baseline = _candidate_logits(state)[0], float(f[0])
            sigma = _scaled_sigma(cfg, sigma, 1.0 / cfg.gamma if accepted else cfg.gamma)
    else:
        z = shape_fitness(fill_failed(f), cfg.shaping)
        half = cfg.population // 2
        eps = _noise(state)[:half]
        grad = ((z[:half] - z[half:])[:, None] * eps).mean(axis=0) / (2.0 * sigma)
        norm = float(np.linalg.norm(grad))
        if norm > cfg.grad_clip:
            grad *= cfg.grad_clip / norm
        mu = mu + cfg.lr * grad
        extras[M.GRAD_NORM] = norm
        current = float(f[finite].mean())
        if baseline is not None:
            margin = SIGMA_TOL * max(1.0, abs(baseline), abs(current))
            if current > baseline + margin:  # improving: narrow the search
                sigma = _scaled_sigma(cfg, sigma, cfg.gamma)
            elif current < baseline - margin:
                sigma = _scaled_sigma(cfg, sigma, 1.0 / cfg.gamma)
        baseline = current

    best_objective, best_candidate, best_generation = state.best_objective, state.best_candidate, state.best_generation
    gen_best = int(np.argmax(np.where(finite, f, -np.inf))) if finite.any() else None
    if gen_best is not None and (best_objective is None or f[gen_best] > best_objective):
        best_objective = float(f[gen_best])
        best_candidate = tuple(candidates[gen_best].tolist())
        best_generation = state.generation

    new_state = dataclasses.replace(
        state,
        mean_logit=tuple(np.asarray(mu, dtype=float).tolist()),
        sigma=float(sigma),
        generation=state.generation + 1,
        baseline=baseline,
        best_objective=best_objective,
        best_candidate=best_candidate,
        best_generation=best_generation,
        failed_total=state.failed_total + n_failed,
    )
    finite_f = f[finite]
    out = {
        M.GENERATION: state.generation,
        M.SIGMA: new_state.sigma,
        M.MEAN: new_state.mean,
        M.GEN_BEST_OBJECTIVE: float(f[gen_best]) if gen_best is not None else float("nan"),
        M.GEN_BEST_CANDIDATE: candidates[gen_best] if gen_best is not None else None,
        M.OBJECTIVE_MEAN: float(finite_f.mean()) if finite_f.size else float("nan"),
        M.OBJECTIVE_STD: float(finite_f.std()) if finite_f.size else float("nan"),
        M.BEST_OBJECTIVE: best_objective if best_objective is not None else float("nan"),
        M.BEST_CANDIDATE: None if best_candidate is None else np.array(best_candidate),
        M.BEST_GENERATION: best_generation if best_generation is not None else -1,
        M.FAILED: n_failed,
        M.ALL_FAILED: bool(extras.pop(M.ALL_FAILED, False)),
        **extras,
    }
    return new_state, out
