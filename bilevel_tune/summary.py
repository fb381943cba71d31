"""The study summary: per-trial and per-cell tables, the PR's grid, verdicts, ceiling analysis, plots.

    python -m bilevel_tune.summary RUN_DIR

Reads only a run folder (study.json and each trial's generations.jsonl) and
answers the user's questions from data (DESIGN §8): which cells win,
whether the population and dimensionality effects beat seed noise, and
whether a cell is pinned at the ceiling — and if so, whether the rules cap
the objective there (its upper bound) or the search stopped below it.
Effects are judged on the final re-evaluation when present (the best of
noisy evaluations is biased upward) and also on the best objective.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune import metrics as M
from bilevel_tune.run_folder import GENERATIONS_FILE, STUDY_FILE, json_safe, read_records

ROBUST, NOISE, FEW = "robust", "within seed noise", "not enough seeds"
CEILING, NO_CEILING = "ceiling", "no ceiling"
BOUND_TOL = 1e-3  # a best this close to its upper bound is capped by the rules


class SummaryError(ValueError):
    """A folder that is not a study run; the message is the one line the user sees."""


# -- reading a run folder ----------------------------------------------------------
def load_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the study definition, one entry per trial folder with its records)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SummaryError(f"{run_dir} is not a folder")
    study_file = run_dir / STUDY_FILE
    if not study_file.is_file():
        raise SummaryError(
            f"{run_dir} is not a study run folder (no {STUDY_FILE}); give a folder made by python -m bilevel_tune.study"
        )
    try:
        study = json.loads(study_file.read_text())["study"]
    except (json.JSONDecodeError, KeyError):
        raise SummaryError(f"{study_file} is not a bilevel_tune study file") from None
    trials = []
    for path in sorted(run_dir.glob(f"*/{GENERATIONS_FILE}")):
        generations, final = read_records(path)
        if generations or final:
            trials.append({"trial": path.parent.name, "generations": generations, "final": final})
    return study, trials


def _cells(study: dict) -> list[dict[str, Any]]:
    table = (
        dict((p, g) for p, g in study["budget"]["generations"])
        if isinstance(study["budget"]["generations"], list)
        else None
    )
    return [
        {
            "population": p,
            "optimize_params": list(params),
            "seed": s,
            "budget": table[p] if table else study["budget"]["generations"],
        }
        for p in study["populations"]
        for params in study["optimize_params"]
        for s in study["seeds"]
    ]


def num(value) -> float:
    """A recorded number; JSON null (a NaN or a failure when written) reads as NaN."""
    return float("nan") if value is None else float(value)


def _best_outcome(row: dict) -> dict:
    objectives = np.array([np.nan if o["objective"] is None else o["objective"] for o in row["outcomes"]], dtype=float)
    return row["outcomes"][int(np.nanargmax(objectives))] if np.isfinite(objectives).any() else {}


def trial_table(study: dict, trials: list[dict]) -> pd.DataFrame:
    """One row per grid cell × seed; missing and crashed trials are rows too (status says which)."""
    by_key = {}
    for t in trials:
        first = (t["generations"] or [t["final"]])[0]
        by_key[(first["population"], tuple(first["optimize_params"]), first["seed"])] = t
    rows = []
    for cell in _cells(study):
        key = (cell["population"], tuple(cell["optimize_params"]), cell["seed"])
        row = {
            "population": cell["population"],
            "dims": len(cell["optimize_params"]),
            "optimize_params": ",".join(cell["optimize_params"]),
            "seed": cell["seed"],
            "budget_generations": cell["budget"],
        }
        t = by_key.get(key)
        if t is None or not t["generations"]:
            rows.append({**row, "status": "missing", "generations": 0})
            continue
        gens, final = t["generations"], t["final"] or {}
        last = gens[-1]
        best_gen = (
            last[M.BEST_GENERATION] if last[M.BEST_GENERATION] is not None and last[M.BEST_GENERATION] >= 0 else None
        )
        best_row = next((g for g in gens if g[M.GENERATION] == best_gen), None)
        best = _best_outcome(best_row) if best_row else {}
        bests = np.array([num(g[M.BEST_OBJECTIVE]) for g in gens])
        status = (
            "complete"
            if final and "stop_reason" not in final
            else ("stopped" if final else ("running or crashed" if len(gens) < cell["budget"] else "no final"))
        )
        row.update(
            trial=t["trial"],
            status=status,
            best_objective=num(last[M.BEST_OBJECTIVE]),
            best_generation=best_gen,
            generations=len(gens),
            final_sigma=num(last[M.SIGMA]),
            final_objective=num(final.get(M.FINAL + "best")),
            final_objective_std=num(final.get(M.FINAL + "best_std")),
            final_mean_objective=num(final.get(M.FINAL + "mean")),
            gen0_objective=num(gens[0][M.OBJECTIVE]),
            median_sec_per_gen=float(np.median([g[M.SEC_PER_GEN] for g in gens])),
            max_threads=max(g[M.THREADS_OS] for g in gens),
            failed_candidates=sum(g[M.FAILED] for g in gens),
            upper_bound=num(best.get(M.UPPER_BOUND)),
            exceeded_after_best=bool(np.isfinite(bests).any() and np.nanmax(bests) > num(last[M.BEST_OBJECTIVE])),
            stop_reason=final.get("stop_reason", ""),
            **{f"diag_{k}": num(best.get(k)) for k in M.DIAGNOSTICS},
            **{k: v for k, v in last.items() if k.startswith(M.BEST_RULE)},
        )
        rows.append(row)
    return pd.DataFrame(rows)


def cell_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std (ddof 1) over seeds per population × dims."""
    values = [
        c
        for c in ("best_objective", "final_objective", "best_generation", "upper_bound", "median_sec_per_gen")
        if c in trials
    ]
    done = trials[trials.get("generations", 0) > 0]
    if done.empty:
        return pd.DataFrame()
    grouped = done.groupby(["population", "dims"])[values]
    out = grouped.mean().add_suffix("_mean").join(grouped.std(ddof=1).add_suffix("_std"))
    out["n_seeds"] = done.groupby(["population", "dims"])["seed"].nunique()
    return out.reset_index().astype({"population": int, "dims": int, "n_seeds": int})


