"""What a run folder says: per-trial and per-cell tables, the grid, and the verdicts (docs/verdicts.md).

Reads only a run folder — study.json, loaded into the study definition, and
each trial's generations.jsonl — and answers the user's questions from
data: which cells win, whether the population and dimensionality effects
beat seed noise, and whether a cell is pinned at the ceiling; if so,
whether the rules cap the objective there (its upper bound) or the search
stopped below it. Effects are judged on the final re-evaluation when
present (the best of noisy evaluations is biased upward), and also on the
best objective. pandas only: the plots live in `plots`, the files in `summary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.base.sections import SummarySettings
from bilevel_tune.core import metrics as M
from bilevel_tune.report import landscape
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.run_folder import (
    STUDY_FILE,
    Cell,
    num,
    read_study_file,
    trial_name,
    trial_records,
)
from bilevel_tune.study_data.settings import is_setting_key

ROBUST, NOISE, FEW = "robust", "within seed noise", "not enough seeds"
CEILING, NO_CEILING = "ceiling", "no ceiling"
BOUND_TOL = 1e-3  # a best this close to its upper bound is capped by the rules
# a bare table's: the campaign's ceiling (a study's is its world's, `Study.ceiling`), and [summary] tol's default
DEFAULT_CEILING, DEFAULT_TOL = 0.25, SummarySettings().tol
# The grid's factors besides the seed (a study's further axes add theirs). The mechanism factor is `dims` (1-D vs
# 2-D) when each dimensionality has one set of searched rules, else `mechanism`, the set itself (2-D vs 2-D floor+risk).
BASE_FACTORS = ("population", "dims")
MECHANISM = "mechanism"
BOUND_BY = "bound_by/"  # bound_by/<rule>: the best candidate's upper bound with that rule at its best (its Assessment)

SEARCH_VS_GRID = "search_vs_grid"
BEST, FINAL = "best_objective", "final_objective"  # the two values verdicts are judged on


class SummaryError(ValueError):
    """A folder that is not a study run; the message is the one line the user sees."""


# -- reading a run folder ----------------------------------------------------------
@dataclass(frozen=True)
class TrialRecords:
    name: str  # the trial folder
    generations: list[dict[str, Any]]
    final: dict[str, Any] | None


def load_run(run_dir: Path) -> tuple[Study, dict[tuple, TrialRecords]]:
    """(the study as study.json records it, the records of every trial that wrote some, by cell key)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SummaryError(f"{run_dir} is not a folder")
    if not (run_dir / STUDY_FILE).is_file():
        raise SummaryError(
            f"{run_dir} is not a study run folder (no {STUDY_FILE}); give a folder made by python -m bilevel_tune.study"
        )
    try:
        study = Study.from_dict(read_study_file(run_dir)["study"])
    except (ValueError, KeyError, TypeError):
        raise SummaryError(f"{run_dir / STUDY_FILE} is not a bilevel_tune study file") from None
    trials = {}
    for name, (generations, final) in trial_records(run_dir).items():
        if generations or final:
            trials[Cell.key_of((generations or [final])[0])] = TrialRecords(name, generations, final)
    return study, trials


# -- tables -----------------------------------------------------------------------------
def trial_table(study: Study, trials: dict[tuple, TrialRecords]) -> pd.DataFrame:
    """One row per grid cell; missing and crashed trials are rows too (their status says which)."""
    return pd.DataFrame([_trial_row(study, cell, trials.get(cell.key)) for cell in study.cells()])


