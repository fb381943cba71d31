"""A run's final scores seed by seed: `finals.csv` (each trial's final rules) and `anytime.csv` (its incumbent of
an earlier moment), the tables that say where a contrast's noise is and what an answer needed (docs/verdicts.md).

    finals.csv    trial, rules, final_seed, value
    anytime.csv   trial, evaluations, rules, final_seed, value, asked

`rules` is `best-so-far` (the rules a trial's final re-evaluation scores: the verdicts' value is their mean) or
`search mean` (the search mean's rules, `final_mean_objective`); `asked` is the budget as it was asked for (`1/8`,
`1000`), `evaluations` what it came to for the trial. `trial` is the trial's name (`trial_name`: the
cell, not a session's folder), so rows join by cell, never by order.

finals.csv gathers three sources (`report.tables` reads them, `merged` joins them), the first holding a
(trial, rules, final seed) kept: the trials' records
(`final_by_seed`, written by every trial since it existed), rows a `--reevaluate --final-seeds N` step appended
(the seeds after the recorded ones), and — for a folder from before — heldout.csv's own-learner rows (the
best-so-far rules retrained on the recorded final seeds: bit-identical to the trial's own re-evaluation, as the
same rules at the same candidate index on the same seed). Both files are appended to one job at a time, flushed,
so a stopped step resumes where it stopped.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

FINALS_CSV = "finals.csv"
ANYTIME_CSV = "anytime.csv"
BEST_RULES = "best-so-far"  # the rules a trial's final re-evaluation scores (its `final_objective`)
MEAN_RULES = "search mean"  # the search mean's rules at the end (`final_mean_objective`)
RULES = (BEST_RULES, MEAN_RULES)  # a block's order: candidate index 0, 1 — as a trial's final re-evaluation runs it
FINALS_COLUMNS = ("trial", "rules", "final_seed", "value")
ANYTIME_COLUMNS = ("trial", "evaluations", "rules", "final_seed", "value", "asked")
OWN_SUFFIX = " (its own)"  # heldout.csv's label of the run's own learner (`study_data.learners`)


def append_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence]) -> None:
    """Rows onto a table, its header first when new; flushed to disk before the caller goes on."""
    path = Path(path)
    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        if new:
            writer.writerow(columns)
        for row in rows:
            writer.writerow([repr(v) if isinstance(v, float) else v for v in row])
        f.flush()
        os.fsync(f.fileno())


def read_table(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """A table of this module's, empty (with its columns) where the file is missing."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    return table[list(columns)]


def recorded_rows(by_trial: Mapping[str, Mapping]) -> list[tuple]:
    """finals.csv's rows from the trials' final records: {trial name: its `final_by_seed`}; a retraining that
    failed (recorded as null) has no row."""
    rows = []
    for trial, by_seed in by_trial.items():
        for rules, key in zip(RULES, ("best", "mean")):
            rows += [(trial, rules, int(s), float(v)) for s, v in zip(by_seed["seeds"], by_seed[key]) if v is not None]
    return rows


def heldout_rows(heldout: pd.DataFrame) -> list[tuple]:
    """finals.csv's best-so-far rows from a held-out step's own-learner rows (an older folder's only per-seed record)."""
    if heldout.empty:
        return []
    own = heldout[heldout["learner"].astype(str).str.endswith(OWN_SUFFIX) & heldout["error"].isna()]
    return [(r.trial, BEST_RULES, int(r.final_seed), float(r.final)) for r in own.itertuples()]


def merged(*sources: Iterable[tuple]) -> pd.DataFrame:
    """finals.csv's table from its sources, the first holding a (trial, rules, final seed) kept; rows in the order
    first seen."""
    seen: dict[tuple, float] = {}
    for rows in sources:
        for trial, rules, seed, value in rows:
            seen.setdefault((str(trial), str(rules), int(seed)), float(value))
    return pd.DataFrame([(*k, v) for k, v in seen.items()], columns=list(FINALS_COLUMNS))


def trial_of_folder(folder: str) -> str:
    """A trial folder's trial name: the folder is <trial name>_<Tune's id>_<index> (`trial_dirname`)."""
    return str(folder).rsplit("_", 2)[0]


def per_seed(table: pd.DataFrame, rules: str = BEST_RULES) -> dict[str, dict[int, float]]:
    """{trial: {final seed: value}} for one rule set's rows."""
    out: dict[str, dict[int, float]] = {}
    for r in table[table["rules"] == rules].itertuples():
        out.setdefault(str(r.trial), {})[int(r.final_seed)] = float(r.value)
    return out
