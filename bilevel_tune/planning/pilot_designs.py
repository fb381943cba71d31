"""The cheapest design that decides, planned from a pilot's noise (docs/verdicts.md, "Designing from a pilot").

A pilot is a finished run of the same question. For each row it decided, and for each score (the best-so-far
rules', the search mean's) and budget (a fraction of each trial's evaluations) it was re-scored at, it gives
the row's effect μ and its variance components — what the runs found, σ²_run, and one final seed's
re-evaluation, σ²_eval (`verdicts.noise`). A **design** is: seeds per stage and at most, final seeds k, a budget
fraction b and a score. Under it a row's per-seed contrast is d ~ N(μ, σ²_run + σ²_eval / k), decided by the
run's own group-sequential paired t at the row's level (`verdicts.sequential`); its power is the share of
simulated seed sequences — seeded normal paths, shifted by the standardised effect — that cross a look's boundary. An equivalence row's power is the share whose repeated intervals fall inside ±margin.

Cost, in core-seconds — what a core-hour bills, priced from the pilot's own: each cell's core-seconds for a whole
run's search (its price per evaluation, which depends on its population) and per final seed's retraining; a
pilot from before core-seconds were measured is priced at wall × CPUs — and beside them in farm trainings: every
cell of the grid runs its seeds, each seed b × its evaluations, plus k final seeds × the rule sets scored (2).
The expected cost runs each cell until the last row is decided (the stage where every simulated row has crossed:
an upper figure, since a real run stops adding seeds to a decided row's groups); the most is every cell at the
plan's seeds. The cheapest design is the one of least expected core-seconds. Pure numpy; the pilot's data arrives as plain numbers (`cli.pilot_plan`).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from bilevel_tune.base import seeds
from bilevel_tune.verdicts import sequential

PATHS = 10_000  # simulated seed sequences per design and row (power's standard error ≤ 0.005)
PATHS_SEED = 20261206
TARGET = 0.8
SEEDS_PER_STAGE = (2, 3, 4)
MOST_SEEDS = 24
FINAL_SEEDS = (3, 4, 6, 8, 12, 16, 24, 32)
RULES_SCORED = 2  # a trial's final re-evaluation scores the best-so-far rules and the search mean's


@dataclass(frozen=True)
class Components:
    """A row's contrast at one score and budget, as the pilot measured it."""

    effect: float  # μ: the mean contrast over the pilot's run seeds
    run_var: float
    eval_var: float
    run_seeds: int
    decided: str | None = None  # the answer planned for here, where it is not the row's (a row the pilot did not decide)
    level: float | None = None  # the planned claim's test level in the planned study's family (as `Planned.level`)

    def sd(self, k: int) -> float:
        return float(np.sqrt(self.run_var + self.eval_var / k))


@dataclass(frozen=True)
class Planned:
    """What a row is planned to show at one score and budget: its answer, and the level its claim is tested at."""

    decided: str
    level: float  # the sequential test's level: a differs claim's share of α, twice an equivalence claim's (TOST)


@dataclass(frozen=True)
class PilotRow:
    key: str
    decided: str  # the pilot's decision: A better, B better, equivalent
    level: float  # the row's share of α when the pilot decided it (a differs claim's)
    margin_level: float  # its equivalence claim's share
    at: dict[tuple[str, Fraction], Components]  # (score, budget fraction) → components

    def planned(self, c: Components) -> Planned:
        """The answer and level a design is simulated against at these components: theirs where given, else the
        row's (the pilot's decision and share)."""
        decided = c.decided or self.decided
        level = c.level if c.level is not None else (2 * self.margin_level if decided == "equivalent" else self.level)
        return Planned(decided, level)


@dataclass(frozen=True)
class Cell:
    """What one cell of the grid costs a seed: its evaluations at the whole budget, and its core-seconds here."""

    evaluations: int
    core_s: float  # a whole-budget run's core-seconds, final re-evaluation aside
    core_s_per_final_seed: float
    rescorings: int = 0  # smaller budgets its final re-evaluation also scores its incumbent at ([decide] equal_budget)


@dataclass(frozen=True)
class Design:
    score: str
    budget: Fraction
    final_seeds: int
    seeds_per_stage: int
    max_seeds: int
    power: tuple[float, ...]  # per target row, at the pilot's effect
    power_at_margin: tuple[float, ...]  # per direction row, at an effect the size of the margin (NaN: no margin)
    expected_seeds: float  # per cell
    expected_trainings: float
    most_trainings: float
    expected_core_s: float  # core-seconds on the pilot's machine

    @property
    def decides(self) -> bool:
        return min(self.power) >= TARGET


def trainings(cells: Sequence[Cell], seeds: float, budget: Fraction, final_seeds: int) -> float:
    """Farm trainings of a grid whose every cell runs `seeds` seeds at this budget and final seeds."""
    return float(seeds * sum(budget * c.evaluations + RULES_SCORED * final_seeds * (1 + c.rescorings) for c in cells))


