"""`--status RUN_DIR`: where a run stands, read from its folder alone — while a session runs it, between sessions, or
on another machine after a restore. The stage under way and the last look's answers, who holds the folder, each of
the stage's trials at its generation, and when the stage's look comes at the trials' own pace; after the run's last
look, how far its held-out step is. Starts nothing, writes nothing, imports neither Ray nor torch.

    python -m bilevel_tune.study --status runs/weekend-appo
    python -m bilevel_tune.study --status runs              # every run under a results folder
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from bilevel_tune.cli.options import UsageError
from bilevel_tune.core import metrics
from bilevel_tune.planning.plan import hms, simulate
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.design import Design
from bilevel_tune.study_data.run_folder import REEVALUATIONS, STUDY_FILE, Cell, trial_name
from bilevel_tune.study_data.run_store import RunStore, StoreError, open_store
from bilevel_tune.verdicts.looks import OPEN, UNDECIDED

RECENT = 20  # a trial's pace: the median seconds of its last RECENT generations


@dataclass(frozen=True)
class TrialProgress:
    """One trial of the stage, as its records have it."""

    name: str
    generations: int  # its budget
    done: int  # generations recorded
    finished: bool  # its final record written
    sec_per_gen: float | None  # its recent pace; None before its first generation
    typical_sec_per_gen: float | None  # the median over all its generations

    def line(self, width: int, left_s: float | None, expected: str) -> str:
        if self.finished:
            return f"  {self.name:<{width}} finished"
        if not self.done:
            return f"  {self.name:<{width}} not started" + (f", about {hms(left_s)} ({expected})" if left_s else "")
        pace = f", {self.sec_per_gen:.1f} s a generation" if self.sec_per_gen else ""
        left = f", {hms(left_s)} left" if left_s is not None else ""
        return f"  {self.name:<{width}} generation {self.done} of {self.generations}{pace}{left}"


def trial_progress(store: RunStore, design: Design, cell: Cell) -> TrialProgress:
    """The cell's trial as its records have it (`store.trials`, by cell key); none yet: not started."""
    trial = store.trials.get(cell.key)
    records, final = (trial.generations, trial.final) if trial else ([], None)
    paces = [r[metrics.SEC_PER_GEN] for r in records if r.get(metrics.SEC_PER_GEN)]
    recent, typical = (statistics.median(p) if p else None for p in (paces[-RECENT:], paces))
    return TrialProgress(trial_name(design, cell), cell.generations, len(records), final is not None, recent, typical)


def seconds_left(trial: TrialProgress, peer_pace: float | None, planned_s: float | None) -> tuple[float | None, str]:
    """Seconds of running the trial has left, and where the figure comes from: a trial under way at its own pace;
    one not started at its cell's pace in this run (its other seeds'), else as the session's plan has it."""
    if trial.finished:
        return 0.0, ""
    if trial.sec_per_gen:
        return max(trial.generations - trial.done, 0) * trial.sec_per_gen, "its own pace"
    if peer_pace:
        return trial.generations * peer_pace, f"its cell's latest pace in this run, {peer_pace:.1f} s a generation"
    return planned_s, "as planned"


def pool_left(trial: TrialProgress, mates: Sequence[tuple[TrialProgress, int]], generation_s) -> float:
    """A packed trial's seconds left (`mates`: its pool's members under way, itself too, each with its population):
    at its own pace while every one of them runs, then faster as the shorter searches end and the pool's blocks
    shrink, by `generation_s(lakes)` (the plan's model of a generation of a block)."""
    ahead = lambda t: max(t.generations - t.done, 0)  # noqa: E731
    now = generation_s(sum(population for _, population in mates))
    left, passed = 0.0, 0
    for end in sorted({ahead(t) for t, _ in mates if ahead(t) <= ahead(trial)}):
        lakes = sum(population for t, population in mates if ahead(t) >= end)
        left += (end - passed) * trial.sec_per_gen * generation_s(lakes) / now
        passed = end
    return left


def print_status(run_dir: Path) -> None:
    """`--status` on the command line: `show_status` to stdout, which a reader may close early (`| head`)."""
    try:
        show_status(run_dir)
        sys.stdout.flush()  # here, so that a closed pipe is met inside the try, not at the interpreter's exit
    except BrokenPipeError:  # the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # and exit's own flush finds no pipe


