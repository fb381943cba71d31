"""`python -m bilevel_tune.summary RUN_DIR` (or `bilevel-summary`): a run folder's summary, rebuilt from the folder alone.

It writes the summary's files (`report.outputs`: summary.md, answers.csv, verdicts.json, the sections' tables,
plots) into a run folder or a shipped one under docs/results/ — which keeps no records, only the tables a summary
wrote —, so it rebuilds a shipped summary as its run wrote it. It holds the folder's lock while it writes: on a
folder that another live session holds it refuses in one line (exit 2). `--ship DIR` copies what a reader needs
into DIR and writes its run.md, keeping what DIR holds beyond the run (`RunStore.adopt`: a held-out step run on the
shipped copy, its pilot); `--against PILOT` keeps a pilot's answers to compare with (pilot.json).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from bilevel_tune.cli import run_record
from bilevel_tune.report import against
from bilevel_tune.report.columns import SummaryError
from bilevel_tune.report.outputs import render, write_summary
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.run_folder import GENERATIONS_CSV, GENERATIONS_FILE, HELDOUT_CSV, STUDY_FILE, TRIALS_CSV
from bilevel_tune.study_data.run_lock import LockError
from bilevel_tune.study_data.run_store import RunStore, StoreError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bilevel_tune.summary", description=__doc__.splitlines()[0])
    parser.add_argument(
        "run_dir", type=Path, help="a run folder made by python -m bilevel_tune.study, or a shipped one (docs/results/)"
    )
    parser.add_argument("--no-plots", action="store_true", help="tables and verdicts only")
    parser.add_argument("--record", action="store_true", help="also print the run's record: sessions, stages, pace")
    parser.add_argument("--ship", type=Path, metavar="DIR", help="copy the summary, tables and plots to DIR with run.md")
    parser.add_argument("--notes", type=Path, metavar="FILE", help="markdown for run.md: commands, what else ran")
    parser.add_argument(
        "--against", type=Path, metavar="PILOT",
        help="compare each answer with the same comparison in PILOT's (a run's or a shipped folder): kept as pilot.json",
    )  # fmt: skip
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help exits 0, a bad argument 2 (its one-line usage is printed)
        return int(exit_.code or 0)
    try:
        notes = _notes(args.notes)
        with _held(_opened(args.run_dir)) as store:  # refused first while another session holds the folder
            if (args.record or args.ship) and not store.has_records:
                # refused before the summary is rewritten: a bad flag writes nothing
                raise SummaryError(f"{args.run_dir} keeps no trial records: its record and shipping need the run folder")
            pilot = against.pilot_record(args.against) if args.against else None  # checked before anything is written
            if args.ship and (adopted := store.adopt(RunStore(args.ship))):
                print(f"held-out: kept {adopted} row(s) of {args.ship / HELDOUT_CSV} (trials whose final rules it scored)")
            if pilot is not None:
                store.keep_pilot(pilot)
            summary = write_summary(store, with_plots=not args.no_plots)
            run_record.requote(store, summary)  # a shipped folder's run.md quotes its sections as they now are
            print(render(summary))
            if args.record or args.ship:
                run_record.report(store, summary, args.ship, notes)
    except (SummaryError, StoreError, LockError) as err:
        print(f"bilevel_tune.summary: error: {err}", file=sys.stderr)
        return 2
    return 0


def _opened(run_dir: Path) -> RunStore:
    """The folder's store, read only; SummaryError, one line, for a folder holding neither records nor tables."""
    store = RunStore(run_dir)
    if run_dir.is_dir() and not store.has_records and not store.ships_tables:
        raise SummaryError(
            f"{run_dir} holds neither trial records (*/{GENERATIONS_FILE}) nor a summary's tables ({STUDY_FILE}, "
            f"{TRIALS_CSV}, {GENERATIONS_CSV}): give a run folder made by python -m bilevel_tune.study, or one under "
            "docs/results/"
        )
    return store.checked()


@contextlib.contextmanager
def _held(store: RunStore):
    """The folder held for this command's writes; refused in one line while another live session holds it."""
    try:
        with run_lock.held(store.run_dir, fresh=False, out=lambda line: None) as lock:
            yield store.held_by(lock)
    except LockError as err:
        raise SummaryError(
            f"{err}: this command writes nothing into a folder another session holds; see where it stands with "
            f"python -m bilevel_tune.study --status {store.run_dir}"
        ) from None


def _notes(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_text()
    except OSError as err:
        raise SummaryError(f"--notes {path}: {err.strerror}") from None


if __name__ == "__main__":
    sys.exit(main())
