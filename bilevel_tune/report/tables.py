"""A run's tables — what its summary, plots and notebook are drawn from — read from its records or from a
shipped folder.

A run folder's authoritative record is each trial's generations.jsonl
(`study_data.run_folder`): every candidate of every generation. From it the
summary makes three tables, and writes them beside summary.md:

* `trials.csv` — one row per trial of the grid (missing ones included);
* `generations.csv.gz` — one row per ES trial and generation: its best so
  far, the generation's best, mean and SD, σ, seconds, the seconds and
  inner-loop evaluations so far, the search mean's rules and the generation's
  best candidate's (`records.generation_table`);
* `scan.csv` — with a rules scan, one row per scan and grid point;

and reads `heldout.csv` where a held-out step wrote one (`cli.reevaluation`: per trial, learner and final seed),
and the final scores seed by seed (`study_data.final_scores`: finals.csv, gathered from the records, a
re-scoring's rows and heldout.csv; anytime.csv, the incumbents of earlier moments).

Every file is read through the folder's results store (`study_data.results_store`: the study once, the records
and score tables keyed by cell). A folder under docs/results/ ships those tables and study.json, not the
records (tens of MB); `read` takes a folder of either kind, so
`bilevel-summary docs/results/<run>` rebuilds the summary a run wrote, and
the notebook opens a run or a shipped result alike.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bilevel_tune.report import landscape
from bilevel_tune.report.columns import SummaryError
from bilevel_tune.report.records import generation_table, trial_table
from bilevel_tune.study_data import final_scores
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.results_store import ResultsError, RunResults
from bilevel_tune.study_data.run_folder import (  # noqa: F401 - GENERATIONS_CSV: also read through this module
    GENERATIONS_CSV,
    GENERATIONS_FILE,
    SCAN_CSV,
    STUDY_FILE,
    TRIALS_CSV,
)

GZIP = {"method": "gzip", "mtime": 0}  # no timestamp in the file: the same table, the same bytes


@dataclass(frozen=True)
class RunTables:
    study: Study
    trials: pd.DataFrame  # `records.trial_table` with the scan's regret beside it (`landscape.add_regret`)
    generations: pd.DataFrame
    scans: pd.DataFrame  # empty without a scan
    shipped: bool  # read from a shipped folder's tables, not from records
    heldout: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # empty without a held-out step
    finals: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # final scores seed by seed (`final_scores`)
    anytime: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # earlier incumbents' scores
    record: dict = dataclasses.field(default_factory=dict)  # study.json less the study: sessions, stages, plan changes
    pilot: dict | None = None  # the pilot's answers this run is compared with (pilot.json: `against`)


def has_records(run_dir: Path) -> bool:
    return RunResults(Path(run_dir)).has_records


def read(run_dir: Path) -> RunTables:
    """The run's tables, through the folder's results store: from its trials' records when it has them, else from
    the tables a summary wrote."""
    run_dir = Path(run_dir)
    results = RunResults(run_dir)  # one reader of the folder: each file read once
    if run_dir.is_dir() and not results.has_records and not results.ships_tables:
        raise SummaryError(
            f"{run_dir} holds neither trial records (*/{GENERATIONS_FILE}) nor a summary's tables ({STUDY_FILE}, "
            f"{TRIALS_CSV}, {GENERATIONS_CSV}): give a run folder made by python -m bilevel_tune.study, or one under "
            "docs/results/"
        )
    try:
        results.checked()
        tables = from_results(results) if results.has_records else RunTables(
            results.study, *results.shipped_tables(), shipped=True)  # fmt: skip
        record = {k: v for k, v in results.record.items() if k != "study"}
        return dataclasses.replace(
            tables, heldout=results.heldout, finals=results.finals, anytime=results.anytime, record=record,
            pilot=results.pilot)
    except ResultsError as err:
        raise SummaryError(str(err)) from None


def trials_only(results: RunResults) -> pd.DataFrame:
    """The trials table alone, without the generations or the scan: from the trials' records, else trials.csv."""
    if results.has_records:
        return trial_table(results.study, results.trials)
    return pd.read_csv(results.run_dir / TRIALS_CSV)


def from_results(results: RunResults) -> RunTables:
    """The tables of a folder with trial records, made from them."""
    study, trials = results.study, results.trials
    if not trials:
        raise SummaryError(f"{results.run_dir} holds no trial records yet ({GENERATIONS_FILE}); nothing to summarise")
    scans = landscape.scan_table(study, trials)
    table = landscape.add_regret(trial_table(study, trials), landscape.scan_bests(scans, study))
    return RunTables(study, table, generation_table(study, trials), scans, shipped=False, finals=results.finals)


def write(run_dir: Path, tables: RunTables) -> None:
    """The tables a shipped folder needs (trials.csv is the summary's own)."""
    tables.trials.to_csv(run_dir / TRIALS_CSV, index=False)
    tables.generations.to_csv(run_dir / GENERATIONS_CSV, index=False, compression=GZIP)
    if not tables.scans.empty:
        tables.scans.to_csv(run_dir / SCAN_CSV, index=False)
    if not tables.finals.empty:  # every source's rows in one file: what a shipped folder's noise is read from
        tables.finals.to_csv(run_dir / final_scores.FINALS_CSV, index=False, float_format=None)
