"""The CPU plan: how many inner-loop shards each trial gets, which trials run together, and the ETA.

Inputs: the grid's cells in the order Tune starts them, the CPUs of the
cluster, and a `CostModel` — what a trial's pieces cost on one CPU, measured
(bilevel_tune.planning.calibration). A trial with S shards trains its population in
blocks of ⌈N/S⌉ candidates, one CPU each, so a generation lasts as long as
its largest block takes.

Allocation (docs/scaling.md): every trial starts with one shard; then, as
long as it shortens the simulated makespan (or takes one of several equally
long trials off it), one trial gets more shards — the fewest that
shrink its largest block, never more than its candidates, never more CPUs
than the cluster has. The simulation starts trials in Tune's order as soon as their
CPUs are free (a queue when they are not), so the plan runs every trial at
once when the CPUs allow. `--cpus-per-trial` fixes S instead. Plain Python.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import heapq
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from bilevel_tune.core import scan
from bilevel_tune.study_data.run_folder import Cell, trial_name

IMPROVEMENT = 1e-3  # a move must shorten the makespan by this share to count


class PlanError(ValueError):
    """A plan that cannot run on this cluster; the message is the one line the user sees."""


@dataclass(frozen=True)
class CostModel:
    """Seconds a trial's pieces take on one busy CPU; `source` says how they were measured."""

    rebuild_s: float  # per generation and shard: fresh policies (reset)
    train_fixed_s: float  # one steady train() of a block of n candidates: fixed + per_candidate · n
    train_per_candidate_s: float
    first_train_extra_s: float  # the first train() of a fresh Algorithm does one-time work on top
    evaluate_fixed_s: float  # one evaluation season of a block: fixed + per_candidate · n
    evaluate_per_candidate_s: float
    report_s: float = 0.05  # per generation: ES, record, Tune report and checkpoint
    # per trial: starting its actors (Tune's, the shards' — imports, first build —, the trackers'), finishing them
    trial_overhead_s: float = 10.0
    launch_s: float = 10.0  # once: process start, Ray start, Tune's first trial
    finish_s: float = 5.0  # once: summary tables and plots, Ray shutdown
    source: str = "defaults"
    calibrated: bool = True  # False: relative work only, seconds meaningless

    @classmethod
    def by_work(cls, why: str) -> "CostModel":
        """No measurement: a train() of n candidates costs n units and nothing else costs anything.

        Shards then follow each trial's work (population × generations × K) alone.
        """
        zero = dict.fromkeys(("rebuild_s", "train_fixed_s", "first_train_extra_s", "evaluate_fixed_s"), 0.0)
        fixed = dict.fromkeys(("report_s", "trial_overhead_s", "launch_s", "finish_s"), 0.0)
        return cls(
            **zero, train_per_candidate_s=1.0, evaluate_per_candidate_s=0.0, **fixed, source=why, calibrated=False
        )

    def train_s(self, block: int) -> float:
        return self.train_fixed_s + self.train_per_candidate_s * block

    def evaluate_s(self, block: int) -> float:
        return self.evaluate_fixed_s + self.evaluate_per_candidate_s * block

    def generation_s(self, block: int, inner_iters: int, eval_episodes: int, report: bool = True) -> float:
        """reset, K × train (the first with its one-time work), evaluation, and the report to Tune."""
        training = inner_iters * self.train_s(block) + (self.first_train_extra_s if inner_iters else 0.0)
        evaluation = eval_episodes * self.evaluate_s(block)
        return self.rebuild_s + training + evaluation + (self.report_s if report else 0.0)

    def trial_s(self, cell: Cell, shards: int, budget) -> float:
        """One trial, start to finish: overheads, its generations, the final re-evaluation of two finalists.

        A scan trial: its grid in one pass on the evaluation seeds, then one pass per final seed; a shard runs
        its block in turns of at most `scan.BLOCK` candidates.
        """
        block = math.ceil(cell.population / shards)
        if cell.scan:
            turns = math.ceil(block / scan.BLOCK)
            turn = math.ceil(block / turns)
            evaluation = turns * self.generation_s(turn, budget.inner_iters, budget.eval_episodes, report=False)
            final = turns * self.generation_s(turn, budget.inner_iters, 1, report=False)
            return (
                self.trial_overhead_s
                + evaluation
                + budget.final_eval_seeds * final
                + self.report_s * (1 + budget.final_eval_seeds)
            )
        finalists = math.ceil(2 / min(shards, 2))  # the best-so-far and the final mean, on up to two shards
        final = budget.final_eval_seeds * self.generation_s(finalists, budget.inner_iters, 1, report=False)
        generations = cell.generations * self.generation_s(block, budget.inner_iters, budget.eval_episodes)
        return self.trial_overhead_s + generations + final

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrialPlan:
    cell: Cell
    shards: int
    start_s: float
    seconds: float
    packed: int = 0  # the trials of its pack (`planning.packing`), 0 when it runs alone: its share of one CPU is 1/packed

    @property
    def cpus(self) -> float:
        return 1 / self.packed if self.packed else float(self.shards)

    @property
    def end_s(self) -> float:
        return self.start_s + self.seconds


