"""A run's records as tables: the trials table (one row per grid cell) and the generations table, made from each
trial's generations.jsonl as the results store reads them (`study_data.results_store`: by cell key) — the load step
of the summary's pipeline, for a run folder (a shipped folder's tables are read as they are: `tables`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.report.columns import BEST, BOUND_BY, FINAL, FINAL_MEAN, MECHANISM, OPTIMIZER, SummaryError, at_budget
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.incumbents import generation_rows
from bilevel_tune.study_data.results_store import ResultsError, TrialRecords, open_results
from bilevel_tune.study_data.run_folder import Cell, num, trial_name


def load_run(run_dir: Path) -> tuple[Study, dict[tuple, TrialRecords]]:
    """(the study as study.json records it, the records of every trial that wrote some, by cell key): the results
    store's (`study_data.results_store`), SummaryError for a folder that is not a run's."""
    try:
        results = open_results(run_dir)
        return results.study, results.trials
    except ResultsError as err:
        raise SummaryError(str(err)) from None


def trial_table(study: Study, trials: dict[tuple, TrialRecords]) -> pd.DataFrame:
    """One row per grid cell; missing and crashed trials are rows too (their status says which)."""
    return pd.DataFrame([_trial_row(study, cell, trials.get(cell.key)) for cell in study.grid.cells()])


def _trial_row(study: Study, cell: Cell, trial: TrialRecords | None) -> dict[str, Any]:
    row = {
        "population": cell.population,
        "dims": cell.dims,
        MECHANISM: study.mechanisms.label(cell.optimize_params),
        "optimize_params": ",".join(cell.optimize_params),
        "seed": cell.seed,
        **{key: _cell_value(value) for key, value in cell.extra},  # a column per further axis
        OPTIMIZER: optimizer_of(study, cell),
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
        "shards": int(last.get(metrics.SHARDS, 1)),
        "nodes": nodes_used(gens),
        "max_threads": max(g[metrics.THREADS_OS] for g in gens),
        "failed_candidates": sum(g[metrics.FAILED] for g in gens),
        metrics.UPPER_BOUND: num(best.get(metrics.UPPER_BOUND)),
        metrics.STOP_REASON: final.get(metrics.STOP_REASON, ""),
        **{f"diag_{k}": num(best.get(k)) for k in _diagnostic_keys(best, study.table.summary_diagnostics)},
        **{BOUND_BY + rule: num(value) for rule, value in (best.get("bound_by_rule") or {}).items()},
        **{k: v for k, v in last.items() if k.startswith((metrics.BEST_RULE, metrics.MEAN_RULE))},
        **_at_smaller_budgets(final),
    }


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


def optimizer_of(study: Study, cell: Cell) -> str:
    """The outer optimiser a cell ran: its axis's value, else the study's."""
    return dict(cell.extra).get("outer.optimizer", study.outer.optimizer)


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
    for cell in study.grid.cells():
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
            OPTIMIZER: optimizer_of(study, cell),
        }
        rows += [{**head, **row} for row in generation_rows(t.generations, cell.population, cell.optimize_params, specs)]
    return pd.DataFrame(rows)