def grid_table(trials: pd.DataFrame, value: str = "best_objective") -> pd.DataFrame:
    """The PR's grid: rows population × seed, columns 1-D / 2-D / …"""
    done = trials[trials.get("generations", 0) > 0]
    if done.empty or value not in done:
        return pd.DataFrame()
    grid = done.pivot_table(index=["population", "seed"], columns="dims", values=value, aggfunc="first")
    grid.columns = [f"{d}-D" for d in grid.columns]
    return grid.reset_index()


# -- verdicts --------------------------------------------------------------------
def pooled_sd(table: pd.DataFrame, value: str) -> tuple[float, int]:
    """Pooled seed SD (ddof 1) over cells with ≥ 2 seeds; (nan, 0) when there are none."""
    num, den, cells = 0.0, 0, 0
    for _, group in table.groupby(["population", "dims"]):
        v = group[value].dropna()
        if len(v) >= 2:
            num += (len(v) - 1) * v.var(ddof=1)
            den += len(v) - 1
            cells += 1
    return (float(np.sqrt(num / den)) if den else float("nan")), cells


def effect_verdict(table: pd.DataFrame, factor: str, value: str = "best_objective") -> dict[str, Any]:
    """Is the effect of `factor` (population or dims) robust to seed noise? DESIGN §8."""
    other = "dims" if factor == "population" else "population"
    table = table.dropna(subset=[value])
    sd, sd_cells = pooled_sd(table, value)
    levels = sorted(table[factor].unique())
    n_seeds = int(table["seed"].nunique()) if len(table) else 0
    base = {
        "gap": float("nan"),
        "spread": 2 * sd if sd_cells else float("nan"),
        "n_seeds": n_seeds,
        "cells": [],
        "value": value,
    }
    label = "population" if factor == "population" else "mechanism dimensionality"
    if len(levels) < 2:
        return {
            **base,
            "verdict": FEW,
            "sentence": f"{label}: only one level ({levels[0] if levels else 'none'}) in the data — nothing to compare.",
        }
    low, high = levels[0], levels[-1]
    gaps, diffs, cells = [], [], []
    for level, group in table.groupby(other):
        a = dict(zip(group[group[factor] == low]["seed"], group[group[factor] == low][value]))
        b = dict(zip(group[group[factor] == high]["seed"], group[group[factor] == high][value]))
        if not a or not b:
            continue
        gaps.append(np.mean(list(b.values())) - np.mean(list(a.values())))
        cells.append(
            {
                other: int(level),
                "gap": float(gaps[-1]),
                f"{factor}={low}": float(np.mean(list(a.values()))),
                f"{factor}={high}": float(np.mean(list(b.values()))),
            }
        )
        for seed, vb in b.items():  # same seed where both have it, else every cross pair
            diffs += [vb - a[seed]] if seed in a else [vb - va for va in a.values()]
        diffs += [b_val - va for seed, va in a.items() if seed not in b for b_val in b.values()]
    if not gaps:
        return {
            **base,
            "verdict": FEW,
            "sentence": f"{label}: no {other} level has runs at both {factor} {low} and {high}.",
        }
    gap = float(np.mean(gaps))
    result = {**base, "gap": gap, "cells": cells}
    if not sd_cells:
        return {
            **result,
            "verdict": FEW,
            "sentence": f"{label} {high} vs {low}: mean gap {gap:+.4f}, but no cell has ≥ 2 seeds to measure seed noise.",
        }
    same_direction = all(d > 0 for d in diffs) or all(d < 0 for d in diffs)
    spread = 2 * sd
    better = high if gap > 0 else low
    better = f"{better}-D" if factor == "dims" else f"{factor} {better}"
    if same_direction and abs(gap) > spread:
        sentence = f"{label}: {better} wins — robust: every matched pair agrees and the mean gap {abs(gap):.4f} exceeds 2 × pooled seed SD {spread:.4f} ({value})."
        return {**result, "verdict": ROBUST, "sentence": sentence}
    why = (
        "matched pairs disagree in sign"
        if not same_direction
        else f"the mean gap {abs(gap):.4f} does not exceed 2 × pooled seed SD {spread:.4f}"
    )
    return {**result, "verdict": NOISE, "sentence": f"{label}: within seed noise — {why} ({value}); not a finding."}