def show_status(run_dir: Path, out: Callable[[str], None] = print, now: dt.datetime | None = None) -> None:
    """Print where the run in `run_dir` stands, or each run under a results folder (UsageError, one line, when it
    is neither)."""
    run_dir = Path(run_dir)
    if not (run_dir / STUDY_FILE).is_file():
        runs = sorted(p.parent for p in run_dir.glob(f"*/{STUDY_FILE}"))
        if not runs:
            raise UsageError(f"--status {run_dir}: not a run folder, nor a folder of runs (no {STUDY_FILE} in it)")
        for i, run in enumerate(runs):
            if i:
                out("")
            show_status(run, out, now)
        return
    store = open_store(run_dir)
    try:
        record, study, design = store.record, store.study, store.design
    except StoreError as err:
        raise UsageError(f"--status {run_dir}: {err.why}") from None
    now = now or dt.datetime.now(dt.timezone.utc)
    log = store.stage_log
    stage = len(study.stages) + 1
    planned = study.decide.stages
    seeds = ", ".join(map(str, design.stage_seeds(stage)))
    what = f"study {study.name} ({study.inner} inner loop, budget {study.budget_name})"
    out(f"{run_dir.name}: {what}, stage {stage} of {planned} (seeds {seeds})")
    looked = [entry for entry in log if entry.get("decided_utc")]
    if looked:
        out(_look_line(looked[-1]))
    ended = bool(looked) and looked[-1]["stage"] == stage  # decided, and no stage begun after it
    if ended:
        why = "the plan's end" if stage >= planned else "every row decided"
        out(f"the run has ended: stage {stage} was its last look ({why})")
    held, holder = run_lock.holder(run_dir)
    out(holder)
    if store.record.get(REEVALUATIONS):
        for line in _held_out_lines(store, held, now):
            out(line)
    if ended:
        return
    if not store.has_records:
        out("no trial records here (a shipped folder keeps the run's tables, not its trials): ask the run's own folder")
        return
    cells = design.stage_cells(stage)
    progress = [trial_progress(store, design, cell) for cell in cells]
    finished = sum(t.finished for t in progress)
    under_way = sum(bool(t.done) and not t.finished for t in progress)
    out(
        f"stage {stage}'s trials: {finished} of {len(progress)} finished, {under_way} under way, "
        f"{len(progress) - finished - under_way} not started"
    )
    plan = _latest_plan(record)
    calibrated = plan.get("model", {}).get("calibrated")  # else the plan's seconds are units of work, not time
    planned_s = {t["trial"]: t["seconds"] for t in plan.get("trials", [])} if calibrated else {}
    peers = _cell_paces(design, store, stage, {t.name: t for t in progress})
    left = [seconds_left(t, peers.get(_pace_key(c)), planned_s.get(t.name)) for t, c in zip(progress, cells)]
    left = _pools_left(progress, cells, left, plan, design) if calibrated else left
    width = max(len(t.name) for t in progress)
    for trial, (seconds, source) in zip(progress, left):
        out(trial.line(width, seconds, source))
    out(_look_eta(stage, stage >= planned, progress, [s for s, _ in left], plan, record, now if held else None))


def _pools_left(progress, cells, left, plan: Mapping[str, Any], design: Design) -> list:
    """`left`, a packed trial's under way at its own pace by `pool_left` (its pool from the plan; a plan from before
    pools were recorded leaves it as it is)."""
    from bilevel_tune.planning.plan import CostModel

    pool_of = {t["trial"]: t["pool"] for t in plan.get("trials", []) if "pool" in t}
    model, budget = CostModel(**plan["model"]), design.budget
    pooled = lambda t: t.name in pool_of and t.sec_per_gen and not t.finished  # noqa: E731 - under way, in a pool
    mates: dict[int, list[tuple[TrialProgress, int]]] = {}
    for t, cell in zip(progress, cells):
        if pooled(t):
            mates.setdefault(pool_of[t.name], []).append((t, cell.population))
    generation_s = lambda lakes: model.generation_s(lakes, budget.inner_iters, budget.eval_episodes)  # noqa: E731
    return [
        (pool_left(t, mates[pool_of[t.name]], generation_s), "its own pace, its pool's blocks shrinking")
        if pooled(t) else found
        for t, found in zip(progress, left)
    ]  # fmt: skip


def _held_out_lines(store: RunStore, held: bool, now: dt.datetime) -> list[str]:
    """The held-out step (`reevaluation.progress`): its jobs scored by learner; while a session runs it, when the
    jobs left end at each learner's median job so far; stopped midway, the command that resumes it."""
    from bilevel_tune.cli import reevaluation

    step = reevaluation.progress(store)
    if step is None:  # only re-scorings logged
        return []
    each = ", ".join(f"{label} {step.scored[label]} of {step.trials}" for label in step.learners)
    head = f"held-out step: {sum(step.scored.values())} of {step.trials * len(step.learners)} jobs scored ({each})"
    left = step.left
    if not left:
        return [head + ": every finished trial under every learner"]
    if not held or step.session.get("ended_utc"):
        return [head, f"it stopped with {sum(left.values())} job(s) left: python -m bilevel_tune.study --reevaluate "
                      f"{store.run_dir} resumes it (its learners are recorded)"]  # fmt: skip
    cpus = step.session.get("cpus") or _latest_plan(store.record).get("cpus") or 1
    timed = {label: n * step.job_s[label] / cpus for label, n in left.items() if label in step.job_s}
    said = [f"{label}'s {left[label]} left about {hms(s)} ({step.job_s[label]:.0f} s a job)" for label, s in timed.items()]
    untimed = [f"{label}'s {n}" for label, n in left.items() if label not in timed]
    if untimed:
        said.append(f"not timed yet: {', '.join(untimed)} (none scored)")
    else:
        said.append(f"done about {_clock((now + dt.timedelta(seconds=sum(timed.values()))).isoformat())} if it runs on")
    since = _clock(step.session["started_utc"])
    return [head, f"its session since {since} goes on, {cpus} job(s) at once: {'; '.join(said)}"]


