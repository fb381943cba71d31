"""The study's comparisons, decided by AdaStop at a stated family-wise error rate (docs/verdicts.md).

A comparison is two groups of cells (`Cell.group`: a cell less its seed)
that differ in one grid factor — the population, the mechanism (the searched
rules) or one further axis — and match on every other; its score is each
trial's final re-evaluation (the best-so-far is biased upward, more so for
larger populations). Every comparison of a study is one family.

AdaStop (Mathieu et al., "AdaStop: adaptive statistical testing for sound
comparisons of Deep RL agents", arXiv 2306.10882; the `adastop` package) is a
group-sequential permutation test: at each of K looks it tests every open
comparison on the scores so far (a step-down max-T over the family), spending
α·(k+1)/K of the level by look k, so the family-wise error stays ≤ α however
many looks are taken. A look is a stage of the study (`study_data.stages`):
stage 1 the grid's seeds, each later one `seeds_per_stage` more in the cells
of the comparisons still open, K = max_seeds / seeds_per_stage. A run whose
grid does not fit that plan (say 3 seeds with seeds_per_stage 2) is looked at
once, K = 1, with all its seeds.

The `adastop` package (0.1.3) is used with two corrections (`TwoSidedAdaStop`),
each measured by benchmarks/adastop_error.py: it sets its boundary from the
permutation distribution of the *signed* largest mean difference but tests the
*absolute* one, so a two-sided test spends twice its level (identical agents
declared different in about 11 % of simulated studies at α = 0.05); and the
observed statistic, computed another way than its own permutation's, can exceed
it by a rounding error, so a tie with the largest permutation rejects. Here the
permutation statistics are absolute, as the paper defines them, and a tie counts
for the null; the error rate then stays below α.

The comparator's state lives in memory; replaying its looks over the stored
scores, stage by stage, with the same n, K, permutations, α and seed, gives
the same decisions (its permutations are exact while they number fewer than
`PERMUTATIONS`, and drawn from the study's seed beyond), so a resumed or
rebuilt run decides as the run did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from bilevel_tune.base.knobs import StudyError
from bilevel_tune.core import metrics as M
from bilevel_tune.study_data.run_folder import Cell, is_scan, num, trial_records
from bilevel_tune.study_data.settings import plain

PERMUTATIONS = 10_000  # AdaStop's B, its default
POPULATION, MECHANISM = "population", "mechanism"
A_BETTER, B_BETTER = "A better", "B better"
NO_DIFFERENCE = "no difference"  # AdaStop accepted equality early (only with [decide] beta > 0)
UNDECIDED = "undecided"  # not shown different at the last look: the study's maximum seeds
OPEN = "open"  # not decided yet, and a later stage may decide it (--resume --until-decided)
TEST = "AdaStop"


class DecideError(StudyError):
    """Scores that cannot be decided on (a trial without a final re-evaluation); one line for the user."""


@dataclass(frozen=True)
class Comparison:
    """Group A against group B, which differ only in `factor`; A's level comes first in the study's grid."""

    factor: str  # population, mechanism, or a further axis's key
    a: tuple
    b: tuple
    mechanisms: Any = field(default=None, compare=False, repr=False)  # its world's names (`Study.mechanisms`)

    def level(self, group: tuple) -> Any:
        population, params, extra = group
        if self.factor == POPULATION:
            return population
        if self.factor == MECHANISM:
            return self.mechanisms.label(params)
        return dict(extra)[self.factor]

    def levels(self) -> tuple[str, str]:
        """A's and B's level as a reader sees them: population 1, 2-D floor+risk, es.sigma 0.05."""
        return tuple(_shown_level(self.factor, self.level(g)) for g in (self.a, self.b))

    def matched(self) -> str:
        """What the two groups share, e.g. '2-D' or 'population 16, es.sigma 0.05'; '' when nothing else varies."""
        population, params, extra = self.a
        parts = [] if self.factor == POPULATION else [f"population {population}"]
        parts += [] if self.factor == MECHANISM else [self.mechanisms.label(params)]
        parts += [f"{key} {plain(value)}" for key, value in extra if key != self.factor]
        return ", ".join(parts)

    @property
    def key(self) -> str:
        """One line naming it: 'population 16 vs 1 at 2-D'."""
        a, b = self.levels()
        where = self.matched()
        return f"{b} vs {a}" + (f" at {where}" if where else "")


def _shown_level(factor: str, level) -> str:
    if factor == MECHANISM:
        return str(level)
    return f"{'population' if factor == POPULATION else factor} {plain(level)}"


def factors_of(study) -> list[str]:
    """The factors a study varies: population and mechanism (when the grid has more than one), and its axes."""
    out = [POPULATION] if len(study.populations) > 1 else []
    out += [MECHANISM] if len(study.optimize_params) > 1 else []
    return out + [key for key, values in study.axes if len(values) > 1]


def comparisons(study) -> list[Comparison]:
    """Every pair of the study's groups that differ in one factor (of `[decide] compare`, when it names some)."""
    wanted = set(study.decide.compare) or set(factors_of(study))
    groups = study.groups()
    out = []
    for i, a in enumerate(groups):
        for b in groups[i + 1 :]:
            factor = _only_difference(a, b)
            if factor is not None and factor in wanted:
                out.append(Comparison(factor, a, b, study.mechanisms))
    return out


