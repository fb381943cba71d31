"""Re-scoring a finished run with its own learner: more final seeds, and the incumbents of earlier moments.

    python -m bilevel_tune.study --reevaluate RUN_DIR --final-seeds 16
    python -m bilevel_tune.study --reevaluate RUN_DIR --at-evaluations 1/8,1/4,1/2,1000

* `--final-seeds N` retrains each finished trial's final rules — the best-so-far rules and the search mean's — on
  its first N final seeds (`Seeds.final`: the recorded ones first, so only the seeds a trial has no score for run)
  and appends them to finals.csv. The recorded decisions keep their scores.
* `--at-evaluations E1,E2,…` (counts, or fractions of each trial's budget such as 1/8) retrains each trial's
  incumbent after E evaluations — the best-so-far rules then, and the search mean then, read off its generations
  table at the last generation at or before E — on the run's recorded final seeds, into anytime.csv. At a trial's
  whole budget the incumbent is its final rules, whose scores finals.csv already holds: they are copied, not rerun.

Each job is one trial's block (best-so-far rules, search mean's rules) at candidate indices 0 and 1, run by the
run's own loop as a trial's final re-evaluation runs it (`inner.heldout`), so a seed scored twice scores the same
to the last bit; each job's rows are flushed as it ends (a stopped step resumes where it stopped).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from bilevel_tune.cli.options import UsageError
from bilevel_tune.cli.reevaluation import COMPLETE, learner_config, logged_session, now_utc
from bilevel_tune.core import metrics
from bilevel_tune.inner.contract import Seeds
from bilevel_tune.study_data import final_scores, incumbents
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.learners import own_learner
from bilevel_tune.study_data.run_folder import Cell, trial_name
from bilevel_tune.study_data.study_overrides import for_cell

BUDGET_EXAMPLE = "1/8,1/4,1/2,1000"


@dataclass(frozen=True)
class Budget:
    """One budget asked for: a count of evaluations, or a fraction of each trial's budget."""

    text: str
    count: int | None = None
    fraction: Fraction | None = None

    def evaluations(self, budget: int) -> int:
        """The evaluations this asks of a trial whose budget is `budget`."""
        return self.count if self.count is not None else max(1, round(self.fraction * budget))


def parse_budgets(text: str) -> tuple[Budget, ...]:
    """`--at-evaluations`' list (none for no text); UsageError in one line naming a bad entry and what is allowed."""
    out: list[Budget] = []
    if not text:
        return ()
    for part in (p.strip() for p in text.split(",")):
        allowed = f"a positive integer or a fraction in (0, 1] such as 1/8 (e.g. --at-evaluations {BUDGET_EXAMPLE})"
        try:
            value = Fraction(part)
        except (ValueError, ZeroDivisionError):
            raise UsageError(f"--at-evaluations {part!r} is neither an integer nor a fraction: {allowed}") from None
        if value <= 0:
            raise UsageError(f"--at-evaluations {part!r} must be above zero: {allowed}")
        if "/" in part or "." in part:
            if value > 1:
                raise UsageError(f"--at-evaluations {part!r} is a fraction above 1: {allowed}")
            out.append(Budget(part, fraction=value))
        else:
            out.append(Budget(part, count=int(value)))
    return tuple(out)


@dataclass(frozen=True)
class TrialRun:
    """What re-scoring needs of one finished ES trial: its cell and name, its budget, its generations and its final
    rules (physical, every rule)."""

    cell: Cell
    name: str
    budget: int  # evaluations: generations × population, as planned
    generations: pd.DataFrame
    fixed: dict[str, float]
    best: dict[str, float]
    mean: dict[str, float]

    def incumbent(self, evaluations: int) -> tuple[dict[str, float], dict[str, float]]:
        """(the best-so-far rules, the search mean's) after `evaluations`: at the last generation at or before it."""
        if evaluations >= self.budget:
            return self.best, self.mean
        return incumbents.incumbent(self.generations, evaluations, self.cell.optimize_params, self.fixed)


