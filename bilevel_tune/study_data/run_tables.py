"""A run's records as tables, the views its store (`run_store`) keeps of them: one row per grid cell
(`trial_table`, trials.csv), one per ES trial and generation (`generation_table`, generations.csv.gz), one per
scan and grid point (`scan_table`, scan.csv) with each scan's best (`scan_bests`) and each trial's regret against
it (`add_regret`). Their column names are the summary's vocabulary (`report.columns` reads them from here).

Made from the records keyed by cell (`RunStore.trials`), never by a folder's name or a row's place; a shipped
folder's tables are read as they were written. pandas, no Ray.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.core.scan import spacing_label
from bilevel_tune.study_data.incumbents import generation_rows
from bilevel_tune.study_data.run_folder import Cell, num, trial_name
from bilevel_tune.study_data.settings import is_setting_key

BEST, FINAL = "best_objective", "final_objective"  # the two values verdicts are judged on
FINAL_MEAN = "final_mean_objective"  # the final search mean's rules re-evaluated: a study's score when it says so
MECHANISM = "mechanism"
OPTIMIZER = "optimizer"  # the outer optimiser a trial ran (es, cma, bo, random, optuna, module:Class), whether or not it is an axis
BOUND_BY = "bound_by/"  # bound_by/<rule>: the best candidate's upper bound with that rule at its best (its Assessment)
SCAN_KEY = ["optimize_params", "seed"]  # what a trial shares with its scan, with the inner loop's further axes


def at_budget(column: str, evaluations: int) -> str:
    """A column read at a smaller budget a run was also compared at (`[decide] equal_budget`): final_objective@250."""
    return f"{column}@{int(evaluations)}"


# -- trials.csv -------------------------------------------------------------------------------------------------
def trial_table(design, trials: dict) -> pd.DataFrame:
    """One row per grid cell; missing and crashed trials are rows too (their status says which)."""
    return pd.DataFrame([_trial_row(design, cell, trials.get(cell.key)) for cell in design.cells])


def _trial_row(design, cell: Cell, trial) -> dict[str, Any]:
    row = {
        "population": cell.population,
        "dims": cell.dims,
        MECHANISM: design.mechanisms.label(cell.optimize_params),
        "optimize_params": ",".join(cell.optimize_params),
        "seed": cell.seed,
        **{key: _cell_value(value) for key, value in cell.extra},  # a column per further axis
        OPTIMIZER: design.optimizer_of(cell),
        "budget_generations": cell.generations,
    }
    if trial is None or not trial.generations:
        return {**row, "status": "missing", "generations": 0}
    gens, final, last = trial.generations, trial.final or {}, trial.generations[-1]
    best_gen = last[metrics.BEST_GENERATION]
    best_gen = best_gen if best_gen is not None and best_gen >= 0 else None
    best = _best_outcome(next((g for g in gens if g[metrics.GENERATION] == best_gen), None))
    return {
        **row,
        "trial": trial.name,
        "status": _status(final, len(gens), cell.generations),
        BEST: num(last[metrics.BEST_OBJECTIVE]),
        "best_generation": best_gen,
        "generations": len(gens),
        "final_sigma": num(last[metrics.SIGMA]),
        FINAL: num(final.get(metrics.FINAL_BEST)),
        "final_objective_std": num(final.get(metrics.FINAL_BEST_STD)),
        FINAL_MEAN: num(final.get(metrics.FINAL_MEAN)),
        "gen0_objective": num(gens[0][metrics.OBJECTIVE]),
        "median_sec_per_gen": float(np.median([g[metrics.SEC_PER_GEN] for g in gens])),
        "evaluations": len(gens) * cell.population,  # inner-loop evaluations: generations × population
        "optimizer_s": _optimizer_seconds(gens),
        "wall_s": float(sum(g[metrics.SEC_PER_GEN] for g in gens) + (final.get(metrics.SEC_FINAL) or 0.0)),
        "core_s": core_seconds(gens, final),
        "shards": int(last.get(metrics.SHARDS, 1)),
        "nodes": nodes_used(gens),
        "max_threads": max(g[metrics.THREADS_OS] for g in gens),
        "failed_candidates": sum(g[metrics.FAILED] for g in gens),
        metrics.UPPER_BOUND: num(best.get(metrics.UPPER_BOUND)),
        metrics.STOP_REASON: final.get(metrics.STOP_REASON, ""),
        **{f"diag_{k}": num(best.get(k)) for k in _diagnostic_keys(best, design.summary_diagnostics)},
        **{BOUND_BY + rule: num(value) for rule, value in (best.get("bound_by_rule") or {}).items()},
        **{k: v for k, v in last.items() if k.startswith((metrics.BEST_RULE, metrics.MEAN_RULE))},
        **_at_smaller_budgets(final),
    }


def final_scores_of(final: dict) -> dict[str, float]:
    """A trial's scores from its final record, as its trials.csv row holds them: the final rules' and the search
    mean's, and its incumbent's at each smaller budget (`<column>@<E>`)."""
    return {FINAL: num(final.get(metrics.FINAL_BEST)), FINAL_MEAN: num(final.get(metrics.FINAL_MEAN)),
            **_at_smaller_budgets(final)}  # fmt: skip


def _at_smaller_budgets(final: dict) -> dict[str, float]:
    """Its incumbent at each smaller budget it was compared at (`[decide] equal_budget`): the final scores, what it
    had spent and its best so far then, as columns `<column>@<E>`."""
    out = {}
    for e, scored in (final.get(metrics.FINAL_AT_EVALUATIONS) or {}).items():
        out[at_budget(FINAL, e)] = num(scored.get(metrics.FINAL_BEST))
        out[at_budget(FINAL_MEAN, e)] = num(scored.get(metrics.FINAL_MEAN))
        out[at_budget("evaluations", e)] = int(scored["evaluations"])
        out[at_budget(BEST, e)] = num(scored.get(metrics.BEST_OBJECTIVE))
    return out


def core_seconds(gens: list[dict[str, Any]], final: dict) -> float:
    """A trial's CPU seconds as the OS measured them (its own process and its shards', every generation and its
    final re-evaluation); NaN for records from before they were kept."""
    stopped = 0.0 if metrics.STOP_REASON in final else None  # a trial stopped early ran no final re-evaluation
    values = [g.get(metrics.CORE_S) for g in gens] + ([final.get(metrics.CORE_S_FINAL, stopped)] if final else [])
    return float(sum(values)) if values and all(v is not None for v in values) else float("nan")


def _optimizer_seconds(gens: list[dict[str, Any]]) -> float:
    """The optimiser's own seconds over the run (ask and tell); NaN for records from before they were kept."""
    values = [g.get(metrics.SEC_OPTIMIZER) for g in gens]
    return float(sum(values)) if all(v is not None for v in values) else float("nan")


