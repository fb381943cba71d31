"""Where a contrast's noise is: what the runs found, and what their final re-evaluation adds (docs/verdicts.md).

A trial's score is the mean of its rules retrained on k final seeds, and the cells of one run seed share those
seeds (`Seeds.final`: drawn from the run seed alone). So for a hypothesis's contrast at run seed s and final
seed j, d(s, j) = Σ_g w_g · y(g, s, j), and its score-level contrast d_s = mean_j d(s, j) has

    Var(d_s) = σ²_run + σ²_eval / k

σ²_eval is estimated by the within-seed variance of d(s, j) over j (ddof 1), averaged over run seeds; σ²_run as
Var_s(d̄_s) − σ²_eval / K over the K final seeds every run seed holds, floored at 0 (two-stage sampling:
Cochran, Sampling Techniques, ch. 10; STATS-NOTES.md). The re-evaluation's share is its part of Var(d_s) at the
run's recorded k. `correlation` is how alike the re-evaluation noise of the hypothesis's cells is: the mean, over
pairs of its cells, of the correlation of their within-seed deviations y(g, s, j) − mean_j y(g, s, ·).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from bilevel_tune.verdicts import family

Scores = Mapping[tuple, Mapping[int, Mapping[int, float]]]  # group → run seed → final seed → objective


@dataclass(frozen=True)
class NoiseSplit:
    """One hypothesis's contrast, its variance split; NaN where the data cannot say (one run seed, one final seed)."""

    run_seeds: int
    effect: float  # the mean contrast over run seeds, each on its first K final seeds
    final_seeds: int  # K: the final seeds every run seed of it holds
    recorded: int  # k: the final seeds its scores (the decisions') average
    run_var: float  # σ²_run
    eval_var: float  # σ²_eval (one final seed's)
    correlation: float

    def var_at(self, k: int) -> float:
        """Var(d_s) when each score averages k final seeds."""
        return self.run_var + self.eval_var / k

    @property
    def eval_share(self) -> float:
        """The re-evaluation's share of Var(d_s) at the recorded k."""
        total = self.var_at(self.recorded)
        return self.eval_var / self.recorded / total if total > 0 else float("nan")

    def record(self) -> dict[str, float | int]:
        return {
            "run_seeds": self.run_seeds, "effect": self.effect, "final_seeds": self.final_seeds, "recorded_final_seeds": self.recorded,
            "run_var": self.run_var, "eval_var": self.eval_var, "eval_share": self.eval_share,
            "correlation": self.correlation, "sd_at_recorded": float(np.sqrt(self.var_at(self.recorded))),
            "sd_at_available": float(np.sqrt(self.var_at(self.final_seeds))),
        }  # fmt: skip


def split(hypothesis, scores: Scores, recorded: int) -> NoiseSplit | None:
    """The hypothesis's noise split over the run seeds all its groups hold; None where fewer than two final seeds
    are shared (nothing to split)."""
    groups = family.groups(hypothesis)
    per_seed = {s: f for s, f in shared_finals(hypothesis, scores).items() if len(f) >= 2}
    if not per_seed:
        return None
    k_all = min(len(f) for f in per_seed.values())
    d = contrasts(hypothesis, scores, per_seed)
    eval_var = float(np.mean([np.var(v, ddof=1) for v in d.values()]))
    means = np.array([v[:k_all].mean() for v in d.values()])  # each run seed on its first K final seeds
    run_var = max(float(np.var(means, ddof=1)) - eval_var / k_all, 0.0) if len(means) >= 2 else float("nan")
    correlation = _correlation(groups, scores, per_seed)
    return NoiseSplit(len(per_seed), float(means.mean()), k_all, recorded, run_var, eval_var, correlation)


def shared_finals(hypothesis, scores: Scores) -> dict[int, list[int]]:
    """{run seed: the final seeds every group of the hypothesis holds at it}, over the run seeds they all hold."""
    groups = family.groups(hypothesis)
    seeds = sorted(set.intersection(*(set(scores.get(g, {})) for g in groups))) if groups else []
    return {s: sorted(set.intersection(*(set(scores[g][s]) for g in groups))) for s in seeds}


def contrasts(hypothesis, scores: Scores, finals: Mapping[int, list[int]] | None = None) -> dict[int, np.ndarray]:
    """{run seed: the contrast d(s, j) on each of its shared final seeds j}."""
    finals = shared_finals(hypothesis, scores) if finals is None else finals
    return {s: np.array([sum(w * scores[g][s][j] for g, w in hypothesis.contrast) for j in f]) for s, f in finals.items()}


def _correlation(groups, scores: Scores, per_seed: Mapping[int, list[int]]) -> float:
    """The mean, over pairs of groups, of the correlation of their within-seed deviations."""
    deviations = {}
    for g in groups:
        parts = [np.array([scores[g][s][j] for j in f]) for s, f in per_seed.items()]
        deviations[g] = np.concatenate([p - p.mean() for p in parts])
    found = []
    for a, b in itertools.combinations(groups, 2):
        x, y = deviations[a], deviations[b]
        if x.std() > 0 and y.std() > 0:
            found.append(float(np.corrcoef(x, y)[0, 1]))
    return float(np.mean(found)) if found else float("nan")


def final_seeds_for(noise: NoiseSplit, cost_run: float, cost_eval: float) -> int:
    """The final seeds that minimise Var(d_s) per training spent: k* = √(σ²_eval · c_run / (σ²_run · c_eval)),
    at least the recorded k (Cochran's two-stage allocation). `cost_run`: a run's trainings per cell (its
    evaluations); `cost_eval`: one final seed's (one per rule set scored)."""
    if not noise.run_var > 0:
        return max(noise.recorded, noise.final_seeds)
    k = np.sqrt(noise.eval_var * cost_run / (noise.run_var * cost_eval))
    return max(noise.recorded, int(round(k)))
