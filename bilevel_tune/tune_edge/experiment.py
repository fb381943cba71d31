"""The Tune experiment of a study run: its grid, its Tuner — fresh, or restored with this session's options — and its watchers.

Tune pickles a run's configuration into `tuner.pkl`; `Tuner.restore` brings
it back unchanged. A resumed session may legitimately differ (trackers,
retries, concurrency, the cluster and hence the CPU plan), so `restore`
replaces exactly those parts and `Replan` hands every unfinished trial the
shards of this session's plan before any of them starts. `ClusterWatch`
stops the study, in one line, when a waiting trial needs more CPUs than the
cluster still has (a node was lost): a trial is never left pending forever.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any, Mapping

from ray import tune
from ray.tune.experiment import Trial

from bilevel_tune.core import metrics
from bilevel_tune.inner.lake_pool import start_pool
from bilevel_tune.inner.shards import SHARD_STOP_TIMEOUT_S
from bilevel_tune.runtime import ray_compat
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import Cell, trial_dirname, trial_name
from bilevel_tune.study_data.trial_plan import plans_of
from bilevel_tune.tune_edge.trainable import study_trial, trial_resources
from bilevel_tune.views import curves

UNFINISHED = (Trial.PENDING, Trial.PAUSED, Trial.ERROR)
WATCH_EVERY_S = 5.0  # at most; twice within a shorter wait


class RestoreError(RuntimeError):
    """A run folder Tune cannot restore, or an option it cannot change; one line for the user."""


def param_space(study: Study, plans: Mapping[tuple, dict], cells: list[Cell] | None = None) -> dict[str, Any]:
    """One grid axis, `trial`: every trial's plan (or these cells': a later stage's), in `tune_order` — each trial's
    whole config, so its params.json shows what it ran (`study_data.trial_plan`).

    Scan trials are not a product of the ES grid's axes, so the trials are listed rather than
    crossed; the ES trials keep the order Tune gave the crossed axes of runs before 0.2.
    """
    cells = tune_order(study) if cells is None else cells
    return {metrics.TRIAL: tune.grid_search([plans[cell.key] for cell in cells])}


def tune_order(study: Study) -> list[Cell]:
    """The cells in the order Tune creates (and starts) their trials: the ES grid as Tune crosses its axes, then the scans."""
    from ray.tune.search.variant_generator import generate_variants

    axes = {
        metrics.POPULATION: tune.grid_search(list(study.populations)),
        metrics.OPTIMIZE_PARAMS: tune.grid_search([list(p) for p in study.optimize_params]),
        metrics.SEED: tune.grid_search(list(study.seeds)),
    }
    by_base: dict[tuple, list[Cell]] = {}
    design = compile_design(study)
    for cell in design.stage_cells(1):  # the further axes' combinations of each (population, params, seed)
        by_base.setdefault(cell.key[:3], []).append(cell)
    ordered = [c for _, spec in generate_variants(axes) for c in by_base[Cell.key_of(spec)[:3]]]
    return ordered + list(design.scan_cells) + [c for k in range(2, len(study.stages) + 2) for c in design.stage_cells(k)]


@dataclasses.dataclass(frozen=True)
class Packed:
    """This session's packed trials (`planning.packing`): each one's lake pool and share of its CPU, by cell."""

    pools: Mapping[tuple, str] = dataclasses.field(default_factory=dict)
    shares: Mapping[tuple, float] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, packs) -> "Packed":
        return cls({c.key: p.name for p in packs for c in p.cells}, {c.key: p.share for p in packs for c in p.cells})

    def resources(self, shards: Mapping[tuple, int], key: tuple) -> tune.PlacementGroupFactory:
        return trial_resources(shards[key], self.shares.get(key))


@contextlib.contextmanager
def lake_pools(packs):
    """The session's lake pools, one actor per pack, for as long as its trials run; ended after."""
    import ray

    pools = [start_pool(p.name, p.loop, p.config, p.members) for p in packs]
    try:
        yield pools
    finally:
        for pool in pools:
            with contextlib.suppress(Exception):  # a pool that died ends all the same
                ray.get(pool.close.remote(), timeout=SHARD_STOP_TIMEOUT_S)
            ray.kill(pool)


