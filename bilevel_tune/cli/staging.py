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
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import trial_name
from bilevel_tune.study_data.run_store import RunStore
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


def decide_run(study: Study, store: RunStore) -> decide.Decisions:
    """The decisions on the run's finished trials (`decide.decide`), on the scores every look decides from
    (`RunStore.look_scores`: by cell key, the same scores the summary's Answers decide from)."""
    design = compile_design(study)
    names = {c.key: trial_name(design, c) for c in design.cells}
    return decide.decide(design, store.look_scores(study.decide.score), names)


def record_decisions(store: RunStore, study: Study, decisions: decide.Decisions) -> None:
    """The current stage's entry in study.json's stage log, with what was decided after it."""
    look = {
        "decided_utc": _now(), "looks": decisions.looks, "test": decisions.test, "max_seeds": study.decide.max_seeds,
        "plan_fingerprint": plan_mark.fingerprint(plan_mark.decision_plan(compile_design(study))),
        "decisions": decisions.record(),
    }  # fmt: skip
    store.log_look(begun(store, study), look)


def advance(study: Study, store: RunStore, decisions: decide.Decisions) -> Study | None:
    """The study with its next stage — seeds for the cells of the comparisons still open —, recorded in
    study.json; None when every comparison is decided or the cells hold the most seeds allowed."""
    stage = next_stage(study, decisions.open_groups)
    if stage is None:
        return None
    grown = with_stage(study, stage)
    _set_aside_tune_state(store.run_dir, current_stage(study))
    store.begin_stage(grown.to_dict(), begun(store, study), _entry(grown, current_stage(grown)))
    return grown


def describe_decisions(study: Study, decisions: decide.Decisions) -> str:
    return "\n".join([f"stage {current_stage(study)} decided:", *decide.describe(decisions)])


def begun(store: RunStore, study: Study) -> list[dict[str, Any]]:
    """The stage log's entries up to the current stage that it lacks (a run made before stages, or stage 1): the
    grid's stage began with the run."""
    started = store.record.get("provenance", {}).get("started_utc")
    return [_entry(study, stage, started if stage == 1 else None)
            for stage in range(len(store.stage_log) + 1, current_stage(study) + 1)]  # fmt: skip


def _entry(study: Study, stage: int, started: str | None = None) -> dict[str, Any]:
    design = compile_design(study)
    return {
        "stage": stage,
        "seeds": list(design.stage_seeds(stage)),
        "trials": [trial_name(design, c) for c in design.stage_cells(stage)],
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
