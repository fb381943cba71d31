"""The rules scan in the summary: the ceiling's ground truth and search vs grid, the sentences the verdicts add.

The scan's tables — one row per scan and grid point, each scan's best, each trial's regret against it — are the
run's store's (`study_data.run_tables`: `scan_table`, `scan_bests`, `add_regret`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.core.outer import label_of
from bilevel_tune.report.columns import OPTIMIZER
from bilevel_tune.study_data.run_tables import scan_key


def ceiling_truth(cell: dict[str, Any], bests: pd.DataFrame, ceiling: float, tol: float) -> str | None:
    """For a trial pinned at the ceiling: does any scanned rule set rise above the band? None without a scan."""
    if bests.empty:
        return None
    match = bests[np.logical_and.reduce([bests[k] == cell[k] for k in scan_key(bests) if k in cell])]
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