def core_seconds(cells: Sequence[Cell], seeds: float, budget: Fraction, final_seeds: int) -> float:
    """Core-seconds of a grid whose every cell runs `seeds` seeds at this budget and final seeds."""
    return seeds * sum(float(budget) * c.core_s + final_seeds * (1 + c.rescorings) * c.core_s_per_final_seed
                       for c in cells)  # fmt: skip


@functools.lru_cache(maxsize=64)
def _paths(n: int, looks: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard normal differences' running means and SDs (ddof 1), per path and look: PATHS seeded paths of the
    planner's own, n more differences a look (the boundaries they are held to are the calibration's)."""
    z = seeds.generator(PATHS_SEED, n, looks).standard_normal((PATHS, n * looks))
    counts = n * np.arange(1, looks + 1)
    sums, squares = np.cumsum(z, axis=1)[:, counts - 1], np.cumsum(z * z, axis=1)[:, counts - 1]
    means = sums / counts
    sds = np.sqrt(np.maximum(squares - counts * means**2, 0) / np.maximum(counts - 1, 1))
    return means, sds


def decided_by(row: PilotRow, c: Components, k: int, n: int, looks: int, margin: float | None,
               effect: float | None = None) -> np.ndarray:  # fmt: skip
    """Per simulated path, the first look at which the row is decided as the pilot decided it (looks + 1: never)."""
    means, sds = _paths(n, looks)
    sd = c.sd(k)
    counts = n * np.arange(1, looks + 1)
    planned = row.planned(c)
    if planned.level <= 0:
        return np.full(PATHS, looks + 1)  # a claim never given a share of α is never shown
    if planned.decided == "equivalent":
        if margin is None or sd <= 0:
            return np.full(PATHS, looks + 1)
        levels = sequential.t_levels(n, looks, planned.level)
        critical = np.array(levels.critical)
        mu = (c.effect if effect is None else effect) / sd
        inside = np.abs(means + mu) + critical * sds / np.sqrt(counts) < margin / sd
    else:
        levels = sequential.t_levels(n, looks, planned.level)
        mu = (c.effect if effect is None else effect) / sd if sd > 0 else np.inf
        with np.errstate(invalid="ignore", divide="ignore"):
            inside = np.abs(means + mu) * np.sqrt(counts) / sds >= np.array(levels.critical)
    first = np.where(inside.any(axis=1), inside.argmax(axis=1) + 1, looks + 1)
    return first


def evaluate(rows: Sequence[PilotRow], cells: Sequence[Cell], score: str, budget: Fraction, k: int, n: int,
             most: int, margin: float | None) -> Design | None:  # fmt: skip
    """One design's power per row and its cost; None where the pilot has no components for it."""
    looks = most // n
    if any((score, budget) not in r.at for r in rows):
        return None
    firsts = [decided_by(r, r.at[(score, budget)], k, n, looks, margin) for r in rows]
    power = tuple(float(np.mean(f <= looks)) for f in firsts)
    at_margin = tuple(
        float(np.mean(decided_by(r, r.at[(score, budget)], k, n, looks, margin, effect=margin) <= looks))
        if margin is not None and r.planned(r.at[(score, budget)]).decided != "equivalent" and min(power) >= TARGET
        else float("nan")
        for r in rows
    )  # fmt: skip  # only where the design decides: the figure a reader weighs it by
    last = np.minimum(np.max(np.stack(firsts), axis=0), looks)  # the stage by which every row is decided
    seeds = float(n * last.mean())
    return Design(
        score, budget, k, n, most, power, at_margin, seeds, trainings(cells, seeds, budget, k),
        trainings(cells, most, budget, k), core_seconds(cells, seeds, budget, k),
    )  # fmt: skip


def designs(rows: Sequence[PilotRow], cells: Sequence[Cell], margin: float | None) -> list[Design]:
    """Every design of the grid (scores × budgets the pilot measured × final seeds × stage plans), least expected
    core-seconds first."""
    keys = sorted({key for r in rows for key in r.at})
    found = []
    for n in SEEDS_PER_STAGE:  # a stage plan's paths and boundaries once, for every score, budget and k
        for most, (score, budget), k in itertools.product(range(2 * n, MOST_SEEDS + 1, n), keys, FINAL_SEEDS):
            d = evaluate(rows, cells, score, budget, k, n, most, margin)
            if d is not None:
                found.append(d)
    return sorted(found, key=lambda d: (d.expected_core_s, d.expected_trainings))


def cheapest(found: Sequence[Design]) -> Design | None:
    """The design of least expected core-seconds that reaches the target power on every row."""
    return next((d for d in found if d.decides), None)