def _only_difference(a: tuple, b: tuple) -> str | None:
    """The one factor in which two groups differ; None when they differ in none or in more."""
    differ = [POPULATION] if a[0] != b[0] else []
    differ += [MECHANISM] if a[1] != b[1] else []
    extra_a, extra_b = dict(a[2]), dict(b[2])
    differ += [key for key in extra_a if extra_a[key] != extra_b.get(key)]
    return differ[0] if len(differ) == 1 else None


def check_compare(study) -> None:
    """`[decide] compare` names factors the study varies."""
    allowed = factors_of(study)
    for name in study.decide.compare:
        if name not in allowed:
            raise StudyError(
                f"[decide] compare: {name!r} is not a factor of this study; it varies: {', '.join(allowed) or 'none'}"
            )


@dataclass(frozen=True)
class Decision:
    comparison: Comparison
    outcome: str  # A_BETTER, B_BETTER, NO_DIFFERENCE, UNDECIDED or OPEN
    look: int  # the stage it was decided at (1-based); for OPEN the last stage looked at
    seeds: int  # seeds per group when it was decided (or so far)


@dataclass(frozen=True)
class Decisions:
    """AdaStop's decisions after the stages run so far."""

    decisions: tuple[Decision, ...]
    looks: int  # stages looked at
    stages: int  # K: the looks the plan allows
    alpha: float
    seeds_per_look: int
    incomplete: str | None = None  # why the latest stage was not looked at (a trial still running)

    @property
    def open_groups(self) -> set[tuple]:
        """The groups of comparisons still open: the cells the next stage adds seeds to."""
        return {g for d in self.decisions if d.outcome == OPEN for g in (d.comparison.a, d.comparison.b)}

    @property
    def finished(self) -> bool:
        return all(d.outcome != OPEN for d in self.decisions)

    def record(self) -> list[dict[str, Any]]:
        """For study.json: one line per comparison."""
        return [
            {"comparison": d.comparison.key, "outcome": d.outcome, "stage": d.look, "seeds": d.seeds}
            for d in self.decisions
        ]


TIE = 1e-9  # relative: a permutation statistic this close to the observed one counts as at least as large


def two_sided_adastop(**kwargs):
    """AdaStop's comparator, its permutation statistics absolute and ties counted for the null (see above)."""
    from adastop import MultipleAgentsComparator  # matplotlib and pandas: a summary's, not a study file's

    class TwoSidedAdaStop(MultipleAgentsComparator):
        def compute_mean_diffs(self, k, Z):
            signed = super().compute_mean_diffs(k, Z)  # kept signed: the next look adds its block to them
            return {comp: np.abs(np.asarray(v)) * (1 + TIE) + TIE for comp, v in signed.items()}

    return TwoSidedAdaStop(**kwargs)


def plan_of(study) -> tuple[int, int]:
    """(n seeds per look, K looks): the study's stages when its grid is their first, else one look at every seed."""
    n = study.decide.seeds_per_stage
    return (n, study.decide.stages) if len(study.seeds) == n else (len(study.seeds), 1)


def first_decisive_look(n: int, looks: int, alpha: float) -> int | None:
    """The first look at which AdaStop can decide anything: a permutation and its mirror share the largest
    absolute statistic, so look k (of N_k permutations) needs 2 / N_k ≤ α·k/K; None when no look can."""
    for k in range(1, looks + 1):
        if 2 / min(math.comb(2 * n, n) ** k, PERMUTATIONS) <= alpha * k / looks:
            return k
    return None


def describe_plan(study) -> str:
    """The decision plan in one line: the test, its level, the comparisons, the stages and when they can decide."""
    n, looks = plan_of(study)
    count = len(comparisons(study))
    first = first_decisive_look(n, looks, study.decide.alpha)
    when = (
        "no stage can decide anything (too few seeds for the permutations: raise seeds_per_stage or max_seeds)"
        if first is None
        else f"its permutations can first decide at stage {first} ({n * first} seeds per cell)"
    )
    stages = f"{looks} stage(s) of {n} seeds" if looks > 1 else f"one look at the {n} seeds"
    return f"{TEST} at family-wise α {study.decide.alpha:g} over {count} comparison(s), {stages} at most; {when}"