def trial_runs(study, by_key: Mapping[tuple, pd.Series], generations: pd.DataFrame) -> list[TrialRun]:
    """Every finished ES trial of the run, its row of the trials table by cell key (`RunStore.trial_rows`)."""
    out = []
    for cell in compile_design(study).trial_cells:
        if cell.scan:
            continue
        name = trial_name(study, cell)
        row = by_key.get(cell.key)
        if row is None or row.get("status") not in COMPLETE:
            continue
        params = cell.optimize_params
        searched = {p: row.get(metrics.BEST_RULE + p) for p in params}
        means = {p: row.get(metrics.MEAN_RULE + p) for p in params}
        if any(v is None or not np.isfinite(v) for v in (*searched.values(), *means.values())):
            continue
        fixed = dict(for_cell(study, cell).fixed_rules)
        gens = generations[generations["trial"] == name].sort_values("generation")
        out.append(
            TrialRun(
                cell, name, cell.generations * cell.population, gens.reset_index(drop=True), fixed,
                {**fixed, **{p: float(v) for p, v in searched.items()}},
                {**fixed, **{p: float(v) for p, v in means.items()}},
            )
        )  # fmt: skip
    return out


def check_budgets(budgets: Sequence[Budget], runs: Sequence[TrialRun]) -> None:
    """Each budget lands within every trial's: at least one generation, at most its whole budget."""
    for b in budgets:
        for run in runs:
            e = b.evaluations(run.budget)
            if e > run.budget:
                raise UsageError(
                    f"--at-evaluations {b.text}: {e} evaluations is beyond trial {run.name}'s budget of {run.budget}; "
                    f"allowed: 1 to {min(r.budget for r in runs)} evaluations, or a fraction such as 1/8"
                )
            if e < run.cell.population:
                raise UsageError(
                    f"--at-evaluations {b.text}: {e} evaluations is less than one generation of trial {run.name} "
                    f"(population {run.cell.population}); allowed: {run.cell.population} or more"
                )


@dataclass(frozen=True)
class Task:
    """One job's what: a trial, the budget it is scored at (None: its final rules), the seeds it still needs."""

    run: TrialRun
    budget: Budget | None
    evaluations: int | None
    seeds: tuple[int, ...]


def final_seed_tasks(study, runs: Sequence[TrialRun], n: int, finals: pd.DataFrame) -> list[Task]:
    """Each trial's first `n` final seeds that finals.csv lacks a score for (of either rules)."""
    have = set(zip(finals["trial"], finals["rules"], finals["final_seed"].astype(int)))
    out = []
    for run in runs:
        seeds = Seeds(run.cell.seed, study.budget.eval_episodes, n).final
        missing = tuple(s for s in seeds if any((run.name, r, s) not in have for r in final_scores.RULES))
        if missing:
            out.append(Task(run, None, None, missing))
    return out


def anytime_tasks(study, runs: Sequence[TrialRun], budgets: Sequence[Budget], anytime: pd.DataFrame) -> list[Task]:
    """Each trial at each budget, on the run's recorded final seeds, less what anytime.csv holds."""
    have = set(zip(anytime["trial"], anytime["evaluations"].astype(int), anytime["rules"], anytime["final_seed"].astype(int)))
    out = []
    for b in budgets:
        for run in runs:
            e = b.evaluations(run.budget)
            seeds = Seeds(run.cell.seed, study.budget.eval_episodes, study.budget.final_eval_seeds).final
            missing = tuple(s for s in seeds if any((run.name, e, r, s) not in have for r in final_scores.RULES))
            if missing:
                out.append(Task(run, b, e, missing))
    return out