def trainable(plans: Mapping[tuple, dict], run_dir: Path, shards: Mapping[tuple, int], packed: Packed = Packed()):
    """The trial function with the trials' plans, run folder and per-trial resources (one CPU bundle per shard; a
    packed trial's share of its pool's CPU)."""
    shards = dict(shards)
    return tune.with_resources(
        study_trial(plans, run_dir, packed.pools),
        resources=lambda config: packed.resources(shards, Cell.key_of(config)),
    )


# A trial's own worker holds no model (the inner loop's PolicyActors, which do, are its children and die with each
# trial): Tune hands a finished trial's worker to the next trial of the same resources instead of starting a process
# and importing the trial's modules again — seconds a trial, most of a short trial's wall (benchmarks/trial_workers.py).
REUSE_TRIAL_WORKERS = True


@dataclasses.dataclass(frozen=True)
class SessionOptions:
    """What a session may choose, fresh or resumed."""

    callbacks: tuple
    max_failures: int
    max_concurrent: int | None


def fresh_tuner(
    study: Study,
    run_dir: Path,
    shards: Mapping[tuple, int],
    options: SessionOptions,
    cells: list[Cell] | None = None,
    packed: Packed = Packed(),
) -> tune.Tuner:
    """A new Tune experiment in the run folder over the study's trials, or these cells (a stage's unfinished)."""
    plans = plans_of(study)  # compiled once: the trials' configs, and beside the trainable for older configs
    return tune.Tuner(
        trainable(plans, run_dir, shards, packed),
        param_space=param_space(study, plans, cells),
        tune_config=tune.TuneConfig(
            metric=metrics.TUNE_METRIC,
            mode=metrics.TUNE_MODE,
            max_concurrent_trials=options.max_concurrent,
            reuse_actors=REUSE_TRIAL_WORKERS,
            trial_name_creator=lambda t: trial_name(study, t.config),
            trial_dirname_creator=lambda t: trial_dirname(study, t.config, t.trial_id),
        ),
        run_config=tune.RunConfig(
            name=run_dir.name,
            storage_path=str(run_dir.parent),
            failure_config=tune.FailureConfig(max_failures=options.max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
            callbacks=list(options.callbacks),
            verbose=1,
        ),
    )


def check_restorable(run_dir: Path) -> None:
    if not tune.Tuner.can_restore(str(run_dir)):
        raise RestoreError(
            f"--resume: {run_dir} holds no restorable Tune experiment (no tuner.pkl); it cannot be resumed"
        )


def restored_tuner(
    study: Study, run_dir: Path, shards: Mapping[tuple, int], options: SessionOptions, packed: Packed = Packed()
) -> tune.Tuner:
    """Tuner.restore (check_restorable first), then this session's trackers, retries, concurrency and plan.

    Restoring reads every trial's results: those not started yet would each get Tune's warning line.
    """
    with OneLineTrialFailures():
        tuner = tune.Tuner.restore(
            str(run_dir), trainable=trainable(plans_of(study), run_dir, shards, packed), resume_errored=True
        )
    try:
        run_config, tune_config = ray_compat.tuner_configs(tuner)
    except ray_compat.RayCompatError as err:
        raise RestoreError(f"--resume: {err}") from None
    run_config.callbacks = [*options.callbacks, Replan(shards, packed)]
    run_config.failure_config = tune.FailureConfig(max_failures=options.max_failures)
    tune_config.max_concurrent_trials = options.max_concurrent
    tune_config.reuse_actors = REUSE_TRIAL_WORKERS  # a run begun before it was on reuses them from now
    return tuner


def _cpus(trial: Trial) -> int:
    return int(sum(b.get("CPU", 0) for b in trial.placement_group_factory.bundles))


class OneLineTrialFailures(logging.Filter):
    """Tune logs every failed trial attempt with its whole traceback; with retries a failure is routine.

    One line per failure here; the traceback stays in the trial folder's error.txt. And when a run is
    interrupted or restored, Tune's result grid warns of every trial that never reported ("Failed to fetch
    metrics … FileNotFoundError …", a line each): the study's own line counts them as interrupted, so that goes.
    A session killed while Tune rotated a trial's checkpoints leaves its restored list naming one it had
    already deleted; deleting it again fails with a traceback, once, and changes nothing: one line.
    """

    LOGGERS = ("ray.tune.execution.tune_controller", "ray.tune.analysis.experiment_analysis")
    NEVER_REPORTED = "were not found at"  # Tune's words for a trial folder without result.json or progress.csv
    GONE_CHECKPOINT = "an old checkpoint was deleted already (the last session ended mid-rotation); nothing lost"

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if message.startswith("Failed to fetch metrics for"):
            listed = [line for line in message.splitlines()[1:] if line.strip()]
            return not (listed and all(self.NEVER_REPORTED in line for line in listed))
        err = record.exc_info[1] if record.exc_info else None
        if isinstance(err, FileNotFoundError) and "Error handling checkpoint" in message:
            trial = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = f"Trial {trial}: {self.GONE_CHECKPOINT}"
            record.args, record.exc_info, record.exc_text = (), None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            return True
        if err is not None and "Trial task failed" in message:
            first = next((line for line in str(err).splitlines() if line.strip()), "")
            record.msg = f"{record.getMessage()} ({type(err).__name__}: {first[:200]}); traceback in its error.txt"
            record.args, record.exc_info, record.exc_text = (), None, None
        return True

    def __enter__(self) -> "OneLineTrialFailures":
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeFilter(self)


class TrialCurves(tune.Callback):
    """Each report of each trial into its TensorBoard run (`curves`), written on the driver as it arrives.

    Tune pickles its callbacks into tuner.pkl: the open event files are not part of that.
    """

    def __init__(self, run_dir: Path, study: Study):
        self.run_dir = Path(run_dir)
        self.study = study
        self._writers: curves.TrialCurveWriters | None = None

    def __getstate__(self):
        return {**self.__dict__, "_writers": None}

    @property
    def writers(self) -> curves.TrialCurveWriters:
        if self._writers is None:
            self._writers = curves.TrialCurveWriters(self.run_dir)
        return self._writers

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info):
        self.writers.report(trial_name(self.study, trial.config), result)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info):
        self.writers.close(trial_name(self.study, trial.config))

    on_trial_error = on_trial_complete

    def on_experiment_end(self, trials: list[Trial], **info):
        self.writers.close()


