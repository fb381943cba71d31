"""The held-out step: every finished trial's final rules and its status quo, scored by every learner (docs/verdicts.md).

A study with `[final] learners` runs it after its last stage; `--reevaluate RUN_DIR --learners a,b` runs it on a
finished run folder or a shipped one, from the rules its tables record — the ES is not run again. Per trial:

* its **final rules**: the best-so-far candidate's, the rules its final re-evaluation retrained (`best/<rule>` in
  its trials table), the study's fixed rules beside them;
* its **status quo**: the study's rules with every rule the trial searches at the world's default (the fixed
  ones as the study sets them);
* its **final seeds**: the final re-evaluation's, drawn from the trial's seed as the trial drew them.

Each learner (`study_data.learners`: the run's own loop first) scores the block (final rules, status quo) on each
final seed as a trial's final re-evaluation does (`inner.heldout`). Every job's scores go to `heldout.csv` the
moment it ends — one row per trial, learner and final seed: both objectives, the gain and the job's seconds — so a stopped step
resumes where it stopped, and study.json's `reevaluations` logs every session of the step: its learners, its
jobs, when it ran. Both are written through the run's store (`study_data.run_store`), under the run lock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.contract import Seeds
from bilevel_tune.study_data import final_scores
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.learners import Learner, learners_of
from bilevel_tune.study_data.run_folder import REEVALUATIONS, Cell, rules_text, trial_name
from bilevel_tune.study_data.run_store import COMPLETE
from bilevel_tune.study_data.study_overrides import for_cell
from bilevel_tune.worlds.lakes import seed_lakes


@dataclass(frozen=True)
class TrialRules:
    """What a finished trial leaves the held-out step: its cell, its final rules and status quo, its final seeds."""

    cell: Cell
    name: str
    final: dict[str, float]
    status_quo: dict[str, float]
    seeds: tuple[int, ...]


def trial_rules(study, rows: Mapping[tuple, Any]) -> list[TrialRules]:
    """Every finished ES trial, its row of the trials table by cell key (`RunStore.trial_rows`), with its rules."""
    out = []
    for cell in compile_design(study).cells:
        row = rows.get(cell.key, {})
        searched = {p: row.get(metrics.BEST_RULE + p) for p in cell.optimize_params}
        if row.get("status") not in COMPLETE or any(v is None or not np.isfinite(v) for v in searched.values()):
            continue
        fixed = for_cell(study, cell).fixed_rules
        defaults = {spec.name: spec.default for spec in study.table.rule_specs}
        final = {**fixed, **{p: float(v) for p, v in searched.items()}}
        status_quo = {**fixed, **{p: defaults[p] for p in cell.optimize_params}}
        seeds = Seeds(cell.seed, study.budget.eval_episodes, study.budget.final_eval_seeds).final
        out.append(TrialRules(cell, trial_name(study, cell), final, status_quo, tuple(seeds)))
    return out


def learner_config(study, learner: Learner, cell: Cell) -> tuple[InnerLoopConfig, int]:
    """(the loop's config, its K) as this learner runs this trial's cell."""
    as_run = for_cell(learner.study(study), cell)
    return InnerLoopConfig.from_study(as_run), as_run.budget.inner_iters


def scored_already(store) -> set[tuple[str, str]]:
    """(trial, learner) pairs heldout.csv holds."""
    held = store.heldout
    return set(zip(held["trial"].astype(str), held["learner"].astype(str))) if len(held) else set()


def plan(study, rows: Mapping[tuple, Any], learners: Sequence[Learner], done: set | None = None) -> list:
    """The jobs left: every finished trial under every learner, learner by learner, less those scored."""
    from bilevel_tune.inner.heldout import Job

    done = done or set()
    jobs = []
    for learner in learners:
        for t in trial_rules(study, rows):
            if (t.name, learner.label) in done:
                continue
            config, k = learner_config(study, learner, t.cell)
            jobs.append(Job((t, learner), learner.loop, config, (t.final, t.status_quo), t.seeds, k))
    return jobs


def heldout_rows(scored) -> list[list]:
    """A job's rows of heldout.csv: one per final seed, its objectives as `repr` (every bit kept)."""
    trial, learner = scored.job.key
    return [
        [
            trial.name, learner.label, seed, repr(final), repr(status_quo), repr(final - status_quo),
            rules_text(trial.final, trial.cell.optimize_params),
            rules_text(trial.status_quo, trial.cell.optimize_params), scored.error or "", f"{scored.seconds:.1f}",
            f"{scored.cpu_s:.3f}",
        ]
        for seed, (final, status_quo) in zip(trial.seeds, scored.scores)
    ]  # fmt: skip


def run_step(
    study, store, cpus: int, out: Callable[[str], None], stop_requested=lambda: False,
    extra: Sequence[str] = (), commit: str | None = None,
) -> dict[str, Any]:
    """Score what is left; log the session in study.json; return its counts. InnerLoopStopped propagates (the rows
    written so far stay: a resume goes on from them)."""
    from bilevel_tune.inner.heldout import score

    learners = learners_of(study, extra)
    jobs = plan(study, store.trial_rows, learners, scored_already(store))
    entry = {
        "learners": [learner.label for learner in learners],
        "started_utc": now_utc(),
        "git_sha": commit,
        "jobs": len(jobs),
        "cpus": cpus,
        "scored": 0,
        "failed": 0,
    }
    out(f"held-out: {len(jobs)} job(s) (finished trials × learners: {', '.join(entry['learners'])}) on {cpus} CPU(s)")
    with logged_session(store, entry) as job_done:
        for scored in score(jobs, cpus, stop_requested):
            store.append_heldout(heldout_rows(scored))
            job_done(scored)
            trial, learner = scored.job.key
            gains = [f - s for f, s in scored.scores]
            said = f"failed: {scored.error}" if scored.error else f"gain {np.nanmean(gains):+.4f}"
            out(f"  {trial.name} · {learner.label}: {said} ({scored.seconds:.0f} s; {entry['scored']} of {len(jobs)})")
    return entry


@contextmanager
def logged_session(store, entry: dict):
    """A session of a step on a finished run, logged in study.json from its start; yields `job_done(scored)`, which
    counts a job and logs the count at once, so a session that ends without a word (killed, its machine lost) is
    logged as far as it got; its end and wall time are logged as it ends, however it ends."""
    entry["counted_per_job"] = True  # what a session ended without a word logged is its count, not a 0 of old
    store.log_step_session(entry)
    start = time.time()

    def job_done(scored) -> None:
        entry["scored"] += 1
        entry["failed"] += scored.error is not None
        entry["core_s"] = round(entry.get("core_s", 0.0) + (0.0 if scored.error else scored.cpu_s), 1)  # OS-measured
        store.log_step_session(entry)

    try:
        yield job_done
    finally:
        entry.update(ended_utc=now_utc(), wall_s=round(time.time() - start, 1))
        store.log_step_session(entry)


def sessions_since(store, since: str) -> list[dict]:
    """The sessions of a step on a finished run that study.json logs as started at `since` (`now_utc()`) or later:
    each with its jobs scored and failed, those of a session stopped midway included."""
    log = store.record.get(REEVALUATIONS, [])
    return [entry for entry in log if entry.get("started_utc", "") >= since]


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


# -- where it stands --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepProgress:
    """The held-out step as a run folder has it (`--status`): each learner's jobs scored, out of the run's finished
    trials (heldout.csv against the trials table, by trial name), each learner's median job so far, and the
    step's last session as study.json logs it."""

    learners: tuple[str, ...]  # the step's learners, in its order (the run's own loop first)
    trials: int  # the finished ES trials: each learner's jobs
    scored: dict[str, int]  # jobs scored, by learner
    job_s: dict[str, float]  # a scored job's median seconds, by learner (those with one)
    session: dict[str, Any]  # the step's last logged session

    @property
    def left(self) -> dict[str, int]:
        """Jobs left, by learner, for the learners with any."""
        return {label: self.trials - n for label, n in self.scored.items() if n < self.trials}


def progress(store) -> StepProgress | None:
    """The held-out step of the folder `store` reads (`study_data.run_store`); None where none was logged."""
    sessions = [entry for entry in store.record.get(REEVALUATIONS, []) if "rescoring" not in entry]
    if not sessions:
        return None
    learners = tuple(sessions[-1]["learners"])
    finished = {t.name for t in trial_rules(store.study, store.trial_rows)}
    rows = store.heldout if len(store.heldout) else pd.DataFrame(columns=list(final_scores.HELDOUT_COLUMNS))
    jobs = rows[rows["trial"].isin(finished)].drop_duplicates(["trial", "learner"])
    scored = {label: int((jobs["learner"] == label).sum()) for label in learners}
    job_s = {label: float(s.median()) for label, s in jobs.groupby("learner")["job_seconds"] if label in scored}
    return StepProgress(learners, len(finished), scored, job_s, sessions[-1])


# -- what it will cost ------------------------------------------------------------------------------------------
PROBE_ITERS = (1, 4)  # train() calls of the probe's two measured jobs, after a warm-up job at the first: a
# steady train() is their difference, as the study's calibration (`planning.calibration`) measures it


@dataclass(frozen=True)
class JobCost:
    """A learner's held-out seconds, probed: a warm job's, and what an actor's first job costs beyond it."""

    per_job: float  # its seeds' builds (one, for a loop that packs them), K train() calls, their evaluation
    warm_up: float  # once per actor: its process's imports and first build (an actor scores many jobs)
    packs: bool = False  # a job's seeds trained as one block of lakes (`Shard.lakes`), not one after another

    def eta(self, jobs: int, cpus: int) -> float:
        """`jobs` jobs on `cpus` actors at once, each actor warmed up once."""
        return jobs * self.per_job / max(cpus, 1) + (self.warm_up if jobs else 0.0)


def job_cost(warm_up, once, more, k: int, packs: bool = False) -> JobCost:
    """A learner's cost from three probed jobs (`ShardReport`s, each with sec_reset, sec_train, sec_evaluate): a
    warm-up at `PROBE_ITERS[0]` train() calls, then `once` and `more` at `PROBE_ITERS[0]` and `PROBE_ITERS[1]`. A
    build's first train() calls cost more than its steady ones; its builds are paid per job, the first build once."""
    steady = max(0.0, (more.sec_train - once.sec_train) / (PROBE_ITERS[1] - PROBE_ITERS[0]))
    first_extra = max(0.0, once.sec_train - steady * PROBE_ITERS[0])  # the first calls, beyond steady ones
    reset = (once.sec_reset + more.sec_reset) / 2
    evaluate = (once.sec_evaluate + more.sec_evaluate) / 2
    per_job = reset + evaluate + (first_extra + steady * k if k else 0.0)
    total = lambda r: r.sec_reset + r.sec_train + r.sec_evaluate  # noqa: E731
    return JobCost(per_job, max(0.0, total(warm_up) - total(once)), packs)


def probe_rules(study) -> list[TrialRules]:
    """A stand-in for a study's trials before they ran: its first cell, its status quo as the final rules too."""
    cell = compile_design(study).cells[0]
    fixed = for_cell(study, cell).fixed_rules
    defaults = {spec.name: spec.default for spec in study.table.rule_specs}
    status_quo = {**fixed, **{p: defaults[p] for p in cell.optimize_params}}
    seeds = Seeds(cell.seed, study.budget.eval_episodes, study.budget.final_eval_seeds).final
    return [TrialRules(cell, trial_name(study, cell), status_quo, status_quo, tuple(seeds))]


def probe_costs(study, learners: Sequence[Learner], trial: TrialRules) -> dict[str, JobCost]:
    """Each learner's `JobCost`, measured on this machine: three jobs of the trial's final seeds in one shard actor,
    each as the step runs it (`inner.heldout`: its seeds one block where the loop packs them)."""
    import ray

    from bilevel_tune.inner import Shard

    out = {}
    for learner in learners:
        config, k = learner_config(study, learner, trial.cell)
        actor = ray.remote(Shard).options(num_cpus=1, max_restarts=0).remote(learner.loop, config)
        seeds = list(trial.seeds or (0,))
        try:
            packs = ray.get(actor.can_pack.remote())
            probed = seeds if packs else seeds[:1]  # one after another, a job is its seeds' costs summed
            lakes, eval_seeds = seed_lakes([trial.final, trial.status_quo], probed)
            warm_up, once, more = (
                ray.get(actor.lakes.remote(lakes, eval_seeds, 0, iters)) for iters in (PROBE_ITERS[0], *PROBE_ITERS)
            )
        finally:
            ray.kill(actor)
        cost = job_cost(warm_up, once, more, k, packs)
        out[learner.label] = dataclasses.replace(cost, per_job=cost.per_job * len(seeds) / len(probed))
    return out


def describe_cost(study, trials: Mapping[tuple, Any] | None, learners: Sequence[Learner], cpus: int,
                  out: Callable[[str], None], done: set | None = None) -> float:  # fmt: skip
    """The held-out step's jobs per learner and its ETA (probed on this machine); returns the ETA in seconds."""
    from bilevel_tune.planning.plan import hms

    rules = trial_rules(study, trials) if trials is not None else probe_rules(study)
    jobs = plan(study, trials, learners, done) if trials is not None else []
    per_learner = {learner.label: sum(j.key[1] == learner for j in jobs) for learner in learners}
    if trials is None:  # before the trials ran: every trial of the grid under every learner
        per_learner = {learner.label: len(compile_design(study).cells) for learner in learners}
    if not rules:
        out("held-out: no finished ES trial to score")
        return 0.0
    costs = probe_costs(study, [learner for learner in learners if per_learner[learner.label]], rules[0])
    seeds = max(len(rules[0].seeds), 1)
    total = 0.0
    for learner in learners:
        n = per_learner[learner.label]
        if not n:
            out(f"  {learner.label}: 0 job(s) left (scored)")
            continue
        cost = costs[learner.label]
        eta = cost.eta(n, cpus)
        total += eta
        how = "as one block of lakes" if cost.packs else "one after another"
        out(
            f"  {learner.label}: {n} job(s) × ~{cost.per_job:.0f} s (probed: its {seeds} seed(s) {how}, a "
            f"{cost.warm_up:.0f} s warm-up per actor) = {hms(eta)} on {cpus} CPU(s)"
        )
    out(f"held-out ETA {hms(total)} for every learner, one after another")
    return total
