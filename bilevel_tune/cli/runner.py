"""Running a study: options in, a run folder and an honest exit status out.

    outcome = run_study(RunOptions(study="weekend", budget="quick", wandb="offline"))

A run, top to bottom: resolve the study and its run folder → start or join
Ray → check that every node sees the results root → plan the CPUs →
write study.json → Tune, fresh or restored → summary and trackers → the
last line (finished / errored / interrupted, and how to resume). The study
and folder come from `resolve`, the plan from `planner` (whose `dry_run`
stops there and prints it with an ETA), study.json's sessions from
`session_log`. Bad input raises `UsageError` (the CLI prints one line,
exit 2) before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bilevel_tune.cli import planner, session_log, staging
from bilevel_tune.cli.options import (  # RunOptions, UsageError: the runner's public names too
    RunOptions,
    UsageError,
    fields_of,
    resume_command,
)
from bilevel_tune.cli.resolve import resolve_run, wandb_mode
from bilevel_tune.planning import calibration
from bilevel_tune.planning.plan import Plan, describe_plan, hms
from bilevel_tune.runtime import cluster, lifecycle
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.definition import Study, StudyError
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import SCAN_CSV, TENSORBOARD_DIR, TRIALS_CSV, RunFolderError
from bilevel_tune.study_data.run_store import RunStore, StoreError
from bilevel_tune.tune_edge import tracking


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    exit_code: int
    finished: int
    errored: int
    interrupted: int
    last_line: str


# -- a run ------------------------------------------------------------------------------------
def run_study(options: RunOptions, out: Callable[[str], None] = print) -> RunOutcome:
    """Run (or resume) a study to the end, or to an interrupt; never raises for what happened to trials."""
    clock = calibration.RunClock.now()
    study, root, store = resolve_run(options)
    run_dir = store.run_dir
    mode = wandb_mode(options)
    with contextlib.ExitStack() as hold:
        try:  # one session a run folder: refused in one line while another holds it (run_lock), before any look at
            # a folder that session may still be writing (a resume just after its start finds no tuner.pkl yet)
            lock = hold.enter_context(run_lock.held(run_dir, fresh=not options.resume, out=out))
        except RunFolderError as err:
            raise UsageError(str(err)) from None
        store.held_by(lock)  # the folder's one reader and writer for this command, writing from here
        if options.resume:
            _check_restorable(study, store)
        outcome = _run_held(study, options, root, store, mode, clock, out)
    # the last line after Ray's: a message Ray prints late (a lost node's, say) would otherwise follow it
    out(outcome.last_line)
    learned = clock.learned()
    if learned and not options.dashboard:  # TensorBoard's and Ray Dashboard's start are not a trial's overhead
        calibration.learn_overheads(mode, study, learned)
    return outcome


def _check_restorable(study, store: RunStore) -> None:
    """A resume of a run with unfinished trials needs Tune's state to restore them (one line otherwise)."""
    if _unfinished(study, store) and not staging.has_experiment(store.run_dir) and not study.stages:
        from bilevel_tune.tune_edge.experiment import RestoreError, check_restorable

        try:
            check_restorable(store.run_dir)
        except RestoreError as err:
            raise UsageError(str(err)) from None


def _run_held(study, options, root, store: RunStore, mode, clock, out) -> RunOutcome:
    """The session, its run folder held: Ray, the stages, the summary, Ray left; returns the outcome."""
    signals = lifecycle.Signals().install()
    with lifecycle.Scratch() as scratch, _live_view(options, store.run_dir, scratch, out):
        started_ray = _connect(options, scratch)
        try:
            signals.install()  # ray.init replaced SIGTERM's handler
            if options.dashboard:
                from bilevel_tune.views.live_view import ray_dashboard_line

                out(ray_dashboard_line(own_ray=cluster.requested_address(options.address) is None))
            outcome = _run_on_cluster(study, options, root, store, mode, signals, clock, out)
        except BaseException:
            _leave_ray(options, scratch, started_ray, signals)
            raise
        try:
            _leave_ray(options, scratch, started_ray, signals)
        except KeyboardInterrupt:  # a Ctrl-C while Ray shuts down: the study's end stands, Ray's exit hook finishes
            pass
    return outcome


