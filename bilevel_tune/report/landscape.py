"""The rules scan in the summary: the landscape, each trial's regret, the ceiling's ground truth, search vs grid.

Reads a run folder's scan trials (bilevel_tune.core.scan) as pandas tables:

* `scan_table` — one row per scan (searched rules × seed) and grid point:
  the rules in physical units, the objective on the trials' evaluation
  seeds, its terms, its upper bound, and the point re-evaluated on the
  final seeds (mean and SD);
* `scan_bests` — per scan, its best point on the evaluation seeds, and that
  point's final re-evaluation (chosen and re-evaluated as an ES trial's
  best is, so the two compare);
* `add_regret` — per ES trial, `regret` = the scan's best − the trial's
  best objective, `final_regret` the same on the final re-evaluation, and
  the grid spacing: a regret may be slightly negative when the ES lands
  between grid points;
* `ceiling_truth` and `search_vs_grid` — the sentences the verdicts add.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.core.outer import label_of
from bilevel_tune.core.scan import spacing_label
from bilevel_tune.report.columns import OPTIMIZER
from bilevel_tune.study_data.run_folder import num
from bilevel_tune.study_data.settings import is_setting_key

OPTIMIZER_KEY = "outer.optimizer"

KEY = ["optimize_params", "seed"]  # what a trial shares with its scan, with the inner loop's further axes


def _key(table: pd.DataFrame) -> list[str]:
    """A scan's identity: its searched rules, seed, and the further axes the inner loop reads (setting keys)."""
    return [*KEY, *(c for c in table.columns if is_setting_key(c))]


def scan_table(study, trials: dict) -> pd.DataFrame:
    """One row per scan and grid point (empty without scans)."""
    rows = []
    terms = (metrics.OBJECTIVE, *study.table.scan_terms, metrics.UPPER_BOUND)  # the world's terms beside the objective
    for cell in study.grid.scan_cells():
        records = trials.get(cell.key)
        if records is None or not records.generations:
            continue
        evaluation, finals = records.generations[0], records.generations[1:]
        grid = np.atleast_2d(np.array(evaluation[metrics.CANDIDATES], dtype=float))
        final = np.array([[num(o[metrics.OBJECTIVE]) for o in p[metrics.OUTCOMES]] for p in finals]).reshape(len(finals), -1)
        for k, outcome in enumerate(evaluation[metrics.OUTCOMES]):
            rules = {
                name: study.rule_specs_by_name[name].to_physical(grid[k, j])
                for j, name in enumerate(cell.optimize_params)
            }
            values = final[:, k][np.isfinite(final[:, k])] if final.size else np.array([])
            rows.append(
                {
                    "dims": cell.dims,
                    "mechanism": study.mechanisms.label(cell.optimize_params),
                    "optimize_params": ",".join(cell.optimize_params),
                    "seed": cell.seed,
                    **{key: ",".join(map(str, v)) if isinstance(v, tuple) else v for key, v in cell.extra},
                    "point": k,
                    **rules,
                    **{term: num(outcome.get(term)) for term in terms},
                    "failed": bool(outcome.get("failed", False)),
                    "final_objective": float(values.mean()) if values.size else float("nan"),
                    "final_objective_std": float(values.std(ddof=1)) if values.size > 1 else float("nan"),
                    "final_seeds": int(values.size),
                }
            )
    return pd.DataFrame(rows)


def scan_bests(scans: pd.DataFrame, study) -> pd.DataFrame:
    """Per scan: its best point on the evaluation seeds (rules, objective, bound) and that point's final re-evaluation."""
    if scans.empty:
        return pd.DataFrame()
    rows = []
    key = _key(scans)
    for values, group in scans.groupby(key, sort=False):
        params, seed = values[0], values[1]
        if group[metrics.OBJECTIVE].notna().any():
            best = group.loc[group[metrics.OBJECTIVE].idxmax()]
        else:
            best = group.iloc[0]
        names = params.split(",")
        rows.append(
            {
                **dict(zip(key, values)),
                "seed": int(seed),
                "dims": len(names),
                "mechanism": study.mechanisms.label(names),
                "points": len(group),
                "scan_best": float(best[metrics.OBJECTIVE]),
                "scan_best_final": float(best["final_objective"]),
                "scan_best_upper_bound": float(best[metrics.UPPER_BOUND]),
                "scan_best_rules": ", ".join(f"{n}={best[n]:.4g}" for n in names),
                "grid_spacing": spacing_label([study.rule_specs_by_name[n] for n in names], study.scan),
            }
        )
    return pd.DataFrame(rows)


