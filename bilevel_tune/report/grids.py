"""The summary's grids: mean ± SD per cell, the campaign's grid (rows population × seed), the final and best
objectives side by side — computed from the trials table. pandas only.
"""

from __future__ import annotations

import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.report.columns import BASE_FACTORS, BEST, FINAL, MECHANISM, factors, mechanism_factor, native


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