def _leave_ray(options: RunOptions, scratch: lifecycle.Scratch, started_ray: bool, signals: lifecycle.Signals) -> None:
    """Remove the run's scratch from every node, shut down the Ray this run started or joined, restore the signals."""
    try:
        if cluster.requested_address(options.address):
            cluster.remove_on_every_node(scratch.path)
        if started_ray:
            from bilevel_tune.runtime import ray_init

            ray_init.shutdown()
    finally:
        signals.restore()


@contextlib.contextmanager
def _live_view(options: RunOptions, run_dir: Path, scratch: lifecycle.Scratch, out):
    """With --dashboard: TensorBoard serving the run's curves from before Ray starts until the study ends.

    It is up (or the run stops with one line, exit 2) before Ray starts: a host it
    cannot bind would cost Ray's dashboard a minute to find out.
    """
    if not options.dashboard:
        yield
        return
    from bilevel_tune.views.live_view import LOOPBACK, LiveView, LiveViewError

    log = Path(scratch.path) / "tensorboard.log"
    with LiveView(run_dir / TENSORBOARD_DIR, options.dashboard_host or LOOPBACK, log=log) as view:
        try:
            out(view.line())
        except LiveViewError as err:
            raise UsageError(str(err)) from None
        yield


def _connect(options: RunOptions, scratch: lifecycle.Scratch) -> bool:
    """Start a Ray of the study's own, or join the cluster asked for; True when this call started or joined it."""
    from bilevel_tune.runtime import ray_init

    address = cluster.requested_address(options.address)
    try:
        if address is not None:
            address = cluster.probe_address(address, cluster.address_label(options.address))
        return ray_init.init(
            ray_init.RuntimeConfig(
                address=address,
                num_cpus=options.num_cpus,
                include_dashboard=options.dashboard,
                dashboard_host=options.dashboard_host,
                thread_cap=options.thread_cap,
                extra_env=tuple(scratch.env().items()),
            )
        )
    except cluster.ClusterError as err:
        raise UsageError(str(err)) from None
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f"--address {address}: cannot connect to a Ray cluster" if address else "cannot start a local Ray"
        raise UsageError(f"{where} ({str(err).splitlines()[0]})") from None


def _run_on_cluster(study, options, root, store: RunStore, mode, signals, clock: calibration.RunClock, out) -> RunOutcome:
    """Plan this session, run the study's current stage (and with --until-decided each next one), summarise: the
    last line says what happened."""
    from bilevel_tune.tune_edge import experiment

    try:
        cluster.check_shared_storage(root)
    except cluster.ClusterError as err:
        raise UsageError(str(err)) from None
    watch = experiment.ClusterWatch(wait_s=options.node_wait)
    started = _start_session(study, options, store, mode, out)
    first, start = True, time.time()
    try:
        while True:
            counts = _run_stage(study, options, store, mode, watch, clock, out, first)
            first = False
            if counts[1] or counts[2] or watch.reason:  # errored or interrupted: the stage stays open
                if counts[2]:
                    signals.note_tune_interrupt()
                break
            grown = _decide_stage(study, store, out) if options.until_decided else None
            if grown is None:
                break
            study = grown
        if study.final.learners and not (counts[1] or counts[2] or watch.reason):  # after the last stage
            _held_out(study, store, out)
        summarised = _summarise(store, mode, study, out)
        if watch.reason:
            out(f"stopped: {watch.reason}")
    except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: stop now; the records are fsynced per generation
        signals.received = signals.received or signal.SIGINT
        counts, summarised = _counts(study, store, errored=0), True
    if watch.reason or not summarised:  # our own stop, not the user's; or a run whose summary failed: not done
        code = lifecycle.EXIT_ERRORED
    else:
        code = signals.exit_code or (lifecycle.EXIT_ERRORED if counts[1] else lifecycle.EXIT_OK)
    line = _last_line(counts, time.time() - start, store.run_dir, options, code)
    try:
        session_log.record_end(store, started, time.time() - clock.process_start, code, counts)
    except (OSError, ValueError) as err:  # the records are safe; only this session's end goes unrecorded
        out(f"study.json: this session's end not recorded ({type(err).__name__}: {err})")
    return RunOutcome(store.run_dir, code, *counts, line)  # its line is printed once Ray is gone (run_study)


def _unfinished(study: Study, store: RunStore) -> list:
    """The study's trials without a final record, in Tune's order."""
    from bilevel_tune.tune_edge.experiment import tune_order

    done = store.finished_cells()
    return [c for c in tune_order(study) if c.key not in done]