def add_regret(trials: pd.DataFrame, bests: pd.DataFrame) -> pd.DataFrame:
    """The trials table with `regret`, `final_regret` and `grid_spacing` beside each trial that has a scan."""
    if bests.empty or trials.empty:
        return trials
    key = _key(bests)
    merged = trials.merge(bests[[*key, "scan_best", "scan_best_final", "grid_spacing"]], on=key, how="left")
    if "best_objective" in merged:
        merged["regret"] = merged["scan_best"] - merged["best_objective"]
    if "final_objective" in merged:
        merged["final_regret"] = merged["scan_best_final"] - merged["final_objective"]
    return merged.drop(columns=["scan_best", "scan_best_final"])


def ceiling_truth(cell: dict[str, Any], bests: pd.DataFrame, ceiling: float, tol: float) -> str | None:
    """For a trial pinned at the ceiling: does any scanned rule set rise above the band? None without a scan."""
    if bests.empty:
        return None
    match = bests[np.logical_and.reduce([bests[k] == cell[k] for k in _key(bests) if k in cell])]
    if match.empty:
        return None
    best = match.iloc[0]
    if best["scan_best"] <= ceiling + tol:
        return (
            f"the scan's best is {best['scan_best']:.4f}; no rules on the grid exceed the band "
            f"({best['points']} points, spacing {best['grid_spacing']}): a structural cap"
        )
    return (
        f"the scan finds {best['scan_best']:.4f} above the band at rules {best['scan_best_rules']}: "
        "the search stopped short"
    )


def search_vs_grid(trials: pd.DataFrame, bests: pd.DataFrame) -> dict[str, Any] | None:
    """One line: inner-loop evaluations (ES generations × population, grid points) against the best each reached.

    Every figure of a mechanism is a mean over the seeds it scanned: a run in stages adds seeds without scans, and
    a grid's best, the runs' best and their regret must be read on the same worlds to add up."""
    if bests.empty or "regret" not in trials:
        return None
    done = trials[(trials["generations"] > 0) & trials["regret"].notna()]  # the runs with a scan of their seed
    parts, cells = [], []
    for (dims, params), scans in bests.groupby(["dims", "optimize_params"]):
        runs = done[done["optimize_params"] == params]
        seeds = ", ".join(str(seed) for seed in sorted(scans["seed"].unique()))
        part = (
            f"{scans['mechanism'].iloc[0]} grid {int(scans['points'].iloc[0])} points → {scans['scan_best'].mean():.4f}"
        )
        by = ["population", *([OPTIMIZER] if runs.get(OPTIMIZER, pd.Series(dtype=str)).nunique() > 1 else [])]
        for values, group in runs.groupby(by, sort=False):
            population, optimizer = (values[0], values[1]) if len(by) == 2 else (values[0], None)
            evaluations = int((group["generations"] * population).mean())
            regret = float(group["regret"].mean())
            who = f"pop {population}" + (f" {label_of(optimizer)}" if optimizer else "")
            part += f"; {who}: {evaluations} → {group['best_objective'].mean():.4f} (regret {regret:+.4f})"
            cells.append(
                {
                    "dims": int(dims),
                    "optimize_params": params,
                    "population": int(population),
                    **({OPTIMIZER: optimizer} if optimizer else {}),
                    "evaluations": evaluations,
                    "regret": regret,
                }
            )
        parts.append(f"{part} (seeds {seeds})")
    only_es = OPTIMIZER not in done or set(done[OPTIMIZER]) <= {"es"}
    searcher = "ES " if only_es else ""  # a study before other optimisers reads as it did
    sentence = (
        f"search vs grid (inner-loop evaluations, {searcher}generations × population against grid points, "
        "→ best objective, means over the scanned seeds): " + "; ".join(parts) + "."
    )
    return {"verdict": "search vs grid", "cells": cells, "sentence": sentence}
