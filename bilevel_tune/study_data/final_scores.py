"""A run's final scores seed by seed: `finals.csv` (each trial's final rules) and `anytime.csv` (its incumbent of
an earlier moment), the tables that say where a contrast's noise is and what an answer needed (docs/verdicts.md).

    finals.csv    trial, rules, final_seed, value
    anytime.csv   trial, evaluations, rules, final_seed, value, asked

`rules` is `best-so-far` (the rules a trial's final re-evaluation scores: the verdicts' value is their mean) or
`search mean` (the search mean's rules, `final_mean_objective`); `asked` is the budget as it was asked for (`1/8`,
`1000`), `evaluations` what it came to for the trial. `trial` is the trial's name (`trial_name`: the
cell, not a session's folder), so rows join by cell, never by order.

finals.csv gathers three sources (the run's store reads them, `merged` joins them), the first holding a
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
STATUS_QUO = "status quo"  # the rules a held-out learner scores beside a trial's final ones: every searched rule at its default
HELDOUT_COLUMNS = (
    "trial", "learner", "final_seed", "final", "status_quo", "gain", "final_rules", "status_quo_rules", "error",
    "job_seconds", "job_core_s",
)  # fmt: skip (job_core_s: the job's CPU seconds, OS-measured; a heldout.csv from before has none)
SCORE_COLUMNS = ("trial", "learner", "rules", "evaluations", "final_seed", "value")  # the store's long table
COST_COLUMNS = ("work", "trial", "learner", "wall_s", "cpus", "core_s", "core_s_measured")


def append_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence]) -> None:
    """Rows onto a table, its header first when new (floats as `repr`: every bit kept); flushed to disk before the
    caller goes on. The run's store appends through here (`run_store`), under the run lock."""
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


def own_label(inner: str) -> str:
    """How the tables name a run's own learner: its loop, "(its own)"."""
    return f"{inner}{OWN_SUFFIX}"


def final_rules(trial) -> str:
    """A trials-table row's final rules (its best candidate's searched rules) as heldout.csv writes them."""
    from bilevel_tune.core import metrics
    from bilevel_tune.study_data.run_folder import rules_text

    names = str(trial["optimize_params"]).split(",")
    return rules_text({n: trial.get(metrics.BEST_RULE + n, float("nan")) for n in names}, names)


def long_table(finals: pd.DataFrame, anytime: pd.DataFrame, heldout: pd.DataFrame, budgets: Mapping[str, int],
               own: str) -> pd.DataFrame:  # fmt: skip
    """Every score in one table (`SCORE_COLUMNS`): a trial's final rules and search mean under its own learner at
    its budget, its incumbents at earlier budgets, and each held-out learner's scores of its final rules and status
    quo; the first source holding a (trial, learner, rules, evaluations, final seed) kept."""
    rows = [(r.trial, own, r.rules, budgets.get(str(r.trial)), int(r.final_seed), float(r.value))
            for r in finals.itertuples()]  # fmt: skip
    rows += [(r.trial, own, r.rules, int(r.evaluations), int(r.final_seed), float(r.value)) for r in anytime.itertuples()]
    if not heldout.empty:
        scored = heldout[heldout["error"].isna()] if "error" in heldout else heldout
        for r in scored.itertuples():
            budget = budgets.get(str(r.trial))
            rows += [(r.trial, r.learner, BEST_RULES, budget, int(r.final_seed), float(r.final)),
                     (r.trial, r.learner, STATUS_QUO, budget, int(r.final_seed), float(r.status_quo))]  # fmt: skip
    table = pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
    table["evaluations"] = table["evaluations"].astype("Int64")
    return table.drop_duplicates(list(SCORE_COLUMNS[:-1])).reset_index(drop=True)


def cost_table(trials: pd.DataFrame, heldout: pd.DataFrame) -> pd.DataFrame:
    """What each piece of a run's work spent (`COST_COLUMNS`): every trial (its generations and final
    re-evaluation) and every held-out job (a trial under one learner) — its wall, its CPUs and the core-seconds
    the operating system measured (`core_s`); where a record predates that measure, wall × CPUs, marked so."""
    rows = []
    for r in trials[trials.get("generations", 0) > 0].itertuples() if len(trials) else ():
        wall, cpus = float(r.wall_s), int(getattr(r, "shards", 1) or 1)
        core = getattr(r, "core_s", float("nan"))
        measured = core is not None and pd.notna(core)
        rows.append(("trial", trial_of_folder(r.trial), "", wall, cpus, float(core) if measured else wall * cpus, measured))
    if not heldout.empty and "job_seconds" in heldout:
        for (trial, learner), job in heldout.groupby(["trial", "learner"], sort=False):
            wall = float(job["job_seconds"].iloc[0])
            core = job["job_core_s"].iloc[0] if "job_core_s" in job else float("nan")
            measured = pd.notna(core)
            rows.append(("held-out job", str(trial), str(learner), wall, 1, float(core) if measured else wall, measured))
    return pd.DataFrame(rows, columns=list(COST_COLUMNS))