@dataclass(frozen=True)
class Plan:
    cpus: int
    trials: tuple[TrialPlan, ...]
    model: CostModel
    fixed: bool  # shards fixed by --cpus-per-trial rather than chosen
    packs: tuple = ()  # `planning.packing.Pack`s: trials that share a lake pool

    @property
    def makespan_s(self) -> float:
        return max((t.end_s for t in self.trials), default=0.0)

    @property
    def eta_s(self) -> float:
        """The whole command: launch, every trial, summary and shutdown."""
        return self.model.launch_s + self.makespan_s + self.model.finish_s

    @property
    def core_s(self) -> float:
        """The trials' CPUs held over their time: what they cost in core-seconds, a shard's CPU busy throughout — a
        pack's one CPU until its last member is done — (trials.csv's core_s is what the operating system measured
        after)."""
        planned = {t.cell.key: t for t in self.trials}
        packed = {c.key for pack in self.packs for c in pack.cells}
        pools = sum(max(planned[c.key].seconds for c in pack.cells) for pack in self.packs)
        return pools + sum(t.seconds * t.cpus for t in self.trials if t.cell.key not in packed)

    def shards_of(self, key) -> int:
        return next(t.shards for t in self.trials if t.cell.key == key)

    @property
    def waves(self) -> list[list[TrialPlan]]:
        """Trials grouped by start time: each group starts together."""
        groups: dict[float, list[TrialPlan]] = {}
        for t in self.trials:
            groups.setdefault(round(t.start_s, 3), []).append(t)
        return [groups[k] for k in sorted(groups)]

    def to_dict(self, study) -> dict[str, Any]:
        """The plan as study.json keeps it (by work alone, no ETA: its seconds are units of work); a packed trial
        with its pool's index among the plan's packs."""
        pools = {c.key: k for k, pack in enumerate(self.packs) for c in pack.cells}
        return {
            "cpus": self.cpus,
            "fixed_cpus_per_trial": self.fixed,
            "eta_s": round(self.eta_s, 1) if self.model.calibrated else None,
            "trials": [
                {
                    "trial": trial_name(study, t.cell),
                    "shards": t.shards,
                    **({"packed": t.packed, "pool": pools[t.cell.key]} if t.packed else {}),
                    "start_s": round(t.start_s, 1),
                    "seconds": round(t.seconds, 1),
                }
                for t in self.trials
            ],
            "model": self.model.to_dict(),
        }


def simulate(seconds: Sequence[float], shards: Sequence[int], cpus: int, max_concurrent: int | None) -> list[float]:
    """Start times of trials run in order on `cpus` CPUs: each starts as soon as its shards fit."""
    starts = [math.nan] * len(seconds)
    running: list[tuple[float, int]] = []  # (end time, trial)
    free, now, pending = cpus, 0.0, list(range(len(seconds)))
    while pending:
        for i in list(pending):
            # a packed trial holds a share of a CPU (1/m): sums of shares round in their last bits
            if shards[i] <= free + 1e-9 and (max_concurrent is None or len(running) < max_concurrent):
                starts[i] = now
                free -= shards[i]
                heapq.heappush(running, (now + seconds[i], i))
                pending.remove(i)
        if pending:
            now, done = heapq.heappop(running)
            free += shards[done]
    return starts


