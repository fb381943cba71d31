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

from bilevel_tune.study_data.settings import plain
from bilevel_tune.verdicts import family as F
from bilevel_tune.verdicts import looks as D

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


def describe_adastop_plan(study, n: int, looks: int, stages: str) -> str:
    count = len(F.simple_comparisons(study))
    first = first_decisive_look(n, looks, study.decide.alpha)
    when = (
        "no stage can decide anything (too few seeds for the permutations: raise seeds_per_stage or max_seeds)"
        if first is None
        else f"its permutations can first decide at stage {first} ({n * first} seeds per cell)"
    )
    return f"AdaStop at family-wise α {study.decide.alpha:g} over {count} comparison(s), {stages} at most; {when}"


def adastop_seed(study) -> int:
    """The permutations' seed, from the grid's seeds: the same study draws the same permutations."""
    return int(np.random.SeedSequence([*study.seeds]).generate_state(1)[0])


def decide_adastop(study, finals: Mapping[tuple, float], trial_names: Mapping[tuple, str] | None = None) -> D.Decisions:
    """Replay AdaStop over the study's stages: each complete stage is one look at the final re-evaluations so far."""
    pairs = F.simple_comparisons(study)
    n, looks_allowed = D.plan_of(study)
    alpha = study.decide.alpha
    if not pairs:
        return D.Decisions((), 0, looks_allowed, alpha, n, None, D.ADASTOP)
    agents = [g for g in study.groups() if any(g in (c.a, c.b) for c in pairs)]
    index = {g: i for i, g in enumerate(agents)}
    comparator = two_sided_adastop(
        n=n,
        K=looks_allowed,
        B=PERMUTATIONS,
        comparisons=np.array([(index[c.a], index[c.b]) for c in pairs]),
        alpha=alpha,
        beta=study.decide.beta,
        seed=adastop_seed(study),
    )
    replay = D.Replay(study, finals, trial_names or {})
    decided_at: dict[str, int] = {}
    for stage in range(1, len(study.stages) + 2):
        if not replay.take(stage):
            break
        scores = {g: [replay.scores[g][s] for s in _seeds_of(study, g, stage)] for g in agents}
        comparator.partial_compare({_name(g): np.array(scores[g]) for g in agents}, verbose=False)
        for key, outcome in comparator.decisions.items():
            if outcome != "continue":
                decided_at.setdefault(key, stage)
        if comparator.is_finished:
            break
    if not replay.looks:
        return D.Decisions((), 0, looks_allowed, alpha, n, replay.incomplete, D.ADASTOP)
    decisions = []
    for i, comparison in enumerate(pairs):
        key = str(comparator.comparisons[i])
        look = decided_at.get(key, replay.looks)
        outcome = _outcome(comparator.decisions[key], look, looks_allowed)
        decisions.append(D.Decision(comparison, outcome, look, n * look, alpha))
    return D.Decisions(tuple(decisions), replay.looks, looks_allowed, alpha, n, replay.incomplete, D.ADASTOP)


def _seeds_of(study, group: tuple, last_stage: int) -> list[int]:
    """The group's seeds of stages 1…last_stage, in stage order (AdaStop reads each look's block in order)."""
    return [
        s for stage in range(1, last_stage + 1) for s in study.stage_seeds(stage)
        if any(c.group == group for c in study.stage_cells(stage))
    ]  # fmt: skip


def _outcome(adastop: str, look: int, looks_allowed: int) -> str:
    """AdaStop's word as the summary's: 'larger' means A's mean is above B's (the objective is maximised); an
    'equal' forced at the last look means not shown different with every seed allowed, not shown equal."""
    if adastop == "larger":
        return D.A_BETTER
    if adastop == "smaller":
        return D.B_BETTER
    if adastop == "equal":
        return D.UNDECIDED if look == looks_allowed else D.NO_DIFFERENCE
    return D.OPEN


def _name(group: tuple) -> str:
    population, params, extra = group
    return "_".join([f"pop{population}", "-".join(params), *(f"{k}={plain(v)}" for k, v in extra)])