class Replan(tune.Callback):
    """Before a resumed session starts any trial: each unfinished one gets this session's shards."""

    def __init__(self, shards: Mapping[tuple, int], packed: Packed = Packed()):
        self.shards, self.packed = dict(shards), packed
        self.done = False

    def on_step_begin(self, iteration: int, trials: list[Trial], **info):
        if self.done:
            return
        self.done = True
        for trial in trials:
            wanted = self.packed.resources(self.shards, Cell.key_of(trial.config))
            if trial.status in UNFINISHED and trial.placement_group_factory != wanted:
                trial.update_resources(wanted)


class ClusterWatch(tune.Callback):
    """Ends the study when a waiting trial can no longer fit the cluster (say a node was lost).

    It ends it the way Ctrl-C does — Tune saves every unfinished trial as
    resumable —, not through a Tune Stopper, which would mark them finished.
    A trial waits `wait_s` first (`--node-wait`): Ray takes a few heartbeats
    to declare a node dead, and an autoscaler a few minutes to add one.
    """

    def __init__(self, wait_s: float):
        self.reason: str | None = None
        self.wait_s = wait_s
        self.every_s = min(WATCH_EVERY_S, wait_s / 2)
        self._since: dict[str, float] = {}
        self._last = 0.0

    def on_step_begin(self, iteration: int, trials: list[Trial], **info):
        now = time.monotonic()
        if now - self._last < self.every_s or self.reason:
            return
        self._last = now
        from bilevel_tune.runtime.cluster import cluster_cpus

        cpus = cluster_cpus()
        for trial in trials:
            if trial.status != Trial.PENDING or _cpus(trial) <= cpus:
                self._since.pop(trial.trial_id, None)
                continue
            since = self._since.setdefault(trial.trial_id, now)
            if now - since > self.wait_s:
                self.reason = (
                    f"trial {trial} needs {_cpus(trial)} CPUs but the cluster has {cpus} left (a node was lost?); "
                    "--resume re-plans the unfinished trials for the cluster as it is"
                )
                os.kill(os.getpid(), signal.SIGINT)  # Tune's handler: a graceful, resumable stop
                return