def make_plan(
    cells: Sequence[Cell],
    budget,
    cpus: int,
    model: CostModel,
    cpus_per_trial: int | None = None,
    max_concurrent: int | None = None,
    packs: Sequence = (),
) -> Plan:
    """Shards per trial (cells in Tune's start order), their start times and durations; a pack's trials
    (`planning.packing`) as one unit on one CPU, where its first member starts, priced by `Pack.seconds`."""
    if cpus < 1:
        raise PlanError(f"the cluster has {cpus} CPUs; a trial needs at least one")
    if cpus_per_trial is not None and cpus_per_trial > cpus:
        raise PlanError(f"--cpus-per-trial {cpus_per_trial} exceeds the cluster's {cpus} CPUs")
    members = {c.key: pack for pack in packs for c in pack.cells}
    units: list[tuple[Cell, Any]] = []  # (what the plan schedules: a trial, or a pack at its first member; its pack)
    for cell in cells:
        pack = members.get(cell.key)
        if pack is None or pack.cells[0].key == cell.key:
            units.append((cell, pack))
    priced = {i: pack.seconds(model, budget) for i, (_, pack) in enumerate(units) if pack is not None}
    plan = _units_plan([unit for unit, _ in units], budget, cpus, model, cpus_per_trial, max_concurrent, priced)
    if not packs:
        return plan
    trials: dict[tuple, TrialPlan] = {}
    for (unit, pack), t in zip(units, plan.trials):
        for cell in pack.cells if pack is not None else (unit,):
            own = t.seconds if pack is None else pack.seconds(model, budget, until=cell.generations)
            trials[cell.key] = t if pack is None else TrialPlan(cell, 1, t.start_s, own, packed=len(pack.cells))
    return dataclasses.replace(plan, trials=tuple(trials[c.key] for c in cells), packs=tuple(packs))


def _units_plan(
    cells: Sequence[Cell],
    budget,
    cpus: int,
    model: CostModel,
    cpus_per_trial: int | None,
    max_concurrent: int | None,
    priced: dict[int, float],
) -> Plan:
    """`make_plan` over what it schedules: trials, and packs as one unit each (`priced`: their seconds, on one CPU
    always)."""
    cap = [1 if i in priced else min(c.population, cpus) for i, c in enumerate(cells)]
    shards = [min(cpus_per_trial, c.population) if cpus_per_trial and i not in priced else 1 for i, c in enumerate(cells)]

    def schedule(alloc: Sequence[int]) -> tuple[list[float], list[float], list[float]]:
        """(end times, latest first — the makespan, then the runner-up, … —, starts, durations)."""
        seconds = [priced[i] if i in priced else model.trial_s(c, s, budget) for i, (c, s) in enumerate(zip(cells, alloc))]
        starts = simulate(seconds, alloc, cpus, max_concurrent)
        return sorted((s + d for s, d in zip(starts, seconds)), reverse=True), starts, seconds

    ends, starts, seconds = schedule(shards)
    while cpus_per_trial is None:
        # More shards where they help most. Four equally long trials each get theirs in turn: a move
        # that leaves the makespan but takes one trial off it counts; shards that would only finish
        # a trial earlier than another one must anyway do not.
        moves = []
        for i, cell in enumerate(cells):
            more = _next_useful(cell.population, shards[i], cap[i])
            if more is not None:
                moves.append((schedule([*shards[:i], more, *shards[i + 1 :]])[0], i, more))
        better = [move for move in moves if _earlier(move[0], ends)]
        if not better:
            break
        _, i, shards[i] = min(better)
        ends, starts, seconds = schedule(shards)
    trials = tuple(TrialPlan(c, s, st, d) for c, s, st, d in zip(cells, shards, starts, seconds))
    return Plan(cpus=cpus, trials=trials, model=model, fixed=cpus_per_trial is not None)


