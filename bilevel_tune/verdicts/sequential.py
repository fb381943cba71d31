"""A group-sequential paired t-test: Lan–DeMets O'Brien–Fleming spending, its levels calibrated for the t.

A hypothesis is looked at K times, after n, 2n, …, Kn matched pairs (a
study's stages). The Lan–DeMets spending function of O'Brien–Fleming type
(Lan & DeMets 1983; O'Brien & Fleming 1979), two-sided at level α,

    α(t) = 4 · (1 − Φ(z_{1−α/4} / √t)),   t = the share of the pairs seen,

says how much of α may be spent by each look; `z_bounds` turns it into the
boundaries c_k of the normal statistic by the Armitage–McPherson–Rowe
recursion (Jennison & Turnbull, *Group Sequential Methods*, 2000, ch. 19),
reproducing R gsDesign's `sfLDOF` bounds. A look's nominal level is
p_k = 2(1 − Φ(c_k)).

The statistic here is the paired t of the differences seen so far: at few
degrees of freedom, the same nominal levels spend more than α over the looks
(1.06–1.12× at df 1–11). `TLevels` scales them by one factor λ ≤ 1, found by
Monte Carlo on the null's t paths (normal differences: their distribution
does not depend on σ) so that the error over every look is α — the exact
sequential t of Jennison & Turnbull (Biometrika 1991) by simulation. The
simulation is seeded: the same plan and level give the same boundaries,
so a replayed study decides as it did.

With a margin δ (`[decide] margin`), the same plan at level 2ℓ gives a
hypothesis's repeated confidence intervals (Jennison & Turnbull 1989, 1993):
mean ± c_k·SD/√n covers the true difference at every look at once with
chance 1 − 2ℓ, so an interval inside ±δ shows the difference smaller than δ
with each side's error at most ℓ (`TLevels.within`).

A look whose differences have no spread (runs pinned at a ceiling) has no t:
it is decided by the sign-flip test instead (Fisher), whose exact p-value
for n pairs that all agree is 2 / 2ⁿ, against the same nominal level. Pure
numpy and scipy.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from bilevel_tune.base import seeds

GRID = 401  # points of the recursion's grid per look (odd: Simpson's rule); 2001 moves no bound by 1e-9
PATHS = 1 << 18  # null t paths the calibration draws
PATHS_SEED = 20261204
FLAT = 1e-9  # differences whose SD is below this share of their mean's size have no spread: the sign-flip decides


def spent(t, alpha: float) -> np.ndarray:
    """The level spent by information fraction t (two-sided Lan–DeMets O'Brien–Fleming)."""
    t = np.asarray(t, float)
    with np.errstate(divide="ignore"):
        return np.where(t > 0, 4 * stats.norm.sf(stats.norm.isf(alpha / 4) / np.sqrt(np.maximum(t, 1e-300))), 0.0)


@functools.lru_cache(maxsize=256)
def z_bounds(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """Two-sided boundaries c_1…c_K of the standardised statistic at these information fractions (the last 1):
    under the null P(|Z_1| ≥ c_1 or …, first at look k) = α(t_k) − α(t_{k−1})."""
    t = np.asarray(fractions, float)
    spend = np.diff(np.concatenate([[0.0], spent(t, alpha)]))
    bounds = [float(stats.norm.isf(spend[0] / 2))]
    # the density of the score S_k = Z_k √t_k on the continuation region |S_k| < c_k √t_k
    half = bounds[0] * math.sqrt(t[0])
    grid = np.linspace(-half, half, GRID)
    density = stats.norm.pdf(grid, scale=math.sqrt(t[0]))
    for k in range(1, len(t)):
        step = math.sqrt(t[k] - t[k - 1])
        weights = _simpson(grid) * density
        args = (math.sqrt(t[k]), grid, weights, step, spend[k])
        c = float(optimize.brentq(_crossing_at, 1e-6, 60.0, args=args, xtol=1e-10))
        bounds.append(c)
        half = c * math.sqrt(t[k])
        following = np.linspace(-half, half, GRID)
        density = stats.norm.pdf((following[:, None] - grid[None, :]) / step) / step @ weights
        grid = following
    return tuple(bounds)


def _crossing_at(c: float, scale: float, grid: np.ndarray, weights: np.ndarray, step: float, spend: float) -> float:
    """P(the next look's |Z| ≥ c, having continued so far) less the level it may spend: the continuing density (as
    Simpson weights on its grid) carried one step of the score's walk, both tails beyond ±c on the look's scale."""
    edge = c * scale
    tails = stats.norm.sf((edge - grid) / step) + stats.norm.cdf((-edge - grid) / step)
    return float(weights @ tails) - spend


def _simpson(grid: np.ndarray) -> np.ndarray:
    h = grid[1] - grid[0]
    w = np.ones(grid.size)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return w * h / 3


@functools.lru_cache(maxsize=16)
def _null_paths(n: int, looks: int) -> tuple[np.ndarray, np.ndarray]:
    """The null's paired-t paths: per path and look, the mean and SD of the first n·k standard normal differences."""
    rng = seeds.generator(PATHS_SEED, n, looks)
    means, sds = np.empty((PATHS, looks)), np.empty((PATHS, looks))
    sums, squares = np.zeros(PATHS), np.zeros(PATHS)
    for k in range(looks):  # n more pairs a look, drawn look by look: memory of one look's draws
        z = rng.standard_normal((PATHS, n))
        sums += z.sum(axis=1)
        squares += (z * z).sum(axis=1)
        count = n * (k + 1)
        means[:, k] = sums / count
        sds[:, k] = np.sqrt(np.maximum(squares - count * means[:, k] ** 2, 0) / max(count - 1, 1))
    return means, sds


@functools.lru_cache(maxsize=4)
def _null_p_values(n: int, looks: int) -> np.ndarray:
    """The null's paths' two-sided paired-t p-values at each look (inf where a look has one pair: no t)."""
    means, sds = _null_paths(n, looks)
    counts = n * np.arange(1, looks + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        t_paths = np.abs(means) * np.sqrt(counts) / sds
        p = 2 * stats.t.sf(t_paths, np.maximum(counts - 1, 1))
    p[:, counts < 2] = np.inf
    return p


@dataclass(frozen=True)
class TLevels:
    """One hypothesis's plan at one level: K looks of n more pairs each, the nominal two-sided level of each look
    (calibrated for the paired t), and its critical |t|s (inf where a look has one pair: no t)."""

    n: int
    looks: int
    level: float
    nominal: tuple[float, ...]
    critical: tuple[float, ...]
    scale: float  # λ: the calibration's factor on the normal boundaries' nominal levels

    def pairs(self, look: int) -> int:
        return self.n * look

    def crosses(self, differences: np.ndarray, look: int) -> bool:
        """Does look `look` (1-based) of these differences (its n·look pairs) reject?"""
        d = np.asarray(differences, float)
        if d.size < 2:
            return False
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        if sd <= FLAT * abs(mean):  # no spread: every pair the same; the sign-flip test (t undefined)
            return bool(mean != 0) and sign_flip_p(d) <= self.nominal[look - 1]
        return abs(mean) * math.sqrt(d.size) / sd >= self.critical[look - 1]

    def within(self, differences: np.ndarray, look: int, margin: float) -> bool:
        """Does look `look`'s repeated confidence interval of the mean difference lie inside ±margin?

        The interval is mean ± critical·SD/√n at this plan's level 2ℓ, so each of its sides misses with chance at
        most ℓ over every look: two one-sided tests at ℓ (Schuirmann 1987) made group-sequential (Jennison &
        Turnbull 1989, 1993). Differences with no spread (runs pinned at a ceiling) make the interval a point:
        every pair the same value, equivalent when that value lies inside the margin."""
        d = np.asarray(differences, float)
        if d.size < 2:
            return False
        low, high = self.interval(d, look)
        if low == high:
            return abs(low) < margin
        return -margin < low and high < margin

    def interval(self, differences: np.ndarray, look: int) -> tuple[float, float]:
        """Look `look`'s repeated confidence interval of the mean difference at this plan's level: mean ±
        critical·SD/√n (a point where the differences have no spread; unbounded below two pairs)."""
        d = np.asarray(differences, float)
        if d.size < 2:
            return -math.inf, math.inf
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        if sd <= FLAT * abs(mean):
            return mean, mean
        half = self.critical[look - 1] * sd / math.sqrt(d.size)
        return mean - half, mean + half


@functools.lru_cache(maxsize=1 << 16)  # a family's graph reaches a few thousand levels: each calibrated once
def t_levels(n: int, looks: int, level: float) -> TLevels:
    """The paired t's plan at `level`: O'Brien–Fleming nominal levels, scaled so the null's t paths cross at most
    `level` of the time over the K looks (one look: the t-test itself, exact)."""
    fractions = tuple((k + 1) / looks for k in range(looks))
    nominal = 2 * stats.norm.sf(np.array(z_bounds(fractions, level)))
    df = n * np.arange(1, looks + 1) - 1

    def critical(scale: float) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(df >= 1, stats.t.isf(scale * nominal / 2, np.maximum(df, 1)), np.inf)

    scale = 1.0
    if looks > 1:
        # a path crosses at scale s when some look's p-value is at most s × its nominal level: each path's smallest
        # such s, once, then the share of paths at or below s is the error (one vector a level, not one per step)
        finite = df >= 1
        needed = (_null_p_values(n, looks)[:, finite] / nominal[finite]).min(axis=1) if finite.any() else None

        def error(s: float) -> float:
            return 0.0 if needed is None else float(np.count_nonzero(needed <= s)) / needed.size

        if error(1.0) > level:  # the largest scale whose error is at most the level (error grows with the scale)
            low, high = 0.0, 1.0
            for _ in range(40):
                middle = (low + high) / 2
                low, high = (middle, high) if error(middle) <= level else (low, middle)
            scale = low
    return TLevels(n, looks, level, tuple(map(float, scale * nominal)), tuple(map(float, critical(scale))), scale)


def sign_flip_p(differences: np.ndarray) -> float:
    """The two-sided exact p-value of the studentized sign-flip statistic |Σd| / √Σd² (Fisher's test on pairs;
    every sign pattern, up to 2^16 of them)."""
    d = np.asarray(differences, float)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    if d.size > 16:
        raise ValueError("sign_flip_p: exact over 2^n patterns, n ≤ 16 (the t decides larger samples)")
    signs = 1 - 2 * ((np.arange(1 << d.size)[:, None] >> np.arange(d.size)) & 1)
    stat = np.abs(signs @ d) / math.sqrt(float(d @ d))
    observed = abs(d.sum()) / math.sqrt(float(d @ d))
    return float(np.mean(stat >= observed * (1 - 1e-12)))


def power(levels: TLevels, effect: float, by_look: int | None = None) -> float:
    """The chance the paired t rejects by look `by_look` (default: the last) at a standardised effect (the mean
    difference over its SD), on the same seeded paths as the calibration."""
    looks = levels.looks if by_look is None else by_look
    means, sds = _null_paths(levels.n, levels.looks)
    counts = levels.n * np.arange(1, looks + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        t_paths = np.abs(means[:, :looks] + effect) * np.sqrt(counts) / sds[:, :looks]
    return _crossing(t_paths, np.array(levels.critical[:looks]))


def equivalence_power(levels: TLevels, margin: float, by_look: int | None = None) -> float:
    """The chance the repeated intervals of `levels` (a plan at 2ℓ: an equivalence claim's at share ℓ) lie inside
    ±margin by look `by_look` (default: the last) when the true difference is 0; the margin in SDs of the
    differences. On the same seeded paths as the calibration."""
    looks = levels.looks if by_look is None else by_look
    means, sds = _null_paths(levels.n, levels.looks)
    counts = levels.n * np.arange(1, looks + 1)
    critical = np.array(levels.critical[:looks])
    finite = np.isfinite(critical)
    if not finite.any():
        return 0.0
    inside = np.abs(means[:, :looks]) + critical * sds[:, :looks] / np.sqrt(counts) < margin
    return float(np.mean(np.any(inside[:, finite], axis=1)))


def _crossing(t_paths: np.ndarray, critical: np.ndarray) -> float:
    """The share of paths whose |t| reaches a look's critical value (a look of one pair, critical inf, never does)."""
    finite = np.isfinite(critical)
    return float(np.mean(np.any(t_paths[:, finite] >= critical[finite], axis=1))) if finite.any() else 0.0


def detectable(levels: TLevels, target: float, by_look: int | None = None) -> float:
    """The smallest standardised effect the plan decides with chance `target` by look `by_look`; inf when none
    does (too few pairs for any t)."""
    high = 1.0
    while power(levels, high, by_look) < target:
        if high > 1e3:
            return float("inf")
        high *= 2
    low = 0.0
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if power(levels, middle, by_look) < target else (low, middle)
    return high