def _pace_key(cell: Cell) -> tuple:
    return cell.population, cell.optimize_params, cell.extra


def _cell_paces(design: Design, store: RunStore, stage: int, known: Mapping[str, TrialProgress]) -> dict[tuple, float]:
    """Each ES cell's pace in this run, from its latest stage with any: the median of its trials' own (a machine's
    load changes from one working day to the next, so the latest seeds say most of the next). `known`: the trials
    already read (the current stage's), by name; the others are read here."""
    paces: dict[tuple, float] = {}
    for earlier in range(stage, 0, -1):
        found: dict[tuple, list[float]] = {}
        for cell in design.stage_cells(earlier):
            if not cell.scan and _pace_key(cell) not in paces:
                name = trial_name(design, cell)
                pace = (known.get(name) or trial_progress(store, design, cell)).typical_sec_per_gen
                if pace:
                    found.setdefault(_pace_key(cell), []).append(pace)
        paces.update({key: statistics.median(values) for key, values in found.items()})
    return paces


def _look_line(entry: Mapping[str, Any]) -> str:
    decisions = entry.get("decisions") or []
    decided = sum(d["outcome"] not in (OPEN, UNDECIDED) for d in decisions)
    return (
        f"the last look: stage {entry['stage']} at {_clock(entry['decided_utc'])}: {decided} of {len(decisions)} "
        f"rows decided, {len(decisions) - decided} not"
    )


def _latest_plan(record: Mapping[str, Any]) -> dict[str, Any]:
    """The plan of the last session that made one: what it left to run, each trial's seconds and shards."""
    for session in reversed(record.get("sessions", [])):
        if session.get("plan"):
            return {**session["plan"], "max_concurrent": session.get("max_concurrent")}
    return dict(record.get("plan") or {})


def _look_eta(
    stage: int,
    last: bool,
    progress: Sequence[TrialProgress],
    left_s: Sequence[float | None],
    plan: Mapping[str, Any],
    record: Mapping[str, Any],
    now: dt.datetime | None,
) -> str:
    """When the stage ends (its look): its unfinished trials run as the last plan runs them (those under way first,
    as Tune resumes them), each for the seconds it has left; `now` while a session runs it, for the clock time;
    `last`: the plan's last stage, whose look ends the run."""
    left = [(t, s) for t, s in zip(progress, left_s) if not t.finished]
    if not left and now:
        return f"stage {stage}'s trials have all finished: its look comes as the session ends them"
    if not left:  # a run without stages decides once, in its summary; a staged one stopped before its look
        return (
            f"stage {stage}'s trials have all finished, with no look recorded: a run without --until-decided decided "
            "once, in its summary; --resume --until-decided takes the look (and goes on if rows are open)"
        )
    if any(s is None for _, s in left):
        return f"stage {stage} ends: not estimated (a trial not started has no pace in this run nor a calibrated plan)"
    left.sort(key=lambda pair: not pair[0].done)
    shards = {t["trial"]: 1 / t["packed"] if t.get("packed") else t.get("shards", 1) for t in plan.get("trials", [])}
    cpus = plan.get("cpus") or record.get("plan", {}).get("cpus") or 1
    seconds = [s for _, s in left]
    starts = simulate(seconds, [shards.get(t.name, 1) for t, _ in left], cpus, plan.get("max_concurrent"))
    eta_s = max(start + s for start, s in zip(starts, seconds))
    core_h = sum(s * shards.get(t.name, 1) for t, s in left) / 3600  # its CPUs (a packed trial: its share) over its time
    look = "its look, the plan's last" if last else "its look"
    when = f" (about {_clock((now + dt.timedelta(seconds=eta_s)).isoformat())} if it runs on)" if now else ""
    return (
        f"stage {stage} ends ({look}) after about {hms(eta_s)} more of running{when}, on {cpus} CPUs as the last "
        f"plan runs them: about {core_h:.2f} core-hours more"
    )


def _clock(utc: str) -> str:
    return dt.datetime.fromisoformat(utc).strftime("%Y-%m-%d %H:%M UTC")
