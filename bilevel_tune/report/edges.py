"""The range edges (docs/verdicts.md): a searched rule whose runs' final search means, or whose scans' bests, end
within one grid spacing of its range's limit — the range, not the objective, may be what stops the search there.
pandas only.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.report.section import Section
from bilevel_tune.study_data.settings import plain

EDGE_POINTS = 21  # a study without a scan measures "one grid spacing" as a 21-point scan's


def edge_line(edge: dict[str, Any]) -> str:
    """An edge as the Answers' one line."""
    parts = [
        f"{edge[k]} of {edge[k + '_of']} {label}"
        for k, label in (("means", "search means"), ("scans", "scans' bests"))
        if edge[k + "_of"]
    ]
    return (
        f"edge: {edge['rule']} at its {edge['side']} limit {plain(edge['limit'])} in {' and '.join(parts)} "
        f"(within one grid spacing, {edge['spacing']:.4g}): widen its range to see past it."
    )


def edges(design, trials: pd.DataFrame, bests: pd.DataFrame) -> list[dict[str, Any]]:
    """Each searched rule's limit that its runs' final search means, or its scans' bests, end at (within one grid
    spacing), with how many did: a range edge that may be what stops the search."""
    points = design.scan or EDGE_POINTS
    out = []
    searched = dict.fromkeys(name for params in design.optimize_params for name in params)
    for name in searched:
        spec = design.rule_specs_by_name[name]
        spacing = spec.span / (points - 1)
        means = trials.get(metrics.MEAN_RULE + name, pd.Series(dtype=float)).dropna()
        scan = _scan_values(bests, name)
        for side, limit in (("lower", spec.low), ("upper", spec.high)):
            at_mean = int((means.sub(limit).abs() <= spacing + 1e-12).sum())
            at_scan = int((scan.sub(limit).abs() <= spacing + 1e-12).sum())
            if at_mean * 2 > len(means) or at_scan * 2 > len(scan):  # most of them: a pattern, not one run
                out.append(
                    {
                        "rule": name, "side": side, "limit": limit, "spacing": spacing,
                        "means": at_mean, "means_of": len(means), "scans": at_scan, "scans_of": len(scan),
                    }
                )  # fmt: skip
    return out


def _scan_values(bests: pd.DataFrame, name: str) -> pd.Series:
    """The scans' best points' values of one rule, from their `scan_best_rules` ("name=value, ...")."""
    if bests.empty:
        return pd.Series(dtype=float)
    values = []
    for text in bests["scan_best_rules"]:
        for part in str(text).split(", "):
            rule, _, value = part.partition("=")
            if rule == name:
                values.append(float(value))
    return pd.Series(values, dtype=float)


SECTION = Section("edges", compute=lambda s: tuple(edges(s.design, s.trials, s.scan_bests)))  # the Answers' lines
