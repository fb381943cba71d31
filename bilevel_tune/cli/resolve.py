"""What a command runs on, resolved and checked before anything is written: the study and its run folder
(`resolve_run`: a fresh run's, or the recorded one a resume continues, with what the resume declares), and the
W&B mode. Bad input raises `UsageError`, one line.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from bilevel_tune.cli.options import RunOptions, UsageError, changed_on_resume, resolve_study
from bilevel_tune.study_data.definition import Study, StudyError, load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import (
    RunFolderError,
    check_results_root,
    find_run,
    new_run_dir,
)
from bilevel_tune.study_data.run_store import RunStore, StoreError, open_store
from bilevel_tune.study_data.stages import check_stageable, declared_margin, extended_plan
from bilevel_tune.tune_edge.tracking import TrackingError, resolve_wandb_mode

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout: its .wandb.env, its docs/results


def resolve_run(options: RunOptions) -> tuple[Study, Path, RunStore]:
    """(study, results root, the run folder's store) for a fresh run or a resume — the store read only, opened once
    for the command: its session takes the folder's lock before it writes (`RunStore.held_by`); UsageError on
    anything wrong."""
    try:
        root = check_results_root(options.results)
        if options.max_failures < 0:
            raise UsageError(f"--max-failures {options.max_failures} must be ≥ 0")
        if options.address is not None and options.num_cpus is not None:
            raise UsageError("--num-cpus sizes a Ray of the study's own; with --address the cluster's CPUs are used")
        if options.extend_plan is not None and not (options.resume and options.until_decided):
            raise UsageError(
                f"--extend-plan {options.extend_plan} grows a run's plan on --resume --until-decided; a new run sets "
                f"its own with --set decide.max_seeds={options.extend_plan}"
            )
        if options.declare_margin is not None and not options.resume:
            raise UsageError(
                f"--declare-margin {options.declare_margin:g} declares a margin on a resumed run, before its next "
                f"look; a new run sets its own with --set decide.margin={options.declare_margin:g}"
            )
        if not options.resume:
            study = _check_stages(resolve_study(options), options)
            return study, root, RunStore(new_run_dir(root, study.name, options.name, _utc_stamp()))
        run_dir = find_run(root, load_study(options.study).name, options.name)
        store = open_store(run_dir)  # read only: the session takes the folder's lock before it writes
        recorded = store.study
        margins = [value for key, value in options.settings or () if key.strip() in ("decide.margin", "margin")]
        if margins:
            raise UsageError(
                f"--set decide.margin={margins[0]} on a resumed run: a margin is declared before the run's next look "
                f"with --declare-margin {margins[0]} (recorded in study.json), never by --set"
            )
        changed = changed_on_resume(options, recorded)
        if changed:
            raise UsageError(
                f"--resume continues the run as its study.json records it; {', '.join(changed)} would change it "
                "(drop it, or start a new run)"
            )
        if options.extend_plan is not None:
            recorded = extended_plan(recorded, options.extend_plan)
        if options.declare_margin is not None:
            recorded = declared_margin(recorded, options.declare_margin, store.looks_taken)
        return _check_stages(recorded, options), root, store
    except (StudyError, RunFolderError, StoreError) as err:
        raise UsageError(str(err)) from None


def _check_stages(study: Study, options: RunOptions) -> Study:
    """A study run in stages starts from its grid's seeds (as many as a stage adds), and compares factors it has."""
    from bilevel_tune.verdicts.family import check_compare, check_equal_budget

    design = compile_design(study)
    check_compare(design)
    check_equal_budget(design)
    if options.until_decided:
        check_stageable(study)
    return study


def _utc_stamp() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def wandb_mode(options: RunOptions) -> str:
    """The W&B mode the run will use (`auto` resolved by the credentials found), or one line on what is wrong."""
    try:
        return resolve_wandb_mode(options.wandb, key_dirs=(Path.cwd(), REPO_ROOT))
    except TrackingError as err:
        raise UsageError(str(err)) from None
