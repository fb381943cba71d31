"""A run folder's results, read through one door: the report and its decisions, staging's looks, `--status`, the
run's history and the notebook all open a folder here, and find every table keyed by cell.

    results = open_results(run_dir)
    results.study                       the study as it ran (study.json, read once; its world's portrait where the
                                        world's module does not import)
    results.record                      study.json whole: sessions, stages, plan, plan changes, re-evaluations
    results.trials                      {cell key: TrialRecords}: every trial with records, keyed by its cell
    results.finals, .anytime, .heldout  final scores seed by seed, earlier incumbents', held-out learners' (tables
                                        whose `trial` is the cell's name, `final_scores`: joined by cell, never by order)
    results.final_objectives(score)     {cell key: score}: what a look decides from (`verdicts.decide`)
    results.pilot                       the pilot's answers the summary compares with (pilot.json), or None
    results.shipped_tables()            trials.csv, generations.csv.gz, scan.csv, for a folder that ships no records

The folder's names and its record lines are `run_folder`'s (the writers' side); this module only reads, lazily
(`--status` reads study.json and the records, never the tables), and raises `ResultsError`, one line, for a
folder that is not a run's. No Ray, no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.study_data import final_scores
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.run_folder import (
    GENERATIONS_CSV,
    GENERATIONS_FILE,
    HELDOUT_CSV,
    PILOT_FILE,
    SCAN_CSV,
    STAGES,
    STUDY_FILE,
    TRIALS_CSV,
    Cell,
    is_scan,
    key_at_evaluations,
    num,
    read_study_file,
    trial_records,
)
from bilevel_tune.worlds.contract import WorldError


class ResultsError(ValueError):
    """A folder that does not read as a run's; one line for the user, naming the folder."""

    def __init__(self, run_dir: Path, why: str):
        super().__init__(f"{run_dir}: {why}")
        self.why = why  # the line without the folder: a reader that names the folder its own way says this


@dataclass(frozen=True)
class TrialRecords:
    """One trial's records: its folder's name (`<trial name>_<Tune's id>_<index>`), its generations, its final line."""

    name: str
    generations: list[dict[str, Any]]
    final: dict[str, Any] | None

    @property
    def trial(self) -> str:
        """The trial's name: its cell's, whichever session's folder holds it (`final_scores.trial_of_folder`)."""
        return final_scores.trial_of_folder(self.name)


