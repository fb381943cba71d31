"""The summary's tables of the run: the final and best objectives per cell side by side, the campaign's grid (rows
population × seed), the trials, mean ± SD per cell, the rules scan's bests, the trials not complete — computed from
the store's trials table. pandas only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.report.columns import (
    BASE_FACTORS,
    BEST,
    FINAL,
    MECHANISM,
    factors,
    markdown_table,
    mechanism_factor,
    native,
)
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data.run_folder import CELLS_CSV, GRID_CSV

TRIAL_COLUMNS = (
    "population", "dims", "seed", "status", "best_objective", "best_generation", "generations", "final_objective",
    "final_objective_std", "gen0_objective", "upper_bound", "regret", "final_regret", "grid_spacing", "final_sigma",
    "shards", "nodes", "median_sec_per_gen", "max_threads",
)  # fmt: skip
SCAN_COLUMNS = (
    "optimize_params", "seed", "points", "scan_best", "scan_best_rules", "scan_best_upper_bound", "scan_best_final",
    "grid_spacing",
)  # fmt: skip


def cell_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std (ddof 1) over seeds per cell: population × dims (× the further axes)."""
    values = [c for c in (BEST, FINAL, "best_generation", metrics.UPPER_BOUND, "median_sec_per_gen") if c in trials]
    done = trials[trials.get("generations", 0) > 0]
    if done.empty:
        return pd.DataFrame()
    by = factors(done)
    grouped = done.groupby(by)[values]
    out = grouped.mean().add_suffix("_mean").join(grouped.std(ddof=1).add_suffix("_std"))
    out["n_seeds"] = done.groupby(by)["seed"].nunique()
    return out.reset_index().astype({k: int for k in ("population", "dims", "n_seeds") if k in [*by, "n_seeds"]})


def grid_table(trials: pd.DataFrame, value: str = BEST) -> pd.DataFrame:
    """The user's grid: rows population × seed (a block per value of the further axes), columns 1-D / 2-D / …"""
    done = trials[trials.get("generations", 0) > 0]
    if done.empty or value not in done:
        return pd.DataFrame()
    axes = factors(done)[len(BASE_FACTORS) :]
    index = [*axes, "population", "seed"]
    if mechanism_factor(done) == MECHANISM:  # a column per set of searched rules, in order of dimensionality
        order = done.sort_values(["dims", "optimize_params"])[MECHANISM].unique()
        grid = done.pivot_table(index=index, columns=MECHANISM, values=value, aggfunc="first")
        return grid[[m for m in order if m in grid.columns]].reset_index().rename_axis(columns=None)
    grid = done.pivot_table(index=index, columns="dims", values=value, aggfunc="first")
    grid.columns = [f"{d}-D" for d in grid.columns]
    return grid.reset_index()