def nodes_used(gens: list[dict[str, Any]]) -> int:
    """The machines a trial's shards ran on, by address: Ray names a node anew in each session, so a trial resumed
    on the same machine counts once. Older records, without addresses: the most nodes one generation used."""
    shards = [s for g in gens for s in g.get(metrics.SHARD_DETAIL, [])]
    if shards and all(s.get(metrics.NODE_IP) for s in shards):
        return len({s[metrics.NODE_IP] for s in shards})
    return max((len({s[metrics.NODE] for s in g.get(metrics.SHARD_DETAIL, [])}) for g in gens), default=0) or 1


def _diagnostic_keys(outcome: dict[str, Any], declared: tuple[str, ...] | None) -> list[str]:
    """What the world declares its summary shows of an outcome (`summary_diagnostics`), else every number the
    recorded outcome holds beside the objective and its bound: its terms and diagnostics."""
    if declared is not None:
        return list(declared)
    skip = (metrics.OBJECTIVE, metrics.UPPER_BOUND, "failed", "bound_by_rule")
    return [k for k, v in outcome.items() if k not in skip and isinstance(v, (int, float)) and not isinstance(v, bool)]


def _cell_value(value):
    return ",".join(map(str, value)) if isinstance(value, tuple) else value


def _status(final: dict, recorded: int, budget: int) -> str:
    if final:
        return "stopped" if metrics.STOP_REASON in final else "complete"
    return "running or crashed" if recorded < budget else "no final"


def _best_outcome(row: dict | None) -> dict:
    """The generation's best candidate's outcome (its upper bound and diagnostics)."""
    if row is None:
        return {}
    objectives = np.array([num(o[metrics.OBJECTIVE]) for o in row[metrics.OUTCOMES]])
    return row[metrics.OUTCOMES][int(np.nanargmax(objectives))] if np.isfinite(objectives).any() else {}


