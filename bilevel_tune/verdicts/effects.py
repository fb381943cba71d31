"""How large a hypothesis's effect is, beside its decision: its interval, agreement, noise and the seeds a paired
test would need.

The sequential test decides (`decide`); what is shown beside it describes.
For groups matched on the seed, the effect is the mean of the within-seed
contrast (B − A of a comparison; a main effect's or an interaction's
average) with a plain paired t interval at 95 % — not widened for the looks,
and biased away from 0 after an early stop —; where two groups share fewer
than two seeds, a Welch interval on the two groups. The seeds a two-sided
paired t-test would need at a given level, power 0.8, are computed at the
observed effect and the contrast's SD (the noncentral t), as is the
smallest effect the seeds used could detect.

The library does the arithmetic, once: scipy's `ttest_1samp` gives a contrast's interval and p-value (the paired
t of its differences), statsmodels' `TTestPower` a paired test's power and the pairs it needs, its `multipletests`
Holm's step-down (`holm`). What no library has stays here: the sign-flip p-value where a contrast has no spread
(`sequential.sign_flip_p`), and the power of two one-sided tests (`equivalence_power`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from bilevel_tune.verdicts.sequential import FLAT, sign_flip_p

POWER = 0.8
CONFIDENCE = 0.95
MOST_SEEDS = 100_000  # beyond this a paired test "would need" is reported as more than it
NONE = 1e-12  # an effect this small is rounding: the same runs scored twice


@dataclass(frozen=True)
class Effect:
    mean: float  # B − A
    low: float  # its 95 % interval (NaN with too few runs)
    high: float
    paired: bool  # matched on the seed (else Welch, unmatched)
    pairs: int  # matched pairs (paired), else min(runs of A, runs of B)
    agreeing: int  # matched pairs whose difference has the mean's sign
    sd: float  # the SD of these two groups' runs (ddof 1, pooled over the two)
    seeds_needed: int | None  # per group, at the observed effect; None when the effect is 0 (or unknown)
    detectable: float  # the smallest |effect| these seeds detect with the stated power (NaN when unknown)
    sd_contrast: float = float("nan")  # the SD of the within-seed contrast (paired), what the seeds needed rest on


def effect(a: Mapping[int, float], b: Mapping[int, float], level: float) -> Effect:
    """B − A over two groups' scores by seed; `level`: the two-sided level of the paired test for seeds needed."""
    shared = sorted(set(a) & set(b))
    xa, xb = np.array(list(a.values()), float), np.array(list(b.values()), float)
    sd = _pooled_sd(xa, xb)
    if len(shared) >= 2:
        return paired(np.array([b[s] - a[s] for s in shared]), sd, level)
    mean = float(xb.mean() - xa.mean()) if xa.size and xb.size else float("nan")
    low = high = float("nan")
    if xa.size >= 2 and xb.size >= 2:
        va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / ((va**2 / (xa.size - 1)) + (vb**2 / (xb.size - 1))) if se else 1.0
        half = stats.t.ppf(0.5 + CONFIDENCE / 2, df) * se
        low, high = mean - half, mean + half
    n = min(xa.size, xb.size)
    return Effect(mean, low, high, False, n, 0, sd, seeds_needed(mean, math.sqrt(2) * sd, level), float("nan"))


def paired(d: np.ndarray, sd: float, level: float) -> Effect:
    """A within-seed contrast's effect (B − A of a comparison, a main effect's or an interaction's average) over its
    seeds: the mean with a t interval, the seeds that agree in sign, and the seeds a paired test needs; `sd`: the
    SD of the cells it reads, shown beside."""
    d = np.asarray(d, float)
    n = d.size
    if n < 2:
        mean = float(d.mean()) if n else float("nan")
        return Effect(mean, float("nan"), float("nan"), True, n, int(n and abs(mean) > NONE), sd, None, float("nan"))
    mean, sd_d = float(d.mean()), float(d.std(ddof=1))
    low, high = stats.ttest_1samp(d, 0.0).confidence_interval(CONFIDENCE) if sd_d > 0 else (mean, mean)
    agreeing = int(np.sum(np.sign(d) == np.sign(mean))) if abs(mean) > NONE else 0
    return Effect(
        mean, float(low), float(high), True, n, agreeing, sd, seeds_needed(mean, sd_d, level),
        detectable(sd_d, n, level), sd_d,
    )  # fmt: skip