def _start_session(study: Study, options: RunOptions, store: RunStore, mode: str, out) -> str:
    """This session's plan for the whole command (printed) and its entry in study.json; returns its start."""
    plan = _plan_session(study, options, store, mode)
    describe_plan(study, plan, out, what="what is left" if options.resume else "the whole command")
    return session_log.record_start(study, store, plan, options, mode)


def _plan_session(study: Study, options: RunOptions, store: RunStore, mode: str) -> Plan:
    skip = store.finished_cells()
    return planner.plan_run(study, options, cluster.cluster_cpus(), mode, skip, probe=False)


def _run_stage(study, options, store: RunStore, mode, watch, clock, out, first: bool) -> tuple[int, int, int]:
    """Run the study's unfinished trials — its current stage —: the folder's Tune experiment restored when it holds
    one that ran, else a fresh one over them. Returns (finished, errored, interrupted) over every stage."""
    from bilevel_tune.tune_edge import experiment

    run_dir = store.run_dir
    cells = _unfinished(study, store)
    if not cells:
        return _counts(study, store, errored=0)
    calibrating = time.time()
    plan = _plan_session(study, options, store, mode)
    clock.probing_s += time.time() - calibrating  # a probe is not part of what the next ETA's launch predicts
    if not first:
        describe_plan(study, plan, out, what=f"stage {staging.current_stage(study)}")
    shards = {c.key: plan.shards_of(c.key) if c in cells else 1 for c in compile_design(study).trial_cells}
    packed = experiment.Packed.of(plan.packs)
    session = experiment.SessionOptions(
        callbacks=(
            *tracking.callbacks(mode, group=run_dir.name, tags=_tags(study)),
            experiment.TrialCurves(run_dir, study),
            watch,
        ),
        max_failures=options.max_failures,
        max_concurrent=options.max_concurrent,
    )
    os.environ.setdefault(
        "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0"
    )  # a checkpoint per generation is the design
    try:
        if options.resume and first and staging.has_experiment(run_dir):
            tuner = experiment.restored_tuner(study, run_dir, shards, session, packed)
        else:
            tuner = experiment.fresh_tuner(study, run_dir, shards, session, cells, packed)
    except experiment.RestoreError as err:
        raise UsageError(str(err)) from None
    fit_start = time.time()
    if first:
        clock.fit_start = fit_start
    with experiment.OneLineTrialFailures(), experiment.lake_pools(plan.packs):
        grid = tuner.fit()
    clock.fit_end = time.time()
    store.refresh()  # the trials wrote their records
    counts = _counts(study, store, errored=grid.num_errors)
    if first and not options.resume and counts[1] == counts[2] == 0:
        clock.trials = calibration.trial_figures(plan, _trial_results(grid), clock.fit_end - fit_start)
    return counts


def _decide_stage(study: Study, store: RunStore, out) -> Study | None:
    """The finished stage decided; the study with its next stage when a comparison is still open."""
    from bilevel_tune.verdicts.decide import DecideError

    try:
        decisions = staging.decide_run(study, store)
    except DecideError as err:
        out(f"stage {staging.current_stage(study)}: cannot decide ({err}); no further stage")
        return None
    staging.record_decisions(store, study, decisions)
    out(staging.describe_decisions(study, decisions))
    if decisions.finished and decisions.looks < decisions.stages:
        left = decisions.stages - decisions.looks
        out(f"every comparison decided after stage {decisions.looks} of {decisions.stages}: the run ends early, its "
            f"last {left} stage(s) not needed")  # fmt: skip
    return staging.advance(study, store, decisions)


def _held_out(study: Study, store: RunStore, out, extra=()) -> dict:
    """The held-out step on the run's finished trials (`reevaluation`): every learner scores their final rules and
    status quo; resumable."""
    from bilevel_tune.cli import reevaluation

    return reevaluation.run_step(study, store, cluster.cluster_cpus(), out, extra=extra, commit=session_log.git_sha())


def _tags(study: Study) -> list[str]:
    """W&B tags (64 characters at most each): the study, its named budget, and whether the command line changed it."""
    tags = [f"study:{study.name}", f"budget:{study.budget_name}"]
    if study.overrides:
        tags.append("budget:overridden")
    return [t[:64] for t in tags]


