"""A trial's search path as rows, and its incumbent after E evaluations read off them.

One row per generation: the best objective so far, the generation's best, mean and SD, σ, seconds, the inner-loop
evaluations so far (generations × population), the search mean's rules after that generation (`mean/<rule>`) and
the generation's best candidate's (`generation_best/<rule>`), physical. The run's generations table is these rows
over every trial (`run_tables.generation_table`); a shipped folder keeps it as generations.csv.gz.

The incumbent after E evaluations — the best-so-far rules then, and the search mean then, at the last generation
at or before E — is read the same way from either: by `--reevaluate --at-evaluations` off a run's table, and by a
trial off its own records when its study compares it at a smaller budget (`[decide] equal_budget`), so both
re-score the same rules to the last bit. pandas only.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.study_data.run_folder import num

GENERATION_BEST = "generation_best/"  # generation_best/<rule>: the generation's best candidate, physical


def generation_rows(generations: Sequence[Mapping[str, Any]], population: int, params: Sequence[str], specs) -> list[dict]:
    """A trial's generation records as rows (`specs`: the searched rules' specs by name, for the physical values)."""
    rows, elapsed = [], 0.0
    for g in generations:
        elapsed += num(g[metrics.SEC_PER_GEN])
        rows.append(
            {
                "generation": int(g[metrics.GENERATION]),
                "best_so_far": num(g[metrics.BEST_OBJECTIVE]),
                "generation_best": num(g[metrics.OBJECTIVE]),
                "mean": num(g.get(metrics.OBJECTIVE_MEAN)),
                "std": num(g.get(metrics.OBJECTIVE_STD)),
                "sigma": num(g.get(metrics.SIGMA)),
                "sec": num(g[metrics.SEC_PER_GEN]),
                "elapsed_s": elapsed,
                "evaluations": (int(g[metrics.GENERATION]) + 1) * population,
                **{metrics.MEAN_RULE + p: num(g.get(metrics.MEAN_RULE + p)) for p in params},
                **_generation_best(g, params, specs),
            }
        )
    return rows


def _generation_best(g: Mapping[str, Any], params: Sequence[str], specs) -> dict[str, float]:
    objectives = np.array([num(o[metrics.OBJECTIVE]) for o in g[metrics.OUTCOMES]])
    k = int(np.nanargmax(objectives)) if np.isfinite(objectives).any() else 0
    u = np.atleast_2d(np.array(g[metrics.CANDIDATES], dtype=float))[k]
    return {GENERATION_BEST + p: specs[p].to_physical(u[j]) for j, p in enumerate(params)}


def last_row(rows: pd.DataFrame, evaluations: int) -> pd.Series:
    """The last generation at or before `evaluations` (rows sorted by generation)."""
    before = rows[rows["evaluations"] <= evaluations]
    if before.empty:
        raise ValueError(f"no generation within {evaluations} evaluations (the first spends {int(rows['evaluations'].min())})")
    return before.iloc[-1]


def incumbent(rows: pd.DataFrame, evaluations: int, params: Sequence[str], fixed: Mapping[str, float]) -> tuple[dict, dict]:
    """(the best-so-far rules, the search mean's) after `evaluations`, every rule physical (`fixed`: the rules not
    searched): the best-so-far rules are the generation's best of the first generation to reach the best so far."""
    before = rows[rows["evaluations"] <= evaluations]
    last = last_row(rows, evaluations)
    reached = before["generation_best"].to_numpy(dtype=float) == float(last["best_so_far"])
    where = before.iloc[int(np.argmax(reached))] if reached.any() else before.loc[before["generation_best"].idxmax()]
    best = {**fixed, **{p: float(where[f"{GENERATION_BEST}{p}"]) for p in params}}
    mean = {**fixed, **{p: float(last[f"{metrics.MEAN_RULE}{p}"]) for p in params}}
    return best, mean