def run_step(
    study, store, final_seeds: int | None, budgets: Sequence[Budget], cpus: int,
    out: Callable[[str], None], stop_requested=lambda: False, commit: str | None = None,
) -> dict:
    """Score what is left of both; log the session in study.json; return its counts. InnerLoopStopped propagates
    (the rows written so far stay: a resume goes on from them)."""
    from bilevel_tune.inner.heldout import Job, score

    runs = trial_runs(study, store.trial_rows, store.generations_table)
    finals = store.finals  # the records', the re-scorings' and the held-out step's own, seed by seed
    tasks = final_seed_tasks(study, runs, final_seeds, finals) if final_seeds else []
    copied = 0
    if budgets:
        later = anytime_tasks(study, runs, budgets, store.anytime)
        copied, later = _copy_final(store, later, finals)
        tasks += later
    own = own_learner(study)
    asked = ([f"{final_seeds} final seeds"] if final_seeds else []) + (
        [f"at {','.join(b.text for b in budgets)} evaluations"] if budgets else [])  # fmt: skip
    entry = {
        "learners": [f"{own.label}: {'; '.join(asked)}"],  # how run.md's table of sessions names the step
        "rescoring": {"final_seeds": final_seeds, "at_evaluations": [b.text for b in budgets]},
        "started_utc": now_utc(), "git_sha": commit, "jobs": len(tasks),
        "scored": 0, "failed": 0, "copied": copied,
    }  # fmt: skip
    seeds = sum(len(t.seeds) for t in tasks)
    out(f"re-scoring: {len(tasks)} job(s), {seeds} final seed(s) × 2 rule sets, on {cpus} CPU(s)"
        + (f"; {copied} incumbent(s) at a whole budget copied from finals.csv" if copied else ""))  # fmt: skip
    jobs = []
    for task in tasks:
        config, k = learner_config(study, own, task.run.cell)
        rules = task.run.incumbent(task.evaluations) if task.evaluations is not None else (task.run.best, task.run.mean)
        jobs.append(Job(task, own.loop, config, rules, task.seeds, k))
    with logged_session(store, entry) as job_done:
        for scored in score(jobs, cpus, stop_requested):
            task = scored.job.key
            _append(store, task, scored.scores, finals)
            what = "final rules" if task.evaluations is None else f"incumbent at {task.evaluations} evaluations"
            if scored.error is None:  # each job's CPU seconds, OS-measured, beside the session's sum
                entry.setdefault("job_core_s", {})[f"{task.run.name} · {what}"] = round(scored.cpu_s, 2)
            job_done(scored)
            said = f"failed: {scored.error}" if scored.error else "scored"
            out(f"  {task.run.name} · {what}, {len(task.seeds)} seed(s): {said} ({scored.seconds:.0f} s; "
                f"{entry['scored']} of {len(jobs)})")  # fmt: skip
    return entry


def _append(store, task: Task, scores, finals: pd.DataFrame) -> None:
    """A job's rows: finals.csv's for the seeds it lacks (a seed it holds must score the same: checked), or
    anytime.csv's. A failed job writes nothing (its seeds stay to do)."""
    if any(not np.isfinite(v) for per_seed in scores for v in per_seed):
        return
    if task.evaluations is not None:
        rows = [
            (task.run.name, task.evaluations, rules, seed, value, task.budget.text)
            for seed, values in zip(task.seeds, scores) for rules, value in zip(final_scores.RULES, values)
        ]  # fmt: skip
        store.append_anytime(rows)
        return
    held = {(r.rules, int(r.final_seed)): r.value for r in finals[finals["trial"] == task.run.name].itertuples()}
    rows = []
    for seed, values in zip(task.seeds, scores):
        for rules, value in zip(final_scores.RULES, values):
            if (rules, seed) in held:
                if held[(rules, seed)] != value:
                    raise RuntimeError(
                        f"{task.run.name}: the {rules} rules on final seed {seed} scored {value!r}, recorded "
                        f"{held[(rules, seed)]!r}: the loop no longer reproduces the run"
                    )
                continue
            rows.append((task.run.name, rules, seed, value))
    store.append_finals(rows)


def _copy_final(store, tasks: list[Task], finals: pd.DataFrame) -> tuple[int, list[Task]]:
    """Incumbents at a trial's whole budget are its final rules: their anytime rows copied from finals.csv where it
    holds every seed of both rule sets; the tasks left."""
    left, copied = [], 0
    for task in tasks:
        mine = finals[finals["trial"] == task.run.name]
        held = {(r.rules, int(r.final_seed)): r.value for r in mine.itertuples()}
        if task.evaluations < task.run.budget or not all((r, s) in held for r in final_scores.RULES for s in task.seeds):
            left.append(task)
            continue
        rows = [(task.run.name, task.evaluations, r, s, held[(r, s)], task.budget.text) for s in task.seeds for r in final_scores.RULES]
        store.append_anytime(rows)
        copied += 1
    return copied, left