class RunResults:
    """What a run folder holds, each part read on first use and kept."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)

    @cached_property
    def record(self) -> dict[str, Any]:
        try:
            record = read_study_file(self.run_dir)
        except (OSError, ValueError) as err:
            raise ResultsError(self.run_dir, f"its {STUDY_FILE} does not read as a run's ({type(err).__name__}: {err})") from None
        if not isinstance(record, dict):
            raise ResultsError(self.run_dir, f"its {STUDY_FILE} is not a bilevel_tune study file")
        return record

    @cached_property
    def study(self) -> Study:
        """The study as study.json records it (its last stage's seeds included)."""
        record = self.record
        try:
            return Study.from_record(record)
        except WorldError as err:  # its world is not importable here, and the folder predates world portraits
            raise ResultsError(
                self.run_dir,
                f"{err}; its {STUDY_FILE} holds no portrait of that world (runs before portraits keep none): read it "
                "where the world's module imports"
            ) from None
        except (ValueError, KeyError, TypeError):
            raise ResultsError(self.run_dir, f"its {STUDY_FILE} is not a bilevel_tune study file") from None

    @property
    def stage_log(self) -> list[dict[str, Any]]:
        return self.record.get(STAGES, [])

    @property
    def looks_taken(self) -> int:
        """The looks the run has taken: its stages decided so far."""
        return sum(1 for entry in self.stage_log if entry.get("decided_utc"))

    # -- the trials' records ------------------------------------------------------------------------------------
    @cached_property
    def folders(self) -> dict[str, TrialRecords]:
        """{trial folder name: its records} for every trial folder with a record, in name order."""
        return {name: TrialRecords(name, gens, final) for name, (gens, final) in trial_records(self.run_dir).items()}

    @cached_property
    def trials(self) -> dict[tuple, TrialRecords]:
        """{cell key: records} for every trial that wrote some. A cell begun again in another session's folder (a
        stage resumed without Tune's state starts its unfinished trials afresh) is the folder that finished it,
        else the one written last: the one under way."""
        out: dict[tuple, TrialRecords] = {}
        for t in sorted(self.folders.values(), key=self._recency):
            if t.generations or t.final:
                out[Cell.key_of((t.generations or [t.final])[0])] = t
        return dict(sorted(out.items(), key=lambda item: item[1].name))  # in folder-name order, as the tables are

    def _recency(self, t: TrialRecords) -> tuple:
        return t.final is not None, (self.run_dir / t.name / GENERATIONS_FILE).stat().st_mtime_ns, t.name

    def checked(self) -> "RunResults":
        """Itself, once its folder is seen to be a run's (a folder with a study.json); ResultsError, one line, else."""
        if not self.run_dir.is_dir():
            raise ResultsError(self.run_dir, "not a folder")
        if not (self.run_dir / STUDY_FILE).is_file():
            raise ResultsError(
                self.run_dir, f"not a study run folder (no {STUDY_FILE}); give a folder made by python -m bilevel_tune.study"
            )
        return self

    @cached_property
    def has_records(self) -> bool:
        return any(self.run_dir.glob(f"*/{GENERATIONS_FILE}"))

    def finished_cells(self) -> set[tuple]:
        """Keys of the cells whose trial wrote its final record."""
        return {Cell.key_of(t.final) for t in self.folders.values() if t.final is not None}

    def final_objectives(self, score: str = final_scores.BEST_RULES) -> dict[tuple, float]:
        """Every finished ES trial's final re-evaluated objective, by cell key (NaN where it has none): the
        best-so-far rules', or with `score` "search mean" the final search mean's (`[decide] score`); and its
        incumbent's at each smaller budget it was re-scored at, by `key_at_evaluations`."""
        key_of_score = metrics.FINAL_MEAN if score == final_scores.MEAN_RULES else metrics.FINAL_BEST
        out = {}
        for t in self.folders.values():
            if t.final is not None and not is_scan(key := Cell.key_of(t.final)):
                out[key] = num(t.final.get(key_of_score))
                for evaluations, scored in (t.final.get(metrics.FINAL_AT_EVALUATIONS) or {}).items():
                    out[key_at_evaluations(key, int(evaluations))] = num(scored.get(key_of_score))
        return out

    # -- the score tables ---------------------------------------------------------------------------------------
    @cached_property
    def heldout(self) -> pd.DataFrame:
        """Held-out learners' scores (per trial, learner and final seed); empty without a held-out step."""
        path = self.run_dir / HELDOUT_CSV
        return pd.read_csv(path, keep_default_na=False, na_values=[""]) if path.is_file() else pd.DataFrame()

    @cached_property
    def anytime(self) -> pd.DataFrame:
        return final_scores.read_table(self.run_dir / final_scores.ANYTIME_CSV, final_scores.ANYTIME_COLUMNS)

    @cached_property
    def finals(self) -> pd.DataFrame:
        """The final scores seed by seed from every source: the records', a re-scoring's finals.csv rows, and
        heldout.csv's own-learner rows (the first source holding a (trial, rules, final seed) kept)."""
        by_seed = {t.trial: t.final[metrics.FINAL_BY_SEED] for t in self.trials.values()
                   if t.final and t.final.get(metrics.FINAL_BY_SEED)}  # fmt: skip
        written = final_scores.read_table(self.run_dir / final_scores.FINALS_CSV, final_scores.FINALS_COLUMNS)
        return final_scores.merged(
            final_scores.recorded_rows(by_seed),
            written.itertuples(index=False, name=None),
            final_scores.heldout_rows(self.heldout),
        )

    @cached_property
    def pilot(self) -> dict[str, Any] | None:
        """The pilot's answers this run is compared with (`report.against`); None when it names none."""
        path = self.run_dir / PILOT_FILE
        try:
            return json.loads(path.read_text()) if path.is_file() else None
        except ValueError as err:
            raise ResultsError(self.run_dir, f"its {PILOT_FILE} does not read ({err})") from None

    # -- a shipped folder's tables ------------------------------------------------------------------------------
    @property
    def ships_tables(self) -> bool:
        return all((self.run_dir / name).is_file() for name in (STUDY_FILE, TRIALS_CSV, GENERATIONS_CSV))

    def shipped_tables(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """(trials.csv, generations.csv.gz, scan.csv — empty without a scan) as a summary wrote them."""
        scan = self.run_dir / SCAN_CSV
        return (
            pd.read_csv(self.run_dir / TRIALS_CSV),
            pd.read_csv(self.run_dir / GENERATIONS_CSV),
            pd.read_csv(scan) if scan.is_file() else pd.DataFrame(),
        )


def open_results(run_dir: Path) -> RunResults:
    """A run folder's results (`RunResults`); ResultsError, one line, for what is not a run folder."""
    return RunResults(run_dir).checked()
