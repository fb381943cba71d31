"""A run folder's one reader and one writer: every command opens a folder here, once, and passes the store on.

    store = open_store(run_dir)                    # reading: the summary, --status, the notebook
    with run_lock.held(run_dir, fresh=False) as lock:
        store = open_store(run_dir, lock=lock)     # writing too: only the session that holds the folder

Reading (each part on first use, kept):

    store.record                   study.json whole: the run's definition and its log (sessions, stages and looks,
                                   declarations, the held-out step's sessions)
    store.study, store.design      the study as it ran (its world's portrait where the world's module does not
                                   import), compiled once (`design`)
    store.trials                   {cell key: TrialRecords}: every trial with records, keyed by its cell
    store.trials_table, .generations_table, .scan_table, .scan_bests
                                   the records as tables (`run_tables`), or a shipped folder's CSVs
    store.trial_rows               {cell key: the trials table's row}: rows joined by cell, never by order
    store.scores                   every score, one long table: trial, learner, rules, evaluations, final seed, value;
    store.finals, .anytime, .heldout   its views, as finals.csv, anytime.csv and heldout.csv have them
    store.look_scores(score)       {cell key: score}: what a look decides from (staging, the summary, the planner)
    store.costs                    what each trial and held-out job spent: wall, CPUs, core-seconds
    store.pilot                    the pilot's answers the summary compares with (pilot.json), or None

Writing — study.json is the run's definition plus its log, each event appended whole (`write_json`) under the run
lock; the score tables are appended one job at a time, flushed. A store opened without the lock writes nothing
(`StoreError`). A trial's own records (`append_record`) are the one thing written elsewhere: by the trial the
session started, into its own folder. No Ray, no torch.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.study_data import final_scores, run_tables
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.design import Design, compile_design
from bilevel_tune.study_data.run_folder import (
    GENERATIONS_CSV,
    GENERATIONS_FILE,
    HELDOUT_CSV,
    PILOT_FILE,
    REEVALUATIONS,
    SCAN_CSV,
    STAGES,
    STUDY_FILE,
    TRIALS_CSV,
    Cell,
    is_scan,
    json_safe,
    key_at_evaluations,
    read_study_file,
    trial_name,
    trial_records,
    write_json,
)
from bilevel_tune.worlds.contract import WorldError

COMPLETE = ("complete", "stopped")  # a trial whose final record is written
GZIP = {"method": "gzip", "mtime": 0}  # no timestamp in the file: the same table, the same bytes
PLAN_EXTENSIONS = "plan_extensions"  # study.json's log of --extend-plan
MARGIN_DECLARATIONS = "margin_declarations"  # study.json's log of --declare-margin
LEARNERS_ADDED = "learners_added"  # study.json's log of held-out learners added after the run (--reevaluate --learners)


class StoreError(ValueError):
    """A folder that does not read as a run's, or a write without the run's lock; one line for the user."""

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


class RunStore:
    """A run folder: what it holds, read on first use and kept; what a session adds, written through it."""

    def __init__(self, run_dir: Path, lock=None):
        self.run_dir = Path(run_dir)
        self.lock = lock  # `run_lock.RunLock` of the session writing the folder; None: read only

    def checked(self) -> "RunStore":
        """Itself, once its folder is seen to be a run's (a folder with a study.json); StoreError, one line, else."""
        if not self.run_dir.is_dir():
            raise StoreError(self.run_dir, "not a folder")
        if not (self.run_dir / STUDY_FILE).is_file():
            raise StoreError(
                self.run_dir, f"not a study run folder (no {STUDY_FILE}); give a folder made by python -m bilevel_tune.study"
            )
        return self

    def refresh(self) -> None:
        """Forget what was read: the trials wrote more records since (a stage ran)."""
        for name in (*_RECORD_VIEWS, *_SCORE_VIEWS):
            self.__dict__.pop(name, None)

    def held_by(self, lock) -> "RunStore":
        """The store, now writing for the session that took the folder's lock; what it read before is read again
        (another session may have written until then)."""
        self.lock = lock
        for name in ("record", "study", "design", "pilot", *_RECORD_VIEWS, *_SCORE_VIEWS):
            self.__dict__.pop(name, None)
        return self

    # -- study.json ---------------------------------------------------------------------------------------------
    @cached_property
    def record(self) -> dict[str, Any]:
        try:
            record = read_study_file(self.run_dir)
        except (OSError, ValueError) as err:
            raise StoreError(self.run_dir, f"its {STUDY_FILE} does not read as a run's ({type(err).__name__}: {err})") from None
        if not isinstance(record, dict):
            raise StoreError(self.run_dir, f"its {STUDY_FILE} is not a bilevel_tune study file")
        return record

    @cached_property
    def study(self) -> Study:
        """The study as study.json records it (its last stage's seeds included)."""
        record = self.record
        try:
            return Study.from_record(record)
        except WorldError as err:  # its world is not importable here, and the folder predates world portraits
            raise StoreError(
                self.run_dir,
                f"{err}; its {STUDY_FILE} holds no portrait of that world (runs before portraits keep none): read it "
                "where the world's module imports"
            ) from None
        except (ValueError, KeyError, TypeError):
            raise StoreError(self.run_dir, f"its {STUDY_FILE} is not a bilevel_tune study file") from None

    @cached_property
    def design(self) -> Design:
        """The study as it ran, compiled once: its cells, groups, budgets and labels (`design`)."""
        return compile_design(self.study)

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

    @cached_property
    def has_records(self) -> bool:
        return any(self.run_dir.glob(f"*/{GENERATIONS_FILE}"))

    def finished_cells(self) -> set[tuple]:
        """Keys of the cells whose trial wrote its final record."""
        return {Cell.key_of(t.final) for t in self.folders.values() if t.final is not None}

    # -- the tables ---------------------------------------------------------------------------------------------
    @property
    def ships_tables(self) -> bool:
        return all((self.run_dir / name).is_file() for name in (STUDY_FILE, TRIALS_CSV, GENERATIONS_CSV))

    @cached_property
    def scan_table(self) -> pd.DataFrame:
        """One row per scan and grid point (empty without a scan)."""
        if self.has_records:
            return run_tables.scan_table(self.design, self.trials)
        path = self.run_dir / SCAN_CSV
        return pd.read_csv(path) if path.is_file() else pd.DataFrame()

    @cached_property
    def scan_bests(self) -> pd.DataFrame:
        return run_tables.scan_bests(self.scan_table, self.design)

    @cached_property
    def trials_table(self) -> pd.DataFrame:
        """trials.csv: one row per grid cell, the scan's regret beside it; a shipped folder's as it was written."""
        if self.has_records:
            return run_tables.add_regret(run_tables.trial_table(self.design, self.trials), self.scan_bests)
        return pd.read_csv(self.run_dir / TRIALS_CSV)

    @cached_property
    def generations_table(self) -> pd.DataFrame:
        if self.has_records:
            return run_tables.generation_table(self.design, self.trials)
        return pd.read_csv(self.run_dir / GENERATIONS_CSV)

    @cached_property
    def trial_rows(self) -> dict[tuple, pd.Series]:
        """The trials table's row of each ES cell, by cell key, in the design's order. A run's table is made cell by
        cell in that order; a shipped trials.csv is joined by each row's trial, the name of the cell its run
        recorded (a row without one, a trial that never ran, holds no score)."""
        table = self.trials_table
        if self.has_records:
            return {c.key: row for c, (_, row) in zip(self.design.cells, table.iterrows())}
        by_name = {final_scores.trial_of_folder(row["trial"]): row for _, row in table.iterrows()
                   if isinstance(row.get("trial"), str)}  # fmt: skip
        rows = ((c.key, by_name.get(trial_name(self.design, c))) for c in self.design.cells)
        return {key: row for key, row in rows if row is not None}

    def export_tables(self) -> None:
        """A run's tables beside its records — what a shipped folder reopens from, which keeps no records: trials.csv,
        generations.csv.gz, scan.csv and finals.csv (every source's rows in one file). A shipped folder's are its own."""
        self._writing()
        if not self.has_records:
            return
        self.trials_table.to_csv(self.run_dir / TRIALS_CSV, index=False)
        self.generations_table.to_csv(self.run_dir / GENERATIONS_CSV, index=False, compression=GZIP)
        if not self.scan_table.empty:
            self.scan_table.to_csv(self.run_dir / SCAN_CSV, index=False)
        if not self.finals.empty:
            self.finals.to_csv(self.run_dir / final_scores.FINALS_CSV, index=False, float_format=None)

    # -- scores ---------------------------------------------------------------------------------------------------
    def look_scores(self, score: str = final_scores.BEST_RULES) -> dict[tuple, float]:
        """Every finished ES trial's final re-evaluated objective, by cell key (NaN where it has none): the
        best-so-far rules', or with `score` "search mean" the final search mean's (`[decide] score`); and its
        incumbent's at each smaller budget it was re-scored at, by `key_at_evaluations`. What every look decides
        from: staging's, the summary's Answers, `--status` and the planner read the same scores — a run's from its
        trials' final records (as trials.csv's score columns are), a shipped folder's from its trials.csv."""
        column = run_tables.FINAL_MEAN if score == final_scores.MEAN_RULES else run_tables.FINAL
        if self.has_records:
            rows = {key: run_tables.final_scores_of(t.final) for key, t in self.trials.items() if t.final is not None}
        else:
            rows = {key: row for key, row in self.trial_rows.items() if row.get("status") in COMPLETE}
        out = {}
        for key, row in rows.items():
            if is_scan(key):
                continue
            out[key] = _number(row.get(column))
            for evaluations in self.design.equal_evaluations(key[0]):
                out[key_at_evaluations(key, evaluations)] = _number(row.get(run_tables.at_budget(column, evaluations)))
        return out

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
    def scores(self) -> pd.DataFrame:
        """Every score of the run, one long table (`final_scores.SCORE_COLUMNS`): each trial's final rules and
        search mean under its own learner at its budget (finals), its incumbents at earlier budgets (anytime), and
        every held-out learner's scores of its final rules and status quo (heldout)."""
        budgets = {trial_name(self.design, c): c.population * c.generations for c in self.design.cells}
        own = final_scores.own_label(self.design.inner)
        return final_scores.long_table(self.finals, self.anytime, self.heldout, budgets, own)

    @cached_property
    def costs(self) -> pd.DataFrame:
        """What the run's work spent, one row per trial and per held-out job (`final_scores.cost_table`)."""
        return final_scores.cost_table(self.trials_table, self.heldout)

    @cached_property
    def pilot(self) -> dict[str, Any] | None:
        """The pilot's answers this run is compared with (`report.against`); None when it names none."""
        path = self.run_dir / PILOT_FILE
        try:
            return json.loads(path.read_text()) if path.is_file() else None
        except ValueError as err:
            raise StoreError(self.run_dir, f"its {PILOT_FILE} does not read ({err})") from None

    # -- writing: the run's log -----------------------------------------------------------------------------------
    def _writing(self) -> None:
        if self.lock is None or not self.lock.holds():
            raise StoreError(self.run_dir, "this command does not hold the run's lock: it writes nothing here")

    def _commit(self, record: dict[str, Any]) -> None:
        """study.json as the event leaves it, written whole (a reader, or a kill mid-write, never sees half)."""
        self._writing()
        write_json(self.run_dir / STUDY_FILE, record)
        self.__dict__["record"] = record
        for name in ("study", "design"):  # the study may have changed (a stage begun, a declaration)
            self.__dict__.pop(name, None)

    def create(self, record: dict[str, Any]) -> None:
        """A fresh run's study.json: its definition, provenance and plan."""
        self._commit(dict(record))

    def begin_session(self, session: dict[str, Any], defaults: Mapping[str, Any] = {}) -> None:
        """A session starts: its entry appended; `defaults` fill what a folder from before lacks (its portrait)."""
        record = self._copy()
        for key, value in defaults.items():
            record.setdefault(key, value)
        record["sessions"] = [*record.get("sessions", []), session]
        self._commit(record)

    def end_session(self, started: str, **ended: Any) -> None:
        """The session that began at `started` ends: when, its wall time, exit status and counts."""
        record = self._copy()
        for session in record.get("sessions", []):
            if session.get("started_utc") == started:
                session.update(ended)
        self._commit(record)

    def declare(self, kind: str, entry: dict[str, Any], study: dict[str, Any], begun: Sequence[dict] = ()) -> None:
        """A resume declares a change before the next look (`PLAN_EXTENSIONS`, `MARGIN_DECLARATIONS`): logged with
        when it was made; the recorded study becomes the declared one. A margin is noted on the stage log entry of
        the look it decides from (`begun`: the entries a run from before stages lacks, appended first)."""
        record = self._copy()
        record["study"] = study
        record.setdefault(kind, []).append(entry)
        if kind == MARGIN_DECLARATIONS:
            record.setdefault(STAGES, []).extend(begun)
            for stage in record[STAGES]:
                if stage["stage"] == entry["from_look"]:
                    stage["margin_declared"] = entry
        self._commit(record)

    def log_look(self, begun: Sequence[dict[str, Any]], look: dict[str, Any]) -> None:
        """A look taken: its decisions on the current stage's entry of the stage log (`begun`: the entries a run
        from before stages lacks, appended first). A stage decided again — by another test or plan — keeps what it
        said before under `superseded`."""
        record = self._copy()
        log = record.setdefault(STAGES, [])
        log += list(begun)
        entry = log[-1]
        if entry.get("decisions") not in (None, look["decisions"]):
            entry.setdefault("superseded", []).append({k: entry[k] for k in look if k in entry})
        entry.update(look)
        self._commit(record)

    def begin_stage(self, study: dict[str, Any], begun: Sequence[dict[str, Any]], entry: dict[str, Any]) -> None:
        """The next stage begins: the study with its seeds recorded, its entry appended to the stage log."""
        record = self._copy()
        record["study"] = study
        record.setdefault(STAGES, []).extend([*begun, entry])
        self._commit(record)

    def log_step_session(self, entry: dict[str, Any]) -> None:
        """A session of a step on a finished run (held-out, re-scoring) in study.json's `reevaluations`: appended, or
        its entry (the same start) updated."""
        record = self._copy()
        log = record.setdefault(REEVALUATIONS, [])
        if log and log[-1].get("started_utc") == entry["started_utc"]:
            log[-1] = dict(entry)
        else:
            log.append(dict(entry))
        self._commit(record)

    def add_learners(self, labels: Iterable[str], utc: str | None = None) -> None:
        """Held-out learners join the run's record (`[final] learners`), after those it has; those it did not run with
        are logged as added afterwards (`LEARNERS_ADDED`), with when (`utc`)."""
        record = self._copy()
        final = record["study"].setdefault("final", {})
        had = list(final.get("learners", []))
        new = [x for x in labels if x not in had]
        final["learners"] = had + new
        if new and utc is not None:
            record.setdefault(LEARNERS_ADDED, []).append({"learners": new, "utc": utc})
        self._commit(record)

    @property
    def learners_added(self) -> tuple[str, ...]:
        """The held-out learners added after the run began (`--reevaluate RUN --learners`), as its log records them."""
        return tuple(x for entry in self.record.get(LEARNERS_ADDED, []) for x in entry["learners"])

    def keep_pilot(self, pilot: dict[str, Any]) -> None:
        """The pilot's answers this run is compared with, kept as pilot.json (`report.against`)."""
        self._writing()
        write_json(self.run_dir / PILOT_FILE, pilot)
        self.__dict__["pilot"] = pilot

    # -- writing: the score tables ------------------------------------------------------------------------------
    def append_heldout(self, rows: Iterable[Sequence]) -> None:
        """A held-out job's rows into heldout.csv, flushed before the next job is looked at; onto a heldout.csv
        from before a column was added, in the columns it has."""
        path, columns = self.run_dir / HELDOUT_CSV, final_scores.HELDOUT_COLUMNS
        if path.is_file():
            with path.open() as f:
                header = f.readline().strip().split(",")
            rows = [[value for value, name in zip(row, columns) if name in header] for row in rows]
        self._append(HELDOUT_CSV, columns, rows)

    def append_finals(self, rows: Iterable[Sequence]) -> None:
        self._append(final_scores.FINALS_CSV, final_scores.FINALS_COLUMNS, rows)

    def append_anytime(self, rows: Iterable[Sequence]) -> None:
        self._append(final_scores.ANYTIME_CSV, final_scores.ANYTIME_COLUMNS, rows)

    def _append(self, name: str, columns: Sequence[str], rows: Iterable[Sequence]) -> None:
        self._writing()
        final_scores.append_rows(self.run_dir / name, columns, rows)
        for view in _SCORE_VIEWS:
            self.__dict__.pop(view, None)

    def adopt(self, shipped: "RunStore") -> int:
        """Re-shipping a run keeps what its shipped copy holds beyond it: heldout.csv's rows of every trial this
        folder has not scored itself and whose final rules are still the ones scored, that step's sessions and its
        learners (`--reevaluate` ran on the shipped folder, the run went on after), and its pilot.json. Returns the
        held-out rows adopted."""
        self._writing()
        if not shipped.run_dir.is_dir() or shipped.run_dir.resolve() == self.run_dir.resolve():
            return 0
        if shipped.pilot is not None and self.pilot is None:  # the file as it is: a re-ship churns no byte
            shutil.copy2(shipped.run_dir / PILOT_FILE, self.run_dir / PILOT_FILE)
            self.__dict__["pilot"] = shipped.pilot
        theirs = shipped.run_dir / HELDOUT_CSV
        if not theirs.is_file():
            return 0
        rows = pd.read_csv(theirs, dtype=str, keep_default_na=False)  # as text: the rows kept are the rows written
        ours = self.run_dir / HELDOUT_CSV
        held = pd.read_csv(ours, dtype=str, keep_default_na=False) if ours.is_file() else rows.iloc[:0]
        finals = {trial_name(self.design, c): final_scores.final_rules(self.trial_rows[c.key])
                  for c in self.design.cells if c.key in self.trial_rows}  # fmt: skip
        scored_here = rows.set_index(["trial", "learner"]).index.isin(held.set_index(["trial", "learner"]).index)
        keep = ~scored_here & (rows["final_rules"] == rows["trial"].map(finals))
        if not keep.any():
            return 0
        pd.concat([held, rows[keep]]).to_csv(ours, index=False)
        for view in _SCORE_VIEWS:
            self.__dict__.pop(view, None)
        record = self._copy()
        log = record.get(REEVALUATIONS, [])
        started = {entry.get("started_utc") for entry in log}
        log += [entry for entry in shipped.record.get(REEVALUATIONS, []) if entry.get("started_utc") not in started]
        record[REEVALUATIONS] = sorted(log, key=lambda entry: entry.get("started_utc", ""))
        self._commit(record)
        self.add_learners(shipped.record["study"].get("final", {}).get("learners", []))
        return int(keep.sum())

    def ship(self, out: Path, names: Iterable[str], plots: Path | None) -> None:
        """Copy these files (and the plots) into `out`, a folder under docs/results/: study.json with no path of
        this machine's home in it (older releases recorded the calibration store's)."""
        out.mkdir(parents=True, exist_ok=True)
        for name in names:
            if (self.run_dir / name).is_file():
                shutil.copy2(self.run_dir / name, out / name)
        if (out / STUDY_FILE).is_file():
            record = (out / STUDY_FILE).read_text()
            (out / STUDY_FILE).write_text(record.replace(f"({Path.home()}/", "(~/"))
        if plots is not None:
            (out / plots.name).mkdir(exist_ok=True)
            for png in sorted(plots.glob("*.png")):
                shutil.copy2(png, out / plots.name / png.name)

    def _copy(self) -> dict[str, Any]:
        """study.json as a new dict to change: the store's own is never half-changed."""
        return json.loads(json.dumps(self.record))


_RECORD_VIEWS = ("folders", "trials", "has_records", "scan_table", "scan_bests", "trials_table", "generations_table",
                 "trial_rows", "costs")  # fmt: skip
_SCORE_VIEWS = ("heldout", "anytime", "finals", "scores", "costs")


def _number(value) -> float:
    return float(value) if value is not None and pd.notna(value) else float("nan")


def open_store(run_dir: Path, lock=None) -> RunStore:
    """A run folder's store (`RunStore`); StoreError, one line, for what is not a run folder. With the session's
    `run_lock.RunLock`, it writes too."""
    return RunStore(run_dir, lock).checked()


def append_record(path: Path, record: dict[str, Any]) -> None:
    """A trial's own record: one line appended and flushed to disk (a killed trial loses at most the line being
    written). The trial writes it, into the folder of its own that the session's Tune made for it."""
    line = json.dumps(json_safe(record), allow_nan=False)
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
