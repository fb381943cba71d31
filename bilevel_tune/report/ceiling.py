"""The ceiling (docs/verdicts.md): the runs whose best sits at the value the study looks for — the world's (fresh
water's 0.25), or `[summary] ceiling` — and whether the rules cap the objective there (its upper bound) or the
search stopped short; its verdict sentence, and the Answers' table of the runs at it or within their noise of it.
pandas only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.report.columns import BEST, BOUND_BY, DEFAULT_CEILING, DEFAULT_TOL, MECHANISM, markdown_table, shown
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data.run_folder import CEILING_CSV, trial_name
from bilevel_tune.study_data.run_tables import scan_key
from bilevel_tune.study_data.settings import is_setting_key

CEILING, NO_CEILING = "ceiling", "no ceiling"
BOUND_TOL = 1e-3  # a best this close to its upper bound is capped by the rules


def ceiling_verdict(
    table: pd.DataFrame, ceiling: float = DEFAULT_CEILING, tol: float = DEFAULT_TOL, bests: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Runs whose best sits within `tol` of `ceiling` (the best so far is a running maximum: it stays there).

    With a rules scan (`bests`), each such run also gets the ground truth: whether any rule set on
    the grid rises above the band.
    """
    hits = table[(table[BEST] - ceiling).abs() <= tol] if BEST in table else table.iloc[0:0]
    bests = pd.DataFrame() if bests is None else bests
    cells = [_ceiling_cell(r, bests, ceiling, tol, table) for _, r in hits.iterrows()]
    result = {
        "gap": float("nan"),
        "spread": float("nan"),
        "n_seeds": int(table["seed"].nunique()) if len(table) else 0,
        "threshold": ceiling,
        "tol": tol,
        "cells": cells,
    }
    if not cells:
        top = float(table[BEST].max()) if BEST in table and table[BEST].notna().any() else float("nan")
        sentence = f"ceiling: no cell's best sits at {ceiling:.4f} (± {tol:g}); the highest best is {top:.4f}."
        if metrics.UPPER_BOUND in table and len(table) and table[metrics.UPPER_BOUND].isna().all():
            sentence += " No upper bound of the objective is known in this world: the rules scan is the ground truth."
        return {**result, "verdict": NO_CEILING, "sentence": sentence}
    parts = "; ".join(_ceiling_part(c) for c in cells)
    sentence = f"ceiling: {len(cells)} run(s) pinned at {ceiling:.4f} — {parts}."
    return {**result, "verdict": CEILING, "sentence": sentence}


def _ceiling_cell(
    row: pd.Series, bests: pd.DataFrame, ceiling: float, tol: float, table: pd.DataFrame
) -> dict[str, Any]:
    cell = {k: int(row[k]) for k in ("population", "dims", "seed")}
    cell["optimize_params"] = row.get("optimize_params", "")
    cell[MECHANISM] = row.get(MECHANISM, f"{cell['dims']}-D")
    cell.update({k: row[k] for k in row.index if is_setting_key(k)})  # the further axes' values
    cell[BEST] = float(row[BEST])
    for key in ("best_generation", metrics.UPPER_BOUND, *[k for k in row.index if str(k).startswith("diag_")]):
        if key in row and pd.notna(row[key]):
            cell[key] = float(row[key])
    cell["capped_by"] = _capped_by(cell)
    capping = cap_rules(row, tol)
    if capping is not None:
        cell["cap_rules"] = capping
        cell["searching_them"] = _searching(table, row, capping)
    truth = ceiling_truth(cell, bests, ceiling, tol)
    if truth:
        cell["scan"] = truth
    return cell


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


def cap_rules(row: pd.Series, tol: float) -> dict[str, float] | None:
    """The fixed rules whose range holds a value that lifts the best candidate's upper bound above it (by more
    than `tol`), each with the highest bound it reaches; None when the records have no `bound_by_rule`."""
    bound = row.get(metrics.UPPER_BOUND)
    searched = str(row.get("optimize_params", "")).split(",")
    columns = [c for c in row.index if c.startswith(BOUND_BY) and pd.notna(row[c])]
    if not columns or bound is None or pd.isna(bound):
        return None
    lifted = {c.removeprefix(BOUND_BY): float(row[c]) for c in columns if c.removeprefix(BOUND_BY) not in searched}
    return {rule: value for rule, value in lifted.items() if value > bound + tol}


def _searching(table: pd.DataFrame, row: pd.Series, rules: dict[str, float]) -> list[dict[str, Any]]:
    """The runs of the same population, seed and further axes that search one of `rules`: their best objectives."""
    same = np.logical_and.reduce(
        [table[k] == row[k] for k in ("population", "seed", *(c for c in table.columns if is_setting_key(c)))]
    )
    out = []
    for _, other in table[same].iterrows():
        searched = str(other.get("optimize_params", "")).split(",")
        if any(rule in searched for rule in rules) and pd.notna(other.get(BEST)):
            out.append({MECHANISM: other.get(MECHANISM, f"{other['dims']}-D"), BEST: float(other[BEST])})
    return out


def _cap_sentence(c: dict[str, Any]) -> str:
    """Which fixed rules move the cap, and whether the runs that search one of them got above it."""
    if "cap_rules" not in c:
        return ""
    if not c["cap_rules"]:
        return "; no fixed rule's range lifts the bound"
    rules = ", ".join(f"{rule} (bound up to {value:.4f} over its range)" for rule, value in c["cap_rules"].items())
    text = f"; the cap is set by the fixed rule(s) {rules}"
    if not c["searching_them"]:
        return text + "; no run searches them"
    runs = ", ".join(f"{r[MECHANISM]} {r[BEST]:.4f}" for r in c["searching_them"])
    lifted = any(r[BEST] > c[BEST] + DEFAULT_TOL for r in c["searching_them"])
    return text + f"; searching them {'lifts' if lifted else 'does not lift'} the best ({runs})"


