"""AdaStop on a study's simple comparisons (`[decide] test = "adastop"`): for groups whose runs share no seeds.

AdaStop (Mathieu et al., "AdaStop: adaptive statistical testing for sound
comparisons of Deep RL agents", arXiv 2306.10882; the `adastop` package) is a
group-sequential permutation test: at each of K looks it tests every open
comparison on the scores so far (a step-down max-T over the family), spending
α·(k+1)/K of the level by look k. It permutes the two groups' scores
unpaired, so where the groups share their seeds the paired test
(`decide.decide_paired`) uses the design and AdaStop does not.

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
`PERMUTATIONS`, and drawn from the study's seed beyond).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from bilevel_tune.base import seeds
from bilevel_tune.study_data.settings import plain
from bilevel_tune.verdicts import family, looks

PERMUTATIONS = 10_000  # AdaStop's B, its default
TIE = 1e-9  # relative: a permutation statistic this close to the observed one counts as at least as large


def two_sided_adastop(**kwargs):
    """AdaStop's comparator, its permutation statistics absolute and ties counted for the null (see above)."""
    from adastop import MultipleAgentsComparator  # matplotlib and pandas: a summary's, not a study file's

    class TwoSidedAdaStop(MultipleAgentsComparator):
        def compute_mean_diffs(self, k, Z):
            signed = super().compute_mean_diffs(k, Z)  # kept signed: the next look adds its block to them
            return {comp: np.abs(np.asarray(v)) * (1 + TIE) + TIE for comp, v in signed.items()}

    return TwoSidedAdaStop(**kwargs)


def first_decisive_look(n: int, looks: int, alpha: float) -> int | None:
    """The first look at which AdaStop can decide anything: a permutation and its mirror share the largest
    absolute statistic, so look k (of N_k permutations) needs 2 / N_k ≤ α·k/K; None when no look can."""
    for k in range(1, looks + 1):
        if 2 / min(math.comb(2 * n, n) ** k, PERMUTATIONS) <= alpha * k / looks:
            return k
    return None


def describe_adastop_plan(design, n: int, looks: int, stages: str) -> str:
    count = len(family.simple_comparisons(design))
    first = first_decisive_look(n, looks, design.decide.alpha)
    when = (
        "no stage can decide anything (too few seeds for the permutations: raise seeds_per_stage or max_seeds)"
        if first is None
        else f"its permutations can first decide at stage {first} ({n * first} seeds per cell)"
    )
    return f"AdaStop at family-wise α {design.decide.alpha:g} over {count} comparison(s), {stages} at most; {when}"


def adastop_seed(design) -> int:
    """The permutations' seed, from the grid's seeds: the same study draws the same permutations."""
    return seeds.derived(*design.seeds)


class AdaStopLooks:
    """AdaStop's comparator over a study's stages, one look a stage: `decide_adastop` replays every stage; a caller
    that keeps one across a growing study (a simulation) looks at each new stage once, with the same decisions."""

    def __init__(self, design):
        self.pairs = family.simple_comparisons(design)
        self.n, self.looks_allowed = looks.plan_of(design)
        self.alpha = design.decide.alpha
        self.agents = [g for g in design.groups if any(g in (c.a, c.b) for c in self.pairs)]
        index = {g: i for i, g in enumerate(self.agents)}
        self.comparator = two_sided_adastop(
            n=self.n,
            K=self.looks_allowed,
            B=PERMUTATIONS,
            comparisons=_pairs_array([(index[c.a], index[c.b]) for c in self.pairs]),
            alpha=self.alpha,
            beta=design.decide.beta,
            seed=adastop_seed(design),
        ) if self.pairs else None  # fmt: skip
        self.replay: looks.Replay | None = None
        self.decided_at: dict[str, int] = {}

    def look(self, design, finals: Mapping[tuple, float], names: Mapping[tuple, str] | None = None) -> bool:
        """Look at the study's next stage, when all its trials have finished; False when not (or nothing to look at)."""
        if self.comparator is None or self.comparator.is_finished:
            return False
        if self.replay is None:
            self.replay = looks.Replay(design, finals, names or {})
        self.replay.design, self.replay.finals = design, finals
        stage = self.replay.looks + 1
        if stage > len(design.stages) + 1 or not self.replay.take(stage):
            return False
        scores = {g: [self.replay.scores[g][s] for s in _seeds_of(design, g, stage)] for g in self.agents}
        self.comparator.partial_compare({_name(g): np.array(scores[g]) for g in self.agents}, verbose=False)
        for key, outcome in self.comparator.decisions.items():
            if outcome != "continue":
                self.decided_at.setdefault(key, stage)
        return True

    def decisions(self) -> looks.Decisions:
        taken = self.replay.looks if self.replay else 0
        incomplete = self.replay.incomplete if self.replay else None
        if not taken:
            return looks.Decisions((), 0, self.looks_allowed, self.alpha, self.n, incomplete, looks.ADASTOP)
        out = []
        for i, comparison in enumerate(self.pairs):
            key = str(self.comparator.comparisons[i])
            look = self.decided_at.get(key, taken)
            outcome = _outcome(self.comparator.decisions[key], look, self.looks_allowed)
            out.append(looks.Decision(comparison, outcome, look, self.n * look, self.alpha))
        return looks.Decisions(tuple(out), taken, self.looks_allowed, self.alpha, self.n, incomplete, looks.ADASTOP)


def decide_adastop(design, finals: Mapping[tuple, float], trial_names: Mapping[tuple, str] | None = None) -> looks.Decisions:
    """Replay AdaStop over the study's stages: each complete stage is one look at the final re-evaluations so far."""
    replayed = AdaStopLooks(design)
    while replayed.look(design, finals, trial_names):
        pass
    return replayed.decisions()


def _pairs_array(pairs: list[tuple[int, int]]) -> np.ndarray:
    """The comparisons as AdaStop indexes them: a 1-D array of (i, j) tuples. The package keys every comparison by
    its str() inside its permutation loops, and a tuple's is ~100× quicker than a numpy row's (the same decisions)."""
    out = np.empty(len(pairs), dtype=object)
    out[:] = pairs
    return out


def _seeds_of(design, group: tuple, last_stage: int) -> list[int]:
    """The group's seeds of stages 1…last_stage, in stage order (AdaStop reads each look's block in order)."""
    return [
        s for stage in range(1, last_stage + 1) for s in design.stage_seeds(stage)
        if any(c.group == group for c in design.stage_cells(stage))
    ]  # fmt: skip


def _outcome(adastop: str, look: int, looks_allowed: int) -> str:
    """AdaStop's word as the summary's: 'larger' means A's mean is above B's (the objective is maximised); an
    'equal' forced at the last look means not shown different with every seed allowed, not shown equal."""
    if adastop == "larger":
        return looks.A_BETTER
    if adastop == "smaller":
        return looks.B_BETTER
    if adastop == "equal":
        return looks.UNDECIDED if look == looks_allowed else looks.NO_DIFFERENCE
    return looks.OPEN


def _name(group: tuple) -> str:
    population, params, extra = group
    return "_".join([f"pop{population}", "-".join(params), *(f"{k}={plain(v)}" for k, v in extra)])
