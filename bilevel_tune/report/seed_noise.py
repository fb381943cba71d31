"""The seed-noise verdicts (docs/verdicts.md): the design's descriptive rule, kept beside the decided answers — an
effect is robust when every matched pair of runs agrees in sign and the mean gap exceeds 2 × the seed SD pooled
over the cells; within seed noise otherwise; not enough seeds without two in a cell. pandas only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.report.columns import BEST, MECHANISM, factors, native, shown

ROBUST, NOISE, FEW = "robust", "within seed noise", "not enough seeds"


def pooled_sd(table: pd.DataFrame, value: str) -> tuple[float, int]:
    """Pooled seed SD (ddof 1) over cells with ≥ 2 seeds; (nan, 0) when there are none."""
    num_, den, cells = 0.0, 0, 0
    for _, group in table.groupby(factors(table)):
        v = group[value].dropna()
        if len(v) >= 2:
            num_ += (len(v) - 1) * v.var(ddof=1)
            den += len(v) - 1
            cells += 1
    return (float(np.sqrt(num_ / den)) if den else float("nan")), cells


def _matched_differences(table: pd.DataFrame, factor: str, value: str, low, high):
    """Per level of the other factors: its gap (high − low, means over seeds); and every matched pair's difference.

    Runs pair by seed where both levels have it, else every cross pair.
    """
    others = [f for f in factors(table) if f != factor]
    cells, diffs = [], []
    for level, group in table.groupby(others):
        a = dict(zip(group[group[factor] == low]["seed"], group[group[factor] == low][value]))
        b = dict(zip(group[group[factor] == high]["seed"], group[group[factor] == high][value]))
        if not a or not b:
            continue
        gap = np.mean(list(b.values())) - np.mean(list(a.values()))
        levels = level if isinstance(level, tuple) else (level,)
        cells.append(
            {
                **{o: native(v) for o, v in zip(others, levels)},
                "gap": float(gap),
                f"{factor}={low}": float(np.mean(list(a.values()))),
                f"{factor}={high}": float(np.mean(list(b.values()))),
            }
        )
        for seed, vb in b.items():
            diffs += [vb - a[seed]] if seed in a else [vb - va for va in a.values()]
        diffs += [vb - va for seed, va in a.items() if seed not in b for vb in b.values()]
    return cells, diffs


def effect_label(factor: str) -> str:
    return {"population": "population", "dims": "mechanism dimensionality"}.get(factor, factor)  # mechanism: itself


def effect_key(factor: str) -> str:
    """The verdict's key: population_effect, dims_effect, es.sigma_effect."""
    return f"{factor}_effect"


def effect_verdict(table: pd.DataFrame, factor: str, value: str = BEST) -> dict[str, Any]:
    """Is the effect of `factor` (population, the mechanism or a further axis) robust to seed noise? docs/verdicts.md.

    Two levels are one comparison; with more (three mechanisms), every pair of levels is judged on its own, and
    the factor is robust when some pair is.
    """
    label = effect_label(factor)
    table = table.dropna(subset=[value])
    sd, sd_cells = pooled_sd(table, value)
    levels = sorted(table[factor].unique(), key=_level_order)
    result = {
        "gap": float("nan"),
        "spread": 2 * sd if sd_cells else float("nan"),
        "n_seeds": int(table["seed"].nunique()) if len(table) else 0,
        "cells": [],
        "value": value,
    }
    if len(levels) < 2:
        only = levels[0] if levels else "none"
        return {
            **result,
            "verdict": FEW,
            "sentence": f"{label}: only one level ({only}) in the data — nothing to compare.",
        }
    if len(levels) == 2:
        return _pair_verdict(table, factor, value, levels[0], levels[1], label, result)
    pairs = [
        _pair_verdict(table, factor, value, low, high, f"{_level(factor, high)} vs {_level(factor, low)}", result, True)
        for i, low in enumerate(levels)
        for high in levels[i + 1 :]
    ]
    verdicts_ = [p["verdict"] for p in pairs]
    verdict = ROBUST if ROBUST in verdicts_ else NOISE if NOISE in verdicts_ else FEW
    sentence = f"{label} ({len(levels)} levels): " + " ".join(p["sentence"] for p in pairs)
    return {**result, "verdict": verdict, "sentence": sentence, "pairs": pairs}


def _level_order(level):
    """Levels in their natural order; mechanisms by dimensionality first (1-D, 2-D, 2-D floor+risk)."""
    level = native(level)
    return (int(level.split("-", 1)[0]) if isinstance(level, str) and level[:1].isdigit() else 0, level)


def _level(factor: str, level) -> str:
    """A level as a verdict names it: 2-D, 2-D floor+risk, population 16, es.sigma 0.05."""
    if factor == "dims":
        return f"{native(level)}-D"
    return str(level) if factor == MECHANISM else f"{factor} {shown(level)}"


def _pair_verdict(
    table, factor: str, value: str, low, high, prefix: str, base: dict[str, Any], prefix_names_levels: bool = False
) -> dict[str, Any]:
    """One comparison of two levels: robust, within seed noise, or not enough seeds; the sentence starts `prefix`
    (which names the two levels already where `prefix_names_levels`)."""
    other = ", ".join(f for f in factors(table) if f != factor)
    result = {**base, "low": native(low), "high": native(high)}
    cells, diffs = _matched_differences(table, factor, value, low, high)
    if not cells:
        return {
            **result,
            "verdict": FEW,
            "sentence": f"{prefix}: no {other} level has runs at both {factor} {shown(low)} and {shown(high)}.",
        }
    gap = float(np.mean([c["gap"] for c in cells]))
    result.update(gap=gap, cells=cells)
    spread = result["spread"]
    if not np.isfinite(spread):
        pair = prefix if prefix_names_levels else f"{prefix} {shown(high)} vs {shown(low)}"
        sentence = f"{pair}: mean gap {gap:+.4f}, but no cell has ≥ 2 seeds to measure seed noise."
        return {**result, "verdict": FEW, "sentence": sentence}
    same_direction = all(d > 0 for d in diffs) or all(d < 0 for d in diffs)
    if same_direction and abs(gap) > spread:
        winner = _level(factor, high if gap > 0 else low)
        sentence = (
            f"{prefix}: {winner} wins — robust: every matched pair agrees and the mean gap {abs(gap):.4f} "
            f"exceeds 2 × pooled seed SD {spread:.4f} ({value})."
        )
        return {**result, "verdict": ROBUST, "sentence": sentence}
    why = (
        "matched pairs disagree in sign"
        if not same_direction
        else f"the mean gap {abs(gap):.4f} does not exceed 2 × pooled seed SD {spread:.4f}"
    )
    return {**result, "verdict": NOISE, "sentence": f"{prefix}: within seed noise — {why} ({value})."}


def effect_verdicts(table: pd.DataFrame, value: str = BEST) -> dict[str, dict]:
    """{population_effect, dims_effect, <axis>_effect per further axis}: each factor's verdict on `value`."""
    return {effect_key(f): effect_verdict(table, f, value) for f in factors(table)}