def _next_useful(population: int, shards: int, cap: int) -> int | None:
    """The fewest shards above `shards` that shrink the largest block (16 candidates: 1, 2, 3, 4, 6, 8, 16)."""
    block = math.ceil(population / shards)
    for more in range(shards + 1, cap + 1):
        if math.ceil(population / more) < block:
            return more
    return None


def _earlier(a: Sequence[float], b: Sequence[float]) -> bool:
    """Do end times a (latest first) finish earlier than b: a shorter makespan, or as long with fewer trials at it?"""
    tol = IMPROVEMENT * max(b[0], 1.0)
    if abs(a[0] - b[0]) > tol:
        return a[0] < b[0]
    at_makespan = lambda ends: sum(e >= ends[0] - tol for e in ends)  # noqa: E731
    return at_makespan(a) < at_makespan(b)


def packing_lines(packs: Sequence) -> list[str]:
    """What `--dry-run` and a session's plan say of its packs ([runtime] pack): one line per kind of pool (its
    trials by population), with how many pools are alike."""
    def kind(pack) -> str:
        counts = sorted(Counter(cell.population for cell in pack.cells).items())
        members = " + ".join(f"{n} trial{'s' * (n > 1)} of population {p}" for p, n in counts)
        return f"{members}, {pack.lakes} lakes a block"

    kinds = Counter(kind(pack) for pack in packs)
    return [
        f"packed ([runtime] pack = auto): {n} lake pool{'s' * (n > 1)} of {kind}, one CPU each (1/n a trial: the "
        "shards column)"
        for kind, n in kinds.items()
    ]


def hms(seconds: float) -> str:
    """H:MM:SS, or N days, H:MM:SS."""
    return str(dt.timedelta(seconds=int(round(seconds))))


def describe_plan(study, plan: Plan, out: Callable[[str], None] = print, what: str = "the whole command") -> None:
    """The plan's table — shards, start, duration per trial —, which trials run together, and its ETA (last) for
    `what` (a resume plans what is left)."""
    timed = plan.model.calibrated  # by work alone, the plan's "seconds" are units of work: no times to show
    when = (lambda s: hms(s)) if timed else (lambda s: "–")  # noqa: E731
    names = [trial_name(study, t.cell) for t in plan.trials]
    width = max([34, *map(len, names)])  # another world's mechanisms go by their rules' full names: long ones
    out(f"{'trial':<{width}} {'gens':>5} {'shards':>6} {'starts':>9} {'~time':>9}")
    for name, t in zip(names, plan.trials):
        shards = f"1/{t.packed}" if t.packed else str(t.shards)
        out(f"{name:<{width}} {t.cell.generations:>5} {shards:>6} {when(t.start_s):>9} {when(t.seconds):>9}")
    waves = plan.waves
    together = "all trials at once" if len(waves) == 1 else f"{len(waves)} waves as CPUs free up"
    how = "--cpus-per-trial" if plan.fixed else "chosen in proportion to each trial's work"
    used = round(sum(t.cpus for t in waves[0])) if waves else 0
    out(
        f"resources: {plan.cpus} CPUs; per trial an empty head bundle + one CPU per shard ({how}); {together}, {used} CPUs busy at first"
    )
    for line in packing_lines(plan.packs):
        out(line)
    m = plan.model
    if not timed:
        out(f"assumed: shards in proportion to each trial's work alone ({m.source})")
        out("no ETA: this machine has no figures for these settings")
        return
    out(
        f"assumed per busy CPU: train() of n candidates {m.train_fixed_s:.3f} + {m.train_per_candidate_s:.3f}·n s, "
        f"evaluation {m.evaluate_fixed_s:.3f} + {m.evaluate_per_candidate_s:.3f}·n s, "
        f"per trial {m.trial_overhead_s:.1f} s to start and finish ({m.source})"
    )
    out(
        f"ETA {hms(plan.eta_s)} for {what}: start {hms(m.launch_s)}, trials {hms(plan.makespan_s)}, summary {hms(m.finish_s)}; "
        f"the trials' CPUs {plan.core_s / 3600:.2f} core-hours"
    )