def mean_grid(trials: pd.DataFrame, value: str) -> pd.DataFrame:
    """Mean ± SD over seeds (and the seeds) per cell: rows population (a block per further axis), columns the
    mechanisms in order of dimensionality."""
    done = trials[trials.get("generations", 0) > 0].dropna(subset=[value]) if value in trials else trials.iloc[0:0]
    if done.empty:
        return pd.DataFrame()
    axes = factors(done)[len(BASE_FACTORS) :]
    order = list(done.sort_values(["dims", "optimize_params"])[MECHANISM].unique())
    rows = []
    for keys, group in done.groupby([*axes, "population"], sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        row = dict(zip([*axes, "population"], (native(k) for k in keys)))
        for mechanism in order:
            v = group[group[MECHANISM] == mechanism][value]
            row[mechanism] = (
                "–"
                if v.empty
                else f"{v.mean():.4f} ± {v.std(ddof=1):.4f} ({len(v)})"
                if len(v) > 1
                else f"{v.mean():.4f} (1)"
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_pm_std(cells: pd.DataFrame) -> pd.DataFrame:
    if cells.empty:
        return cells
    out = cells[[c for c in cells.columns if not c.endswith(("_mean", "_std"))]].copy()
    for col in (c for c in cells.columns if c.endswith("_mean")):
        name = col.removesuffix("_mean")
        out[name] = [f"{m:.4f} ± {sd:.4f}" if np.isfinite(sd) else f"{m:.4f}" for m, sd in zip(cells[col], cells[name + "_std"])]
    return out


def _per_cell(s: Summary) -> list[str]:
    """The final and best objectives per cell, side by side in meaning."""
    return [
        "## Final objective per cell (mean ± SD over seeds, (seeds): the score the answers use)",
        "",
        markdown_table(mean_grid(s.trials, FINAL)),
        "",
        "## Best objective per cell (optimistic: the best of many noisy evaluations, more of them for a larger "
        "population; mean ± SD over seeds, (seeds))",
        "",
        markdown_table(mean_grid(s.trials, BEST)),
        "",
    ]


def _grid(s: Summary) -> list[str]:
    """The campaign's grid of best objectives: a block per value of the further axes."""
    axes = [k for k, _ in s.design.axes]
    title = "## Best objective per run (the campaign's grid: rows population × seed, columns mechanism dimensionality)"
    if mechanism_factor(s.trials) == MECHANISM:
        title = title.replace("mechanism dimensionality", "mechanism: the searched rules")
    if not axes or s.grid.empty:
        return [title, "", markdown_table(s.grid), ""]
    lines = []
    for values, block in s.grid.groupby(axes, sort=False):
        where = ", ".join(f"{k} {v}" for k, v in zip(axes, values if isinstance(values, tuple) else (values,)))
        lines += [f"{title[:-1]}; {where})", "", markdown_table(block.drop(columns=axes)), ""]
    return lines


def _trials(s: Summary) -> list[str]:
    axes = [k for k, _ in s.design.axes]
    columns = [c for c in TRIAL_COLUMNS if c in s.trials]
    if mechanism_factor(s.trials) == MECHANISM:  # two mechanisms share a dimensionality: name each
        columns[columns.index("dims")] = MECHANISM
    columns[columns.index("seed") + 1 : columns.index("seed") + 1] = [a for a in axes if a in s.trials]
    return ["## Trials", "", markdown_table(s.trials[columns]), ""]


def _scan(s: Summary) -> list[str]:
    if s.scan_bests.empty:
        return []
    return [
        f"## Rules scan ({s.design.scan} points per searched rule; the best point on the evaluation seeds, and that "
        "point re-evaluated on the final seeds)",
        "",
        markdown_table(s.scan_bests[[c for c in SCAN_COLUMNS if c in s.scan_bests]]),
        "",
    ]


def _incomplete(s: Summary) -> list[str]:
    missing = s.trials[s.trials["status"] != "complete"]
    if missing.empty:
        return []
    parts = [
        f"pop {r.population} {r.mechanism if hasattr(r, 'mechanism') else f'{r.dims}-D'} seed {r.seed}: {r.status}"
        + (f" ({r.stop_reason})" if isinstance(getattr(r, "stop_reason", ""), str) and r.stop_reason else "")
        for r in missing.itertuples()
    ]
    return [f"Not complete: {len(missing)} trial(s): " + "; ".join(parts), ""]


PER_CELL = Section("per_cell", markdown=_per_cell)
GRID = Section("grid", compute=lambda s: grid_table(s.trials), markdown=_grid, tables=lambda s: {GRID_CSV: s.grid})
TRIALS = Section("trials_table", markdown=_trials)
CELLS = Section("cells", compute=lambda s: cell_table(s.trials),
                markdown=lambda s: ["## Cells (mean ± std over seeds)", "", markdown_table(_mean_pm_std(s.cells)), ""],
                tables=lambda s: {CELLS_CSV: s.cells})  # fmt: skip
SCAN = Section("scan", markdown=_scan)
INCOMPLETE = Section("incomplete", markdown=_incomplete)
