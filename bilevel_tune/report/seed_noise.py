"""The seed-noise verdicts (docs/verdicts.md): the design's descriptive rule, kept beside the decided answers — an
effect is robust when every matched pair of runs agrees in sign and the mean gap exceeds 2 × the seed SD pooled
over the cells; within seed noise otherwise; not enough seeds without two in a cell. pandas only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.core.outer import label_of
from bilevel_tune.report.ceiling import ceiling_verdict
from bilevel_tune.report.columns import (
    BEST,
    DEFAULT_CEILING,
    DEFAULT_TOL,
    FINAL,
    MECHANISM,
    OPTIMIZER,
    SEARCH_VS_GRID,
    factors,
    finished,
    native,
    shown,
)
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.verdicts import family

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


def verdicts(
    table: pd.DataFrame,
    ceiling: float | None = DEFAULT_CEILING,
    tol: float = DEFAULT_TOL,
    value: str = BEST,
    bests: pd.DataFrame | None = None,
) -> dict[str, dict]:
    """{population_effect, dims_effect, <axis>_effect per further axis, ceiling}, each {verdict, gap, spread,
    n_seeds, cells, sentence}; with a rules scan (`bests`), also search_vs_grid."""
    out = effect_verdicts(table, value)
    if ceiling is not None:  # a world without a ceiling gets no ceiling verdict
        out["ceiling"] = ceiling_verdict(table, ceiling, tol, bests)
    grid = search_vs_grid(table, bests) if bests is not None else None
    if grid:
        out[SEARCH_VS_GRID] = grid
    return out


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


def is_effect(key: str) -> bool:
    return key.endswith("_effect")


def _verdicts_best(s: Summary) -> dict[str, dict]:
    return verdicts(finished(s.trials), s.design.ceiling, s.design.summary.tol, BEST, s.scan_bests)


def _verdicts_final(s: Summary) -> dict[str, dict] | None:
    done = finished(s.trials)
    has_final = FINAL in done and done[FINAL].notna().any()
    return verdicts(done, s.design.ceiling, s.design.summary.tol, FINAL) if has_final else None


def primary(s: Summary) -> dict[str, dict]:
    """The verdicts that count: effects on the final re-evaluation when there is one, the ceiling on the best."""
    first = s.verdicts_final or s.verdicts_best
    return {k: (first[k] if is_effect(k) else v) for k, v in s.verdicts_best.items()}


def decided_in_answers(s: Summary, key: str) -> str:
    """Where the Answers decide the factor of a descriptive verdict (`population_effect`): ' Decided in the Answers:
    <row>: <answer>.' for its main effect, else its simple effects — the one verdict per comparison; '' where the
    Answers decide none of it."""
    factor = {"dims": family.MECHANISM, "mechanism": family.MECHANISM}.get(key[: -len("_effect")], key[: -len("_effect")])
    rows = [r for r in s.answers.rows if r.hypothesis.kind != family.INTERACTION and r.hypothesis.factor == factor
            and getattr(r.hypothesis, "at", None) is None]  # fmt: skip
    rows = [r for r in rows if r.hypothesis.kind == family.MAIN] or rows
    if not rows or s.answers.decisions is None:
        return ""
    texts = s.answers.by_key()
    said = "; ".join(f"{r.hypothesis.key}: {texts[r.hypothesis.key].text(s.answers.decisions).split(';')[0]}" for r in rows)
    return f" Decided in the Answers: {said}."


def verdict_lines(s: Summary) -> list[str]:
    """The effects' descriptive verdicts, one sentence each with the Answers' decision on its factor, then where
    the best objective and the final re-evaluation disagree (selection bias)."""
    lines = [v["sentence"] + decided_in_answers(s, k) for k, v in primary(s).items() if is_effect(k)]
    if s.verdicts_final:
        for k in (k for k in s.verdicts_final if is_effect(k)):
            final, best = s.verdicts_final[k]["verdict"], s.verdicts_best[k]["verdict"]
            if final != best:
                lines.append(
                    f"selection bias: the {k.replace('_', ' ')} is '{best}' on the best objective but '{final}' "
                    "on the final re-evaluation; trust the re-evaluation."
                )
    return lines


def _markdown(s: Summary) -> list[str]:
    basis = "final re-evaluation" if s.verdicts_final else "best objective"
    label = f" — {s.budget_note}" if s.budget_note else ""
    return [
        f"## Seed-noise verdicts (effects on the {basis}){label}",
        "",
        "The design's descriptive rule, below the answers: an effect is robust when every matched pair agrees in "
        "sign and the mean gap exceeds 2 × the seed SD pooled over all cells. It describes; the Answers decide — "
        "each line names the Answers' decision on its factor, the one verdict per comparison.",
        "",
        *[f"- {line}" for line in verdict_lines(s)],
    ]


VERDICTS_BEST = Section("verdicts_best", compute=_verdicts_best)
VERDICTS_FINAL = Section("verdicts_final", compute=_verdicts_final)
SECTION = Section(
    "seed_noise", markdown=_markdown,
    record=lambda s: {"best_objective": s.verdicts_best, "final_objective": s.verdicts_final},
)  # fmt: skip