def p_value(d: np.ndarray) -> float:
    """Two-sided: the paired t of these within-seed differences against 0 (scipy's `ttest_1samp`); the sign-flip
    test where they have no spread (a t is undefined there)."""
    d = np.asarray(d, float)
    if d.size < 2:
        return 1.0
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd <= FLAT * abs(mean):
        return sign_flip_p(d) if mean != 0 else 1.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def holm(p_values, alpha: float) -> list[bool]:
    """Which of these a Holm step-down at family-wise `alpha` rejects (statsmodels' `multipletests`)."""
    if not len(p_values):
        return []
    return [bool(r) for r in multipletests(list(p_values), alpha=alpha, method="holm")[0]]


def pooled_sd(groups: list[np.ndarray]) -> float:
    """The SD of several groups' runs (ddof 1 within each, pooled): the seed noise of these cells only."""
    dof = sum(max(len(x) - 1, 0) for x in groups)
    if not dof:
        return float("nan")
    return float(math.sqrt(sum(np.var(x, ddof=1) * (len(x) - 1) for x in groups if len(x) > 1) / dof))


def _pooled_sd(xa: np.ndarray, xb: np.ndarray) -> float:
    return pooled_sd([xa, xb])


def power(effect_size: float, n: int, level: float) -> float:
    """A two-sided paired t-test's power with n pairs, at a standardised effect (mean / SD of the differences)."""
    if n < 2:
        return 0.0
    exact = float(TTestPower().power(effect_size, n, level, alternative="two-sided"))
    if np.isfinite(exact):
        return exact
    # the noncentral t fails far in its tail (one or two pairs at a small level): the shifted central t there
    crit, nc = stats.t.ppf(1 - level / 2, n - 1), effect_size * math.sqrt(n)
    return float(stats.t.sf(crit - nc, n - 1) + stats.t.cdf(-crit - nc, n - 1))


def seeds_needed(mean: float, sd_d: float, level: float) -> int | None:
    """The pairs a two-sided paired t-test at `level` needs to reach POWER at this effect; None for no effect."""
    if not np.isfinite(mean) or not np.isfinite(sd_d) or abs(mean) <= NONE:
        return None
    if sd_d == 0:
        return 2
    size = abs(mean) / sd_d
    if power(size, MOST_SEEDS, level) < POWER:
        return MOST_SEEDS + 1
    return _smallest(lambda n: power(size, n, level) >= POWER)


def _smallest(enough) -> int:
    """The smallest number of pairs (≥ 2) for which `enough(n)` holds, `enough` turning true and staying so."""
    low, high = 2, 2
    while not enough(high):  # bracket, then bisect
        low, high = high, high * 2
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if not enough(middle) else (low, middle)
    return low


def equivalence_power(mean: float, sd_d: float, n: int, level: float, margin: float) -> float:
    """Two one-sided paired t-tests at `level` each, n pairs: the chance both reject (the interval inside ±margin) at
    this true mean difference; a lower bound, the sum of the two one-sided powers less 1."""
    if n < 2:
        return 0.0
    crit, df = stats.t.ppf(1 - level, n - 1), n - 1
    sides = [(margin - abs(mean)) * math.sqrt(n) / sd_d, (margin + abs(mean)) * math.sqrt(n) / sd_d]
    one_sided = [float(stats.nct.sf(crit, df, nc)) if np.isfinite(stats.nct.sf(crit, df, nc))
                 else float(stats.t.sf(crit - nc, df)) for nc in sides]  # fmt: skip
    return max(0.0, sum(one_sided) - 1)


def equivalence_seeds_needed(mean: float, sd_d: float, level: float, margin: float) -> int | None:
    """The pairs two one-sided tests at `level` need to show |B − A| < margin with POWER at the observed difference;
    None when that difference is the margin or more (no number of pairs shows it inside)."""
    if not np.isfinite(mean) or not np.isfinite(sd_d) or abs(mean) >= margin:
        return None
    if sd_d == 0:
        return 2
    if equivalence_power(mean, sd_d, MOST_SEEDS, level, margin) < POWER:
        return MOST_SEEDS + 1
    return _smallest(lambda n: equivalence_power(mean, sd_d, n, level, margin) >= POWER)


def detectable(sd_d: float, n: int, level: float) -> float:
    """The smallest |mean difference| that n pairs detect with POWER at `level`."""
    if n < 2 or not np.isfinite(sd_d):
        return float("nan")
    if sd_d == 0:
        return 0.0
    if power(1e4, n, level) < POWER:
        return float("inf")  # too few pairs for any effect this test could show
    return float(TTestPower().solve_power(None, n, level, POWER, alternative="two-sided") * sd_d)