def _trial_row(study: Study, cell: Cell, trial: TrialRecords | None) -> dict[str, Any]:
    row = {
        "population": cell.population,
        "dims": cell.dims,
        MECHANISM: study.mechanisms.label(cell.optimize_params),
        "optimize_params": ",".join(cell.optimize_params),
        "seed": cell.seed,
        **{key: _cell_value(value) for key, value in cell.extra},  # a column per further axis
        "budget_generations": cell.generations,
    }
    if trial is None or not trial.generations:
        return {**row, "status": "missing", "generations": 0}
    gens, final, last = trial.generations, trial.final or {}, trial.generations[-1]
    best_gen = last[M.BEST_GENERATION]
    best_gen = best_gen if best_gen is not None and best_gen >= 0 else None
    best = _best_outcome(next((g for g in gens if g[M.GENERATION] == best_gen), None))
    return {
        **row,
        "trial": trial.name,
        "status": _status(final, len(gens), cell.generations),
        BEST: num(last[M.BEST_OBJECTIVE]),
        "best_generation": best_gen,
        "generations": len(gens),
        "final_sigma": num(last[M.SIGMA]),
        FINAL: num(final.get(M.FINAL_BEST)),
        "final_objective_std": num(final.get(M.FINAL_BEST_STD)),
        "final_mean_objective": num(final.get(M.FINAL_MEAN)),
        "gen0_objective": num(gens[0][M.OBJECTIVE]),
        "median_sec_per_gen": float(np.median([g[M.SEC_PER_GEN] for g in gens])),
        "evaluations": len(gens) * cell.population,  # inner-loop evaluations: ES generations × population
        "wall_s": float(sum(g[M.SEC_PER_GEN] for g in gens) + (final.get(M.SEC_FINAL) or 0.0)),
        "shards": int(last.get(M.SHARDS, 1)),
        "nodes": nodes_used(gens),
        "max_threads": max(g[M.THREADS_OS] for g in gens),
        "failed_candidates": sum(g[M.FAILED] for g in gens),
        M.UPPER_BOUND: num(best.get(M.UPPER_BOUND)),
        M.STOP_REASON: final.get(M.STOP_REASON, ""),
        **{f"diag_{k}": num(best.get(k)) for k in _diagnostic_keys(best, study.table.summary_diagnostics)},
        **{BOUND_BY + rule: num(value) for rule, value in (best.get("bound_by_rule") or {}).items()},
        **{k: v for k, v in last.items() if k.startswith((M.BEST_RULE, M.MEAN_RULE))},
    }


def nodes_used(gens: list[dict[str, Any]]) -> int:
    """The machines a trial's shards ran on, by address: Ray names a node anew in each session, so a trial resumed
    on the same machine counts once. Older records, without addresses: the most nodes one generation used."""
    shards = [s for g in gens for s in g.get(M.SHARD_DETAIL, [])]
    if shards and all(s.get(M.NODE_IP) for s in shards):
        return len({s[M.NODE_IP] for s in shards})
    return max((len({s[M.NODE] for s in g.get(M.SHARD_DETAIL, [])}) for g in gens), default=0) or 1


def _diagnostic_keys(outcome: dict[str, Any], declared: tuple[str, ...] | None) -> list[str]:
    """What the world declares its summary shows of an outcome (`summary_diagnostics`), else every number the
    recorded outcome holds beside the objective and its bound: its terms and diagnostics."""
    if declared is not None:
        return list(declared)
    skip = (M.OBJECTIVE, M.UPPER_BOUND, "failed", "bound_by_rule")
    return [k for k, v in outcome.items() if k not in skip and isinstance(v, (int, float)) and not isinstance(v, bool)]


def _cell_value(value):
    return ",".join(map(str, value)) if isinstance(value, tuple) else value


def factors(table: pd.DataFrame) -> list[str]:
    """The grid's factors a table has: population, the mechanism (dims, or the searched rules where two
    mechanisms share a dimensionality), and a column per further axis (a setting's key)."""
    return ["population", mechanism_factor(table), *(c for c in table.columns if is_setting_key(c))]


def mechanism_factor(table: pd.DataFrame) -> str:
    """`dims` while every dimensionality has one mechanism (the campaign's 1-D / 2-D), else `mechanism`."""
    if MECHANISM in table and len(table) and table.groupby("dims")[MECHANISM].nunique().max() > 1:
        return MECHANISM
    return "dims"


def _status(final: dict, recorded: int, budget: int) -> str:
    if final:
        return "stopped" if M.STOP_REASON in final else "complete"
    return "running or crashed" if recorded < budget else "no final"


def _best_outcome(row: dict | None) -> dict:
    """The generation's best candidate's outcome (its upper bound and diagnostics)."""
    if row is None:
        return {}
    objectives = np.array([num(o[M.OBJECTIVE]) for o in row[M.OUTCOMES]])
    return row[M.OUTCOMES][int(np.nanargmax(objectives))] if np.isfinite(objectives).any() else {}


