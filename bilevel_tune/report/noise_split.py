"""## Where the noise is: each Answers row's contrast split into what the runs found and what their final
re-evaluation adds (`verdicts.noise`), read from finals.csv (`study_data.final_scores`), beside the t each score
would give — the best-so-far rules' (the decisions') and the search mean's.

A planner reads it (`planning.pilot_designs`): a large re-evaluation share is cheap to shrink with more final seeds, a
large run share only with more run seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.report.answers import Answers
from bilevel_tune.report.columns import markdown_table
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data import final_scores
from bilevel_tune.study_data.run_folder import trial_name
from bilevel_tune.verdicts import family, noise

EVAL_COST = len(final_scores.RULES)  # trainings a final seed costs a trial: each rule set it scores


def final_scores_by_group(design, finals: pd.DataFrame, rules: str = final_scores.BEST_RULES) -> dict[tuple, dict[int, dict[int, float]]]:
    """{group: {run seed: {final seed: objective}}} of one rule set's rows, trials matched to cells by name."""
    cells = {trial_name(design, c): c for c in design.cells if not c.scan}
    out: dict[tuple, dict[int, dict[int, float]]] = {}
    if finals.empty:
        return out
    for r in finals[finals["rules"] == rules].itertuples():
        cell = cells.get(str(r.trial))
        if cell is not None and np.isfinite(r.value):
            out.setdefault(cell.group, {}).setdefault(cell.seed, {})[int(r.final_seed)] = float(r.value)
    return out


def recorded_scores(scores: dict, design, k: int) -> dict[tuple, dict[int, float]]:
    """{group: {run seed: the mean of its first k final seeds}}: a score as a trial's final re-evaluation makes it."""
    from bilevel_tune.inner.contract import Seeds

    out: dict[tuple, dict[int, float]] = {}
    for group, by_seed in scores.items():
        for seed, values in by_seed.items():
            first = Seeds(seed, design.budget.eval_episodes, k).final
            if all(s in values for s in first):
                out.setdefault(group, {})[seed] = float(np.mean([values[s] for s in first]))
    return out


@dataclass(frozen=True)
class NoiseRow:
    key: str
    split: noise.NoiseSplit
    cost_run: float  # a run's evaluations, the mean over the row's cells
    t_best: float  # the paired t over run seeds, each score the mean of the recorded k final seeds
    t_mean: float  # the same with the search mean's rules

    @property
    def best_final_seeds(self) -> int:
        return noise.final_seeds_for(self.split, self.cost_run, EVAL_COST)


@dataclass(frozen=True)
class NoiseSection:
    recorded: int  # the final seeds a trial's score averages
    rows: tuple[NoiseRow, ...]

    def table(self) -> pd.DataFrame:
        rows = []
        for r in self.rows:
            s = r.split
            rows.append({
                "comparison": r.key,
                "run seeds": s.run_seeds,
                "final seeds": s.final_seeds,
                "SD between runs": np.sqrt(s.run_var),
                "SD of one re-evaluation": np.sqrt(s.eval_var),
                f"re-evaluation's share at {self.recorded}": f"{s.eval_share:.0%}" if np.isfinite(s.eval_share) else "–",
                "noise correlation across cells": s.correlation,
                f"paired SD at {self.recorded}": np.sqrt(s.var_at(self.recorded)),
                f"at {s.final_seeds}": np.sqrt(s.var_at(s.final_seeds)),
                "final seeds at least variance per training": r.best_final_seeds,
                "t best-so-far / search mean": " / ".join(f"{t:.2f}" if np.isfinite(t) else "–" for t in (r.t_best, r.t_mean)),
            })  # fmt: skip
        return pd.DataFrame(rows)

    def record(self) -> list[dict[str, Any]]:
        return [
            {"comparison": r.key, **r.split.record(), "cost_run": r.cost_run, "cost_eval": EVAL_COST,
             "best_final_seeds": r.best_final_seeds, "t_best": r.t_best, "t_mean": r.t_mean}
            for r in self.rows
        ]  # fmt: skip


def noise_section(design, found: Answers, finals: pd.DataFrame) -> NoiseSection | None:
    """Every Answers row with at least two final seeds shared by its cells; None without any."""
    if finals is None or finals.empty or found.decisions is None:
        return None
    k = design.budget.final_eval_seeds
    best = final_scores_by_group(design, finals, final_scores.BEST_RULES)
    mean = final_scores_by_group(design, finals, final_scores.MEAN_RULES)
    at_k = {name: recorded_scores(scores, design, k) for name, scores in (("best", best), ("mean", mean))}
    rows = []
    for answer in found.rows:
        h = answer.hypothesis
        split = noise.split(h, best if design.decide.score == final_scores.BEST_RULES else mean, k)
        if split is None:
            continue
        cost = float(np.nanmean(answer.evaluations)) if np.isfinite(answer.evaluations).any() else float("nan")
        rows.append(NoiseRow(h.key, split, cost, _t(h, at_k["best"]), _t(h, at_k["mean"])))
    return NoiseSection(k, tuple(rows)) if rows else None


def _t(hypothesis, scores: dict[tuple, dict[int, float]]) -> float:
    """The paired t of the contrast over the run seeds every group holds; NaN with fewer than two."""
    groups = family.groups(hypothesis)
    if not all(g in scores for g in groups):
        return float("nan")
    seeds = sorted(set.intersection(*(set(scores[g]) for g in groups)))
    d = family.values(hypothesis, scores, seeds)
    if len(d) < 2 or d.std(ddof=1) == 0:
        return float("nan")
    return float(d.mean() / (d.std(ddof=1) / np.sqrt(len(d))))


def _markdown(s: Summary) -> list[str]:
    """## Where the noise is (with final scores seed by seed): each row's variance split, its t by either score."""
    n = s.noise
    if n is None:
        return []
    return [
        "## Where the noise is",
        "",
        "Each row's contrast per run seed, d = B − A, is what the runs found plus the noise of their final "
        f"re-evaluation, which averages {n.recorded} final seeds shared by the cells of a run seed: Var(d) = σ²(runs) "
        f"+ σ²(one re-evaluation) / final seeds, split from finals.csv (the {s.design.decide.score} rules, seed by seed; "
        "docs/verdicts.md). 'final seeds at least variance per training' is Cochran's two-stage allocation at a run's "
        f"evaluations against {2} trainings per final seed (both rule sets scored). The last column is each score's "
        f"paired t over the run seeds at {n.recorded} final seeds: the best-so-far rules' (the decisions') and the "
        "search mean's.",
        "",
        markdown_table(n.table()),
        "",
    ]


SECTION = Section(
    "noise", compute=lambda s: noise_section(s.design, s.answers, s.store.finals), markdown=_markdown,
    record=lambda s: {"noise": s.noise.record()} if s.noise is not None else {},
)  # fmt: skip