def describe(decisions: Decisions) -> list[str]:
    """What AdaStop decided after the stages looked at, one line per comparison."""
    open_ = sum(d.outcome == OPEN for d in decisions.decisions)
    lines = [
        f"after stage {decisions.looks} of {decisions.stages} ({decisions.looks * decisions.seeds_per_look} seeds per "
        f"cell): {len(decisions.decisions) - open_} decided, {open_} open ({TEST}, family-wise α {decisions.alpha:g})"
    ]
    for d in decisions.decisions:
        a, b = d.comparison.levels()
        winner = {A_BETTER: f" ({a})", B_BETTER: f" ({b})"}.get(d.outcome, "")
        lines.append(f"  {d.comparison.key}: {d.outcome}{winner}")
    return lines


def adastop_seed(study) -> int:
    """The permutations' seed, from the grid's seeds: the same study draws the same permutations."""
    return int(np.random.SeedSequence([*study.seeds]).generate_state(1)[0])


def decide(study, finals: Mapping[tuple, float], trial_names: Mapping[tuple, str] | None = None) -> Decisions:
    """Replay AdaStop over the study's stages: each complete stage is one look at the final re-evaluations so far.

    `finals`: the final re-evaluated objective of every finished ES trial, by cell key. A stage with a trial not
    finished is not looked at (`incomplete` says which); a finished trial without a score raises DecideError.
    """
    pairs = comparisons(study)
    n, looks_allowed = plan_of(study)
    empty = Decisions((), 0, looks_allowed, study.decide.alpha, n)
    if not pairs:
        return empty
    agents = [g for g in study.groups() if any(g in (c.a, c.b) for c in pairs)]
    index = {g: i for i, g in enumerate(agents)}
    comparator = two_sided_adastop(
        n=n,
        K=looks_allowed,
        B=PERMUTATIONS,
        comparisons=np.array([(index[c.a], index[c.b]) for c in pairs]),
        alpha=study.decide.alpha,
        beta=study.decide.beta,
        seed=adastop_seed(study),
    )
    scores: dict[tuple, list[float]] = {g: [] for g in agents}
    decided_at: dict[str, int] = {}
    looks, incomplete = 0, None
    for stage in range(1, len(study.stages) + 2):
        cells = [c for c in study.stage_cells(stage) if c.group in index]
        missing = [c for c in cells if c.key not in finals]
        if missing:
            names = trial_names or {}
            incomplete = (
                f"stage {stage}: {len(missing)} trial(s) not finished ({names.get(missing[0].key, missing[0])}…)"
            )
            break
        for cell in cells:
            value = finals[cell.key]
            if not np.isfinite(value):
                raise DecideError(
                    f"trial {(trial_names or {}).get(cell.key, cell)} has no final re-evaluation (every retraining "
                    "failed): its comparisons cannot be decided"
                )
            scores[cell.group].append(float(value))
        comparator.partial_compare({_name(g): np.array(scores[g]) for g in agents}, verbose=False)
        looks = stage
        for key, outcome in comparator.decisions.items():
            if outcome != "continue":
                decided_at.setdefault(key, stage)
        if comparator.is_finished:
            break
    if not looks:
        return Decisions((), 0, looks_allowed, study.decide.alpha, n, incomplete)
    decisions = []
    for i, comparison in enumerate(pairs):
        key = str(comparator.comparisons[i])
        outcome = comparator.decisions[key]
        look = decided_at.get(key, looks)
        decisions.append(Decision(comparison, _outcome(outcome, look, looks_allowed), look, n * look))
    return Decisions(tuple(decisions), looks, looks_allowed, study.decide.alpha, n, incomplete)


def _outcome(adastop: str, look: int, looks_allowed: int) -> str:
    """AdaStop's word as the summary's: 'larger' means A's mean is above B's (the objective is maximised); an
    'equal' forced at the last look means not shown different with every seed allowed, not shown equal."""
    if adastop == "larger":
        return A_BETTER
    if adastop == "smaller":
        return B_BETTER
    if adastop == "equal":
        return UNDECIDED if look == looks_allowed else NO_DIFFERENCE
    return OPEN


def _name(group: tuple) -> str:
    population, params, extra = group
    return "_".join([f"pop{population}", "-".join(params), *(f"{k}={plain(v)}" for k, v in extra)])


def finals(run_dir) -> dict[tuple, float]:
    """Every finished ES trial's final re-evaluated objective, by cell key (NaN where it has none)."""
    out = {}
    for _, (_, final) in trial_records(run_dir).items():
        if final is not None and not is_scan(key := Cell.key_of(final)):
            out[key] = num(final.get(M.FINAL_BEST))
    return out