def ceiling_verdict(table: pd.DataFrame, ceiling: float = 0.25, tol: float = 1e-4) -> dict[str, Any]:
    """Cells whose best sits within `tol` of `ceiling` and was never exceeded afterwards."""
    hits = table[(table["best_objective"] - ceiling).abs() <= tol] if "best_objective" in table else table.iloc[0:0]
    if "exceeded_after_best" in hits:
        hits = hits[~hits["exceeded_after_best"].astype(bool)]
    cells = []
    for _, r in hits.iterrows():
        cell = {
            "population": int(r["population"]),
            "dims": int(r["dims"]),
            "seed": int(r["seed"]),
            "best_objective": float(r["best_objective"]),
        }
        for key in ("best_generation", "upper_bound", *[f"diag_{k}" for k in M.DIAGNOSTICS]):
            if key in r and pd.notna(r[key]):
                cell[key] = float(r[key])
        cell["capped_by"] = _capped_by(cell)
        cells.append(cell)
    base = {
        "gap": float("nan"),
        "spread": float("nan"),
        "n_seeds": int(table["seed"].nunique()) if len(table) else 0,
        "threshold": ceiling,
        "tol": tol,
    }
    if not cells:
        top = (
            float(table["best_objective"].max())
            if "best_objective" in table and table["best_objective"].notna().any()
            else float("nan")
        )
        return {
            **base,
            "verdict": NO_CEILING,
            "cells": [],
            "sentence": f"ceiling: no cell's best sits at {ceiling:.4f} (± {tol:g}); the highest best is {top:.4f}.",
        }
    parts = []
    for c in cells:
        where = f"population {c['population']}, {c['dims']}-D, seed {c['seed']}"
        when = f" from generation {int(c['best_generation'])}" if "best_generation" in c else ""
        if "upper_bound" in c:
            diag = ""
            if "diag_requested_fraction" in c:
                diag = f"; requested fraction {c['diag_requested_fraction']:.3f}, pressure {c['diag_pressure']:.3f}, flow penalty {c['diag_flow_penalty']:.3f}, quota penalty {c['diag_quota_penalty']:.3f}"
            verdict = (
                "the rules cap the objective there"
                if c["capped_by"] == "rules"
                else "the search stopped below the bound"
            )
            parts.append(f"{where}{when}: upper bound {c['upper_bound']:.4f} — {verdict}{diag}")
        else:
            parts.append(f"{where}{when}: no upper bound recorded — cannot tell rules from search")
    sentence = f"ceiling: {len(cells)} run(s) pinned at {ceiling:.4f} and never exceeded — " + "; ".join(parts) + "."
    return {**base, "verdict": CEILING, "cells": cells, "sentence": sentence}


