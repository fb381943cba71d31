"""A run in stages (`--until-decided`): decide a finished stage, record it, and set up the next one.

Each stage is a Tune experiment of its own in the same run folder (Tune restores
a run; it does not grow one): its trials' folders sit beside the earlier ones',
and before the next stage starts its Tune state moves to `tune-stages/<k>/`, so
the folder's Tune experiment is always the current stage's. The order makes a
stage safe to stop anywhere: the finished stage's state is set aside, then
study.json records the next stage (the study with its seeds), then Tune starts
it; a resume finds either that stage's experiment to restore or none, and then
starts the stage's unfinished trials afresh.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.results_store import open_results
from bilevel_tune.study_data.run_folder import STAGES, read_study_file, trial_name, write_json
from bilevel_tune.study_data.stages import next_stage, with_stage
from bilevel_tune.verdicts import decide, plan_mark

TUNER_FILE = "tuner.pkl"
TUNE_STATE = (TUNER_FILE, "experiment_state-*.json", "basic-variant-state-*.json")
ARCHIVE_DIR = "tune-stages"  # <k>/: stage k's Tune state, once the next stage has begun


def current_stage(study: Study) -> int:
    return len(study.stages) + 1


def has_experiment(run_dir: Path) -> bool:
    """Does the folder hold a Tune experiment that ran (its tuner and at least one saved state)?"""
    run_dir = Path(run_dir)
    return (run_dir / TUNER_FILE).is_file() and any(run_dir.glob(TUNE_STATE[1]))


def looks_taken(run_dir: Path) -> int:
    """The looks the run has taken: its stages decided so far (study.json's stage log)."""
    return open_results(run_dir).looks_taken


def note_margin(data: dict[str, Any], study: Study, record: dict[str, Any]) -> None:
    """A margin declared on a resumed run, in the stage log: on the entry of the stage whose look it decides from."""
    for entry in _log(data, study):
        if entry["stage"] == record["from_look"]:
            entry["margin_declared"] = record


def decide_run(study: Study, run_dir: Path) -> decide.Decisions:
    """The decisions on the run's finished trials (`decide.decide`), from their scores as the folder's results store
    reads them (by cell key: the same scores the summary's Answers decide from)."""
    names = {c.key: trial_name(study, c) for c in study.grid.cells()}
    return decide.decide(study, open_results(run_dir).final_objectives(study.decide.score), names)


def record_decisions(run_dir: Path, study: Study, decisions: decide.Decisions) -> None:
    """The current stage's entry in study.json's stage log, with what was decided after it."""
    data = read_study_file(run_dir)
    entry = _log(data, study)[-1]
    record = {
        "decided_utc": _now(), "looks": decisions.looks, "test": decisions.test, "max_seeds": study.decide.max_seeds,
        "plan_fingerprint": plan_mark.fingerprint(plan_mark.decision_plan(study)), "decisions": decisions.record(),
    }  # fmt: skip
    if entry.get("decisions") not in (None, record["decisions"]):  # decided again, by another test or plan: kept
        earlier = {k: entry[k] for k in record if k in entry}
        entry.setdefault("superseded", []).append(earlier)
    entry.update(record)
    write_json(Path(run_dir) / "study.json", data)


def advance(study: Study, run_dir: Path, decisions: decide.Decisions) -> Study | None:
    """The study with its next stage — seeds for the cells of the comparisons still open —, recorded in
    study.json; None when every comparison is decided or the cells hold the most seeds allowed."""
    stage = next_stage(study, decisions.open_groups)
    if stage is None:
        return None
    grown = with_stage(study, stage)
    _set_aside_tune_state(Path(run_dir), current_stage(study))
    data = read_study_file(run_dir)
    log = _log(data, study)
    data["study"] = grown.to_dict()
    log.append(_entry(grown, current_stage(grown)))
    write_json(Path(run_dir) / "study.json", data)
    return grown


def describe_decisions(study: Study, decisions: decide.Decisions) -> str:
    return "\n".join([f"stage {current_stage(study)} decided:", *decide.describe(decisions)])


def _log(data: dict[str, Any], study: Study) -> list[dict[str, Any]]:
    """study.json's stage log, begun (for a run made before stages, or stage 1) where it is missing."""
    log = data.setdefault(STAGES, [])
    for stage in range(len(log) + 1, current_stage(study) + 1):  # the grid's stage began with the run
        log.append(_entry(study, stage, data.get("provenance", {}).get("started_utc") if stage == 1 else None))
    return log


def _entry(study: Study, stage: int, started: str | None = None) -> dict[str, Any]:
    cells = study.grid.stage_cells(stage)
    return {
        "stage": stage,
        "seeds": list(study.grid.stage_seeds(stage)),
        "trials": [trial_name(study, c) for c in cells],
        "started_utc": started or _now(),
    }


def _set_aside_tune_state(run_dir: Path, stage: int) -> None:
    """Move the finished stage's Tune state to tune-stages/<stage>/: the folder's experiment becomes the next's."""
    target = run_dir / ARCHIVE_DIR / str(stage)
    target.mkdir(parents=True, exist_ok=True)
    for pattern in TUNE_STATE:
        for path in run_dir.glob(pattern):
            shutil.move(str(path), target / path.name)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()