def cell_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std (ddof 1) over seeds per cell: population × dims (× the further axes)."""
    values = [c for c in (BEST, FINAL, "best_generation", M.UPPER_BOUND, "median_sec_per_gen") if c in trials]
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


GENERATION_COLUMNS = (
    "generation", "best_so_far", "generation_best", "mean", "std", "sigma", "sec", "elapsed_s", "evaluations",
)  # fmt: skip


def generation_table(study: Study, trials: dict[tuple, TrialRecords]) -> pd.DataFrame:
    """One row per ES trial and generation: its best so far, the generation's best, mean and SD, σ, seconds, the
    seconds and inner-loop evaluations (ES generations × population) so far, and where the search was (the search
    mean's rules, `mean/<rule>`, and the generation's best candidate's, `generation_best/<rule>`, physical) — the
    curves, the search's paths and the shipped folders' summaries are drawn from it."""
    specs = study.rule_specs_by_name
    rows = []
    for cell in study.cells():
        t = trials.get(cell.key)
        if t is None or not t.generations:
            continue
        head = {
            "trial": trial_name(study, cell),
            "population": cell.population,
            MECHANISM: study.mechanisms.label(cell.optimize_params),
            "optimize_params": ",".join(cell.optimize_params),
            "seed": cell.seed,
            **{key: _cell_value(value) for key, value in cell.extra},
        }
        elapsed = 0.0
        for g in t.generations:
            elapsed += num(g[M.SEC_PER_GEN])
            rows.append(
                {
                    **head,
                    "generation": int(g[M.GENERATION]),
                    "best_so_far": num(g[M.BEST_OBJECTIVE]),
                    "generation_best": num(g[M.OBJECTIVE]),
                    "mean": num(g.get(M.OBJECTIVE_MEAN)),
                    "std": num(g.get(M.OBJECTIVE_STD)),
                    "sigma": num(g.get(M.SIGMA)),
                    "sec": num(g[M.SEC_PER_GEN]),
                    "elapsed_s": elapsed,
                    "evaluations": (int(g[M.GENERATION]) + 1) * cell.population,
                    **{M.MEAN_RULE + p: num(g.get(M.MEAN_RULE + p)) for p in cell.optimize_params},
                    **_generation_best(g, cell.optimize_params, specs),
                }
            )
    return pd.DataFrame(rows)


GENERATION_BEST = "generation_best/"  # generation_best/<rule>: the generation's best candidate, physical


def _generation_best(g: dict[str, Any], params: tuple[str, ...], specs) -> dict[str, float]:
    objectives = np.array([num(o[M.OBJECTIVE]) for o in g[M.OUTCOMES]])
    k = int(np.nanargmax(objectives)) if np.isfinite(objectives).any() else 0
    u = np.atleast_2d(np.array(g[M.CANDIDATES], dtype=float))[k]
    return {GENERATION_BEST + p: specs[p].to_physical(u[j]) for j, p in enumerate(params)}


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
        row = dict(zip([*axes, "population"], (_native(k) for k in keys)))
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


# -- verdicts --------------------------------------------------------------------------
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
                **{o: _native(v) for o, v in zip(others, levels)},
                "gap": float(gap),
                f"{factor}={low}": float(np.mean(list(a.values()))),
                f"{factor}={high}": float(np.mean(list(b.values()))),
            }
        )
        for seed, vb in b.items():
            diffs += [vb - a[seed]] if seed in a else [vb - va for va in a.values()]
        diffs += [vb - va for seed, va in a.items() if seed not in b for vb in b.values()]
    return cells, diffs


def _native(value):
    return value.item() if hasattr(value, "item") else value


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
    level = _native(level)
    return (int(level.split("-", 1)[0]) if isinstance(level, str) and level[:1].isdigit() else 0, level)


def _level(factor: str, level) -> str:
    """A level as a verdict names it: 2-D, 2-D floor+risk, population 16, es.sigma 0.05."""
    if factor == "dims":
        return f"{_native(level)}-D"
    return str(level) if factor == MECHANISM else f"{factor} {_shown(level)}"


def _pair_verdict(
    table, factor: str, value: str, low, high, prefix: str, base: dict[str, Any], prefix_names_levels: bool = False
) -> dict[str, Any]:
    """One comparison of two levels: robust, within seed noise, or not enough seeds; the sentence starts `prefix`
    (which names the two levels already where `prefix_names_levels`)."""
    other = ", ".join(f for f in factors(table) if f != factor)
    result = {**base, "low": _native(low), "high": _native(high)}
    cells, diffs = _matched_differences(table, factor, value, low, high)
    if not cells:
        return {
            **result,
            "verdict": FEW,
            "sentence": f"{prefix}: no {other} level has runs at both {factor} {_shown(low)} and {_shown(high)}.",
        }
    gap = float(np.mean([c["gap"] for c in cells]))
    result.update(gap=gap, cells=cells)
    spread = result["spread"]
    if not np.isfinite(spread):
        pair = prefix if prefix_names_levels else f"{prefix} {_shown(high)} vs {_shown(low)}"
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
    return {**result, "verdict": NOISE, "sentence": f"{prefix}: within seed noise — {why} ({value}); not a finding."}


def _shown(level) -> str:
    level = _native(level)
    return f"{level:g}" if isinstance(level, float) else str(level)


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
        if M.UPPER_BOUND in table and len(table) and table[M.UPPER_BOUND].isna().all():
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
    for key in ("best_generation", M.UPPER_BOUND, *[k for k in row.index if str(k).startswith("diag_")]):
        if key in row and pd.notna(row[key]):
            cell[key] = float(row[key])
    cell["capped_by"] = _capped_by(cell)
    capping = cap_rules(row, tol)
    if capping is not None:
        cell["cap_rules"] = capping
        cell["searching_them"] = _searching(table, row, capping)
    truth = landscape.ceiling_truth(cell, bests, ceiling, tol)
    if truth:
        cell["scan"] = truth
    return cell


def cap_rules(row: pd.Series, tol: float) -> dict[str, float] | None:
    """The fixed rules whose range holds a value that lifts the best candidate's upper bound above it (by more
    than `tol`), each with the highest bound it reaches; None when the records have no `bound_by_rule`."""
    bound = row.get(M.UPPER_BOUND)
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
    axes = "".join(f", {k} {_shown(v)}" for k, v in c.items() if is_setting_key(k))
    where = f"population {c['population']}, {c[MECHANISM]}, seed {c['seed']}{axes}"
    when = f" from generation {int(c['best_generation'])}" if "best_generation" in c else ""
    if M.UPPER_BOUND not in c:
        return f"{where}{when}: no upper bound recorded — cannot tell rules from search"
    shown = [f"{k.removeprefix('diag_').replace('_', ' ')} {c[k]:.3f}" for k in c if k.startswith("diag_")]
    diag = f"; {', '.join(shown)}" if shown else ""
    verdict = "the rules cap the objective there" if c["capped_by"] == "rules" else "the search stopped below the bound"
    scan = f"; {c['scan']}" if "scan" in c else ""
    return f"{where}{when}: upper bound {c[M.UPPER_BOUND]:.4f} — {verdict}{_cap_sentence(c)}{diag}{scan}"


def _capped_by(cell: dict) -> str:
    if M.UPPER_BOUND not in cell:
        return "unknown"
    return "rules" if cell[M.UPPER_BOUND] - cell[BEST] <= BOUND_TOL else "search"


def verdicts(
    table: pd.DataFrame,
    ceiling: float | None = DEFAULT_CEILING,
    tol: float = DEFAULT_TOL,
    value: str = BEST,
    bests: pd.DataFrame | None = None,
) -> dict[str, dict]:
    """{population_effect, dims_effect, <axis>_effect per further axis, ceiling}, each {verdict, gap, spread,
    n_seeds, cells, sentence}; with a rules scan (`bests`), also search_vs_grid."""
    out = {effect_key(f): effect_verdict(table, f, value) for f in factors(table)}
    if ceiling is not None:  # a world without a ceiling gets no ceiling verdict
        out["ceiling"] = ceiling_verdict(table, ceiling, tol, bests)
    grid = landscape.search_vs_grid(table, bests) if bests is not None else None
    if grid:
        out[SEARCH_VS_GRID] = grid
    return out