def _capped_by(cell: dict) -> str:
    if "upper_bound" not in cell:
        return "unknown"
    return "rules" if cell["upper_bound"] - cell["best_objective"] <= BOUND_TOL else "search"


def verdicts(
    table: pd.DataFrame, ceiling: float = 0.25, tol: float = 1e-4, value: str = "best_objective"
) -> dict[str, dict]:
    """{population_effect, dims_effect, ceiling}, each {verdict, gap, spread, n_seeds, cells, sentence}."""
    return {
        "population_effect": effect_verdict(table, "population", value),
        "dims_effect": effect_verdict(table, "dims", value),
        "ceiling": ceiling_verdict(table, ceiling, tol),
    }


# -- writing ------------------------------------------------------------------------
INTEGER_COLUMNS = {
    "population",
    "dims",
    "seed",
    "generations",
    "best_generation",
    "max_threads",
    "n_seeds",
    "budget_generations",
    "failed_candidates",
}


def _cell(column: str, value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if column in INTEGER_COLUMNS and isinstance(value, (int, float, np.integer, np.floating)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{value:.4f}"
    return str(value)


def _markdown(df: pd.DataFrame) -> str:
    """Markdown with integers as integers and measured values to 4 decimals (tabulate would float every cell of a mixed row)."""
    if df.empty:
        return "(no data)"
    text = pd.DataFrame({c: [_cell(c, v) for v in df[c]] for c in df.columns})
    return text.to_markdown(index=False, disable_numparse=True)


def summarise(run_dir: Path) -> dict[str, Any]:
    study, trials = load_run(run_dir)
    if not trials:
        raise SummaryError(f"{run_dir} holds no trial records yet ({GENERATIONS_FILE}); nothing to summarise")
    table = trial_table(study, trials)
    done = table[table["generations"] > 0]
    ceiling, tol = study.get("ceiling", 0.25), study.get("tol", 1e-4)
    on_best = verdicts(done, ceiling, tol, "best_objective")
    has_final = "final_objective" in done and done["final_objective"].notna().any()
    on_final = verdicts(done, ceiling, tol, "final_objective") if has_final else None
    return {
        "study": study,
        "trials": table,
        "cells": cell_table(table),
        "grid": grid_table(table),
        "verdicts_best": on_best,
        "verdicts_final": on_final,
    }


def render(s: dict[str, Any]) -> str:
    study, table = s["study"], s["trials"]
    smoke = (
        " — SMOKE-BUDGET: verdicts below say nothing about the science"
        if study.get("budget_name", "full") != "full"
        else ""
    )
    lines = [
        f"# Study {study['name']} (budget {study.get('budget_name', 'full')}, inner loop {study.get('inner', 'appo')}){smoke}",
        "",
    ]
    lines += [
        "## Best objective grid (rows population × seed, columns mechanism dimensionality)",
        "",
        _markdown(s["grid"]),
        "",
    ]
    cols = [
        c
        for c in (
            "population",
            "dims",
            "seed",
            "status",
            "best_objective",
            "best_generation",
            "generations",
            "final_objective",
            "final_objective_std",
            "gen0_objective",
            "upper_bound",
            "final_sigma",
            "median_sec_per_gen",
            "max_threads",
        )
        if c in table
    ]
    lines += ["## Trials", "", _markdown(table[cols]), ""]
    lines += ["## Cells (mean ± std over seeds)", "", _markdown(_mean_pm_std(s["cells"])), ""]
    missing = table[table["status"] != "complete"]
    if len(missing):
        lines += [
            f"Not complete: {len(missing)} trial(s): "
            + "; ".join(
                f"pop {r.population} {r.dims}-D seed {r.seed}: {r.status}"
                + (f" ({r.stop_reason})" if isinstance(getattr(r, "stop_reason", ""), str) and r.stop_reason else "")
                for r in missing.itertuples()
            ),
            "",
        ]
    primary = s["verdicts_final"] or s["verdicts_best"]
    basis = "final re-evaluation" if s["verdicts_final"] else "best objective"
    lines += [f"## Verdicts (effects on the {basis}){smoke}", ""]
    lines += [f"- {primary[k]['sentence']}" for k in ("population_effect", "dims_effect")]
    lines += [f"- {s['verdicts_best']['ceiling']['sentence']}"]
    if s["verdicts_final"]:
        for k in ("population_effect", "dims_effect"):
            a, b = s["verdicts_final"][k]["verdict"], s["verdicts_best"][k]["verdict"]
            if a != b:
                lines.append(
                    f"- selection bias: the {k.replace('_', ' ')} is '{b}' on the best objective but '{a}' on the final re-evaluation; trust the re-evaluation."
                )
    return "\n".join(lines)


def _mean_pm_std(cells: pd.DataFrame) -> pd.DataFrame:
    if cells.empty:
        return cells
    out = cells[["population", "dims", "n_seeds"]].copy()
    for col in cells.columns:
        if col.endswith("_mean"):
            name = col.removesuffix("_mean")
            out[name] = [
                f"{m:.4f} ± {sd:.4f}" if np.isfinite(sd) else f"{m:.4f}"
                for m, sd in zip(cells[col], cells[name + "_std"])
            ]
    return out


def write_summary(run_dir: Path, plots: bool = True) -> str:
    """Write summary.md, trials.csv, cells.csv, grid.csv, verdicts.json (and plots) into the run folder."""
    run_dir = Path(run_dir)
    s = summarise(run_dir)
    text = render(s)
    (run_dir / "summary.md").write_text(text + "\n")
    s["trials"].to_csv(run_dir / "trials.csv", index=False)
    s["cells"].to_csv(run_dir / "cells.csv", index=False)
    s["grid"].to_csv(run_dir / "grid.csv", index=False)
    (run_dir / "verdicts.json").write_text(
        json.dumps(json_safe({"best_objective": s["verdicts_best"], "final_objective": s["verdicts_final"]}), indent=2)
    )
    if plots:
        from bilevel_tune import plots as plotting

        plotting.write_plots(run_dir)
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m bilevel_tune.summary RUN_DIR", file=sys.stderr)
        return 2
    try:
        print(write_summary(Path(argv[0])))
    except SummaryError as err:
        print(f"bilevel_tune.summary: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