def _ceiling_part(c: dict[str, Any]) -> str:
    axes = "".join(f", {k} {shown(v)}" for k, v in c.items() if is_setting_key(k))
    where = f"population {c['population']}, {c[MECHANISM]}, seed {c['seed']}{axes}"
    when = f" from generation {int(c['best_generation'])}" if "best_generation" in c else ""
    if metrics.UPPER_BOUND not in c:
        return f"{where}{when}: no upper bound recorded — cannot tell rules from search"
    shown = [f"{k.removeprefix('diag_').replace('_', ' ')} {c[k]:.3f}" for k in c if k.startswith("diag_")]
    diag = f"; {', '.join(shown)}" if shown else ""
    verdict = "the rules cap the objective there" if c["capped_by"] == "rules" else "the search stopped below the bound"
    scan = f"; {c['scan']}" if "scan" in c else ""
    return f"{where}{when}: upper bound {c[metrics.UPPER_BOUND]:.4f} — {verdict}{_cap_sentence(c)}{diag}{scan}"


def _capped_by(cell: dict) -> str:
    if metrics.UPPER_BOUND not in cell:
        return "unknown"
    return "rules" if cell[metrics.UPPER_BOUND] - cell[BEST] <= BOUND_TOL else "search"




# -- the Answers' table of the runs at it ------------------------------------------------------------------
@dataclass(frozen=True)
class Ceiling:
    """The ceiling the summary looks for (None: the world names none) and the runs at it or near it."""

    value: float | None
    rows: pd.DataFrame

    def line(self) -> str | None:
        """The Answers' one line; None for a world without a ceiling."""
        if self.value is None:
            return None
        rows = self.rows
        if rows.empty:
            return f"ceiling {self.value:.4f}: no run's best is at it or within its own evaluation's noise of it."
        causes = rows["cause"].value_counts()
        by = ", ".join(f"{n} by the {cause}" for cause, n in causes.items())
        return f"ceiling {self.value:.4f}: {len(rows)} run(s) at it or within their noise of it ({by}): the table below."


def ceiling_section(s: Summary) -> Ceiling:
    ceiling = s.design.ceiling
    rows = ceiling_table(s.design, s.store.trial_rows, s.generations, s.scan_bests, ceiling) if ceiling is not None else pd.DataFrame()
    return Ceiling(ceiling, rows)


def noise_band(row: pd.Series, tol: float) -> float:
    """How far from the ceiling a run's best may sit and still be at it: two SDs of its best candidate's own
    evaluation (the spread of its final re-evaluation), at least `tol`."""
    sd = row.get("final_objective_std")
    return max(tol, 2 * float(sd)) if sd is not None and pd.notna(sd) else tol


def ceiling_table(design, trials: dict[tuple, pd.Series], generations: pd.DataFrame, bests: pd.DataFrame, ceiling: float):
    """One row per ES run (its trials table row by cell key) whose best is at the ceiling or within its noise of it."""
    tol = design.summary.tol
    rows = []
    for cell in design.cells:
        row = trials.get(cell.key)
        if row is None or not row.get("generations", 0):
            continue
        band = noise_band(row, tol)
        best = row.get(BEST)
        if best is None or pd.isna(best) or abs(float(best) - ceiling) > band:
            continue
        bound = row.get(metrics.UPPER_BOUND)
        capped = cap_rules(row, band)
        rows.append(
            {
                "run": trial_name(design, cell),
                "best": float(best),
                "± noise": band,
                "first generation": _first_near(generations, trial_name(design, cell), ceiling - band),
                "upper bound": float(bound) if bound is not None and pd.notna(bound) else float("nan"),
                "cause": _cause(best, bound, band),
                "fixed rules that set it": ", ".join(f"{k} (bound up to {v:.4f})" for k, v in capped.items())
                if capped
                else "–",
                "scan best": _scan_best(bests, row),
            }
        )
    return pd.DataFrame(rows)


def _cause(best, bound, band: float) -> str:
    if bound is None or pd.isna(bound):
        return "unknown (no upper bound in this world)"
    return "rules" if float(bound) - float(best) <= band else "search"


def _first_near(generations: pd.DataFrame, trial, level: float) -> float:
    """The first generation whose best so far reached `level`."""
    if generations.empty or not isinstance(trial, str):
        return float("nan")
    rows = generations[(generations["trial"] == trial) & (generations["best_so_far"] >= level)]
    return float(rows["generation"].min()) if not rows.empty else float("nan")


def _scan_best(bests: pd.DataFrame, row: pd.Series) -> float:
    if bests.empty:
        return float("nan")
    match = bests[(bests["optimize_params"] == row.get("optimize_params")) & (bests["seed"] == row.get("seed"))]
    return float(match["scan_best"].iloc[0]) if not match.empty else float("nan")


def _markdown(s: Summary) -> list[str]:
    """The runs at the ceiling, where there are any: their table and how to read its cause."""
    c = s.ceiling
    if c.value is None or c.rows.empty:
        return []
    return [
        f"## Ceiling {c.value:.4f}: the runs at it or within their own evaluation's noise of it (two SDs of "
        "their final re-evaluation)",
        "",
        "Cause: the rules when the run's upper bound — the best any action could earn, day by day — is within "
        "that noise of its best (the rules cap the objective there), else the search stopped short.",
        "",
        markdown_table(c.rows),
        "",
    ]


SECTION = Section("ceiling", compute=ceiling_section, markdown=_markdown,
                  tables=lambda s: {CEILING_CSV: s.ceiling.rows} if not s.ceiling.rows.empty else {})  # fmt: skip