def _counts(study: Study, store: RunStore, errored: int) -> tuple[int, int, int]:
    """(finished, errored, interrupted): a trial finished when its record holds the final line — in any session."""
    trials = compile_design(study).trial_cells
    finished = len(store.finished_cells() & {c.key for c in trials})
    return finished, errored, len(trials) - finished - errored


def _summarise(store: RunStore, mode: str, study: Study, out) -> bool:
    """The run's summary written and tracked; False (the run's exit status says so) when writing it raised."""
    from bilevel_tune.cli import run_record
    from bilevel_tune.report import outputs
    from bilevel_tune.tune_edge import tracking

    run_dir = store.run_dir
    try:
        store.refresh()  # what the last stage and the held-out step wrote
        summary = outputs.write_summary(store)
        run_record.requote(store, summary)  # a shipped folder re-evaluated: its run.md quotes its sections as they are
        out(outputs.render(summary))
    except Exception as err:  # noqa: BLE001 - the run's data is safe; the summary can be rebuilt from it
        out(
            f"summary failed ({type(err).__name__}: {err}); the records are intact — rebuild with: python -m bilevel_tune.summary {run_dir}"
        )
        return False
    tables = [*summary.tables(), TRIALS_CSV, SCAN_CSV]  # the sections' tables, the Answers first; the trials'
    skipped = tracking.log_summary(run_dir, mode, group=run_dir.name, tags=_tags(study), tables=tables)
    if skipped:
        out(skipped)
    out(f"\nTensorBoard: tensorboard --logdir {run_dir / TENSORBOARD_DIR}")
    if mode != "disabled":
        out(f"W&B ({mode}): runs not on the server yet upload with: {tracking.sync_command(run_dir)}")
    return True


def _trial_results(grid) -> list[tuple[list[dict], dict | None, float]]:
    """Each finished trial's records and Tune's time_total_s (its function's own time, reports included)."""
    from bilevel_tune.study_data.run_folder import GENERATIONS_FILE, read_records

    out = []
    for result in grid:
        rows, final = read_records(Path(result.path) / GENERATIONS_FILE) if result.path else ([], None)
        out.append((rows, final, float(result.metrics.get("time_total_s", 0.0))))
    return out


def _last_line(counts: tuple[int, int, int], seconds: float, run_dir: Path, options: RunOptions, code: int) -> str:
    finished, errored, interrupted = counts
    total = finished + errored + interrupted
    head = f"{finished} finished, {errored} errored, {interrupted} interrupted of {total} trials in {hms(seconds)}"
    if code == lifecycle.EXIT_OK:
        return f"{head}; results: {run_dir}"
    return f"{head}; resume with: {resume_command(options, run_dir)}"