def _head(design, cell: Cell) -> dict[str, Any]:
    """The columns naming a cell in the generations and scan tables."""
    return {
        MECHANISM: design.mechanisms.label(cell.optimize_params),
        "optimize_params": ",".join(cell.optimize_params),
        "seed": cell.seed,
        **{key: _cell_value(value) for key, value in cell.extra},
    }


# -- generations.csv.gz ------------------------------------------------------------------------------------------
def generation_table(design, trials: dict) -> pd.DataFrame:
    """One row per ES trial and generation: its best so far, the generation's best, mean and SD, σ, seconds, the
    seconds and inner-loop evaluations (ES generations × population) so far, and where the search was (the search
    mean's rules, `mean/<rule>`, and the generation's best candidate's, `generation_best/<rule>`, physical) — the
    curves, the search's paths and the shipped folders' summaries are drawn from it."""
    rows = []
    for cell in design.cells:
        t = trials.get(cell.key)
        if t is None or not t.generations:
            continue
        head = {"trial": trial_name(design, cell), "population": cell.population, **_head(design, cell)}
        head[OPTIMIZER] = design.optimizer_of(cell)
        specs = design.rule_specs_by_name
        rows += [{**head, **row} for row in generation_rows(t.generations, cell.population, cell.optimize_params, specs)]
    return pd.DataFrame(rows)


# -- scan.csv -------------------------------------------------------------------------------------------------------
def scan_key(table: pd.DataFrame) -> list[str]:
    """A scan's identity: its searched rules, seed, and the further axes the inner loop reads (setting keys)."""
    return [*SCAN_KEY, *(c for c in table.columns if is_setting_key(c))]


def scan_table(design, trials: dict) -> pd.DataFrame:
    """One row per scan and grid point (empty without scans): the rules in physical units, the objective on the
    trials' evaluation seeds, its terms, its upper bound, and the point re-evaluated on the final seeds."""
    rows = []
    terms = (metrics.OBJECTIVE, *design.scan_terms, metrics.UPPER_BOUND)  # the world's terms beside the objective
    for cell in design.scan_cells:
        records = trials.get(cell.key)
        if records is None or not records.generations:
            continue
        evaluation, finals = records.generations[0], records.generations[1:]
        grid = np.atleast_2d(np.array(evaluation[metrics.CANDIDATES], dtype=float))
        final = np.array([[num(o[metrics.OBJECTIVE]) for o in p[metrics.OUTCOMES]] for p in finals]).reshape(len(finals), -1)
        head = _head(design, cell)
        head = {"dims": cell.dims, **head}
        for k, outcome in enumerate(evaluation[metrics.OUTCOMES]):
            rules = {
                name: design.rule_specs_by_name[name].to_physical(grid[k, j]) for j, name in enumerate(cell.optimize_params)
            }
            values = final[:, k][np.isfinite(final[:, k])] if final.size else np.array([])
            rows.append(
                {
                    **head,
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


def scan_bests(scans: pd.DataFrame, design) -> pd.DataFrame:
    """Per scan: its best point on the evaluation seeds (rules, objective, bound) and that point's final re-evaluation."""
    if scans.empty:
        return pd.DataFrame()
    rows = []
    key = scan_key(scans)
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
                "mechanism": design.mechanisms.label(names),
                "points": len(group),
                "scan_best": float(best[metrics.OBJECTIVE]),
                "scan_best_final": float(best["final_objective"]),
                "scan_best_upper_bound": float(best[metrics.UPPER_BOUND]),
                "scan_best_rules": ", ".join(f"{n}={best[n]:.4g}" for n in names),
                "grid_spacing": spacing_label([design.rule_specs_by_name[n] for n in names], design.scan),
            }
        )
    return pd.DataFrame(rows)


def add_regret(trials: pd.DataFrame, bests: pd.DataFrame) -> pd.DataFrame:
    """The trials table with `regret`, `final_regret` and `grid_spacing` beside each trial that has a scan."""
    if bests.empty or trials.empty:
        return trials
    key = scan_key(bests)
    merged = trials.merge(bests[[*key, "scan_best", "scan_best_final", "grid_spacing"]], on=key, how="left")
    if BEST in merged:
        merged["regret"] = merged["scan_best"] - merged[BEST]
    if FINAL in merged:
        merged["final_regret"] = merged["scan_best_final"] - merged[FINAL]
    return merged.drop(columns=["scan_best", "scan_best_final"])