def default_command() -> str:
    """How this process was started, as a user would type it again."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if program == "bilevel-study":
        return program
    python = Path(sys.executable)
    try:
        python_text = str(python.relative_to(Path.cwd()))
    except ValueError:
        python_text = "python"
    return f"{python_text} -m bilevel_tune.study"


# -- a finished run, scored by held-out learners ------------------------------------------------------------------
def reevaluate_run(
    options: RunOptions, run_dir: Path, dry: bool = False, out: Callable[[str], None] = print,
    final_seeds: int | None = None, budgets: tuple = (),
) -> int:
    """`--reevaluate RUN_DIR` on a finished run folder or a shipped one, from the rules its tables record (the ES is
    not run again): `--learners a,b` scores them by held-out learners (`reevaluation`), `--final-seeds N` and
    `--at-evaluations E1,E2` retrain them, and the incumbents of earlier moments, with the run's own
    (`rescoring`); then its summary is rebuilt. Resumable. Returns the exit status."""
    from bilevel_tune.cli import reevaluation, rescoring
    from bilevel_tune.study_data.learners import check_learners, with_learners

    run_dir = Path(run_dir)
    given = [f.metadata["flag"] for f in fields_of(type(options), "study") if getattr(options, f.name) not in (None, ())]
    changing = [flag for flag in given if flag != "--learners"]
    if changing or options.resume or options.until_decided:
        flags = changing + ["--resume"] * options.resume + ["--until-decided"] * options.until_decided
        raise UsageError(f"--reevaluate scores a finished run as its study.json records it; drop {', '.join(flags)}")
    store = RunStore(run_dir)  # the folder's one reader and writer for this command: the study as recorded
    try:
        if not store.has_records and not store.ships_tables:
            raise StoreError(run_dir, "holds neither trial records nor a summary's tables")
        study, trials = store.checked().study, store.trial_rows
    except (OSError, ValueError, KeyError, TypeError, RunFolderError, StoreError, StudyError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UsageError(f"--reevaluate {run_dir}: not a run folder or a shipped result ({why})") from None
    study = with_learners(study, options.learners or ())
    if not study.final.learners and not final_seeds and not budgets:
        raise UsageError(
            "--reevaluate needs something to score: --learners ppo,analytic,frozen (docs/verdicts.md), "
            "--final-seeds N or --at-evaluations 1/8,1/4,1/2"
        )
    if final_seeds or budgets:
        _check_rescorable(study, store, final_seeds, budgets)
    try:
        check_learners(study)
    except StudyError as err:
        raise UsageError(str(err)) from None
    cpus = options.num_cpus or os.cpu_count() or 1
    if dry:
        planner.describe_held_out(study, trials, (), cpus, options, out, reevaluation.scored_already(store))
        return lifecycle.EXIT_OK
    mode = wandb_mode(options)
    start, since = time.time(), reevaluation.now_utc()  # the sessions this command logs start after `since`
    signals = lifecycle.Signals().install()
    code = lifecycle.EXIT_OK
    try:
        with run_lock.held(run_dir, fresh=False, out=out) as lock, lifecycle.Scratch() as scratch:
            store.held_by(lock)
            started_ray = _connect(options, scratch)
            try:
                signals.install()
                if options.learners:  # the learners join the run's record ([final]), nothing else changes
                    store.add_learners(study.final.learners, utc=reevaluation.now_utc())
                if final_seeds or budgets:
                    rescoring.run_step(
                        study, store, final_seeds, budgets, cluster.cluster_cpus(), out, commit=session_log.git_sha()
                    )
                    store.refresh()
                if study.final.learners and (options.learners or not (final_seeds or budgets)):
                    _held_out(study, store, out)
                if not _summarise(store, mode if (run_dir / "tensorboard").is_dir() else "disabled", study, out):
                    code = lifecycle.EXIT_ERRORED
            except KeyboardInterrupt:
                code = lifecycle.EXIT_INTERRUPTED
            finally:
                _leave_ray(options, scratch, started_ray, signals)
    except RunFolderError as err:
        raise UsageError(str(err)) from None
    entries = reevaluation.sessions_since(store, since)  # as recorded: a step stopped midway counts its jobs
    scored, failed = sum(e.get("scored", 0) for e in entries), sum(e.get("failed", 0) for e in entries)
    said = f"{scored} job(s) scored, {failed} failed, in {hms(time.time() - start)}"
    if code == lifecycle.EXIT_OK and not failed:
        out(f"re-evaluation: {said}; results: {run_dir}")
    else:
        code = code if code != lifecycle.EXIT_OK else lifecycle.EXIT_ERRORED
        again = [f"--learners {shlex.quote(','.join(study.final.learners))}"] if options.learners else []
        again += [f"--final-seeds {final_seeds}"] if final_seeds else []
        again += [f"--at-evaluations {','.join(b.text for b in budgets)}"] if budgets else []
        out(f"re-evaluation: {said}; resume with: {options.command} --reevaluate {run_dir} {' '.join(again)}")
    return code


def _check_rescorable(study: Study, store: RunStore, final_seeds: int | None, budgets: tuple) -> None:
    """Re-scoring takes a run that has ended, more final seeds than it recorded, and budgets every trial reached."""
    from bilevel_tune.cli import rescoring

    recorded = study.budget.final_eval_seeds
    if final_seeds is not None and final_seeds < recorded:
        raise UsageError(f"--final-seeds {final_seeds} is below the {recorded} final seeds the run recorded: give {recorded} or more")
    run_dir = store.run_dir
    held, who = run_lock.holder(run_dir)
    unfinished = [s for s in store.trials_table["status"] if s not in ("complete", "stopped")]
    if held or unfinished:
        why = who if held else f"{len(unfinished)} trial(s) not finished"
        raise UsageError(f"--reevaluate {run_dir}: the run is still running ({why}); re-score it once it has ended")
    runs = rescoring.trial_runs(study, store.trial_rows, store.generations_table)
    if not runs:
        raise UsageError(f"--reevaluate {run_dir}: no finished ES trial to re-score")
    rescoring.check_budgets(budgets, runs)
