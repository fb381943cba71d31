"""Surrogate lake hydrology: weather, inflow, and one day's water balance.

One day, in this order (docs/world.md):
1. withdrawals are cut pro rata so they never exceed the water there is,
   V + Q_in·Δt;
2. release Q_out = r·Q_in (r the release share, 0.6 by default), reduced so the volume stays ≥ 0;
3. spill: any volume above capacity leaves as extra outflow.
Hence V' = V + (Q_in − W − Q_out − spill)·Δt exactly, every term ≥ 0.
Arrays broadcast: one call steps any number of independent lakes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SECONDS_PER_DAY = 86_400.0
MAX_DEPTH_M = 11.0  # below the full stage of 420.41 m
SURFACE_AREA_M2 = 5_756_935.9
CAPACITY_M3 = SURFACE_AREA_M2 * MAX_DEPTH_M

BASE_INFLOW_M3S = 10.0
INFLOW_SEASONAL_AMPLITUDE = 0.8
INFLOW_LOG_SD = 0.3
INFLOW_PEAK_DOY = 100
# the defaults of the world's settings (WorldConfig): an ordinary day's outflow share of inflow, and the rain
RELEASE_SHARE = 0.6
RAIN_PROBABILITY = 0.3
RAIN_MEAN_MM = 8.0


def inflow_m3s(doy, z):
    """Mean-one lognormal noise on a seasonal cosine: base·(1 + a·cos(2π(doy−100)/365))·exp(sZ − s²/2)."""
    seasonal = 1.0 + INFLOW_SEASONAL_AMPLITUDE * np.cos(2.0 * np.pi * (np.asarray(doy) - INFLOW_PEAK_DOY) / 365.0)
    return BASE_INFLOW_M3S * seasonal * np.exp(INFLOW_LOG_SD * np.asarray(z) - INFLOW_LOG_SD**2 / 2.0)


def draw_rain_mm(rng: np.random.Generator, size=None, probability=RAIN_PROBABILITY, mean_mm=RAIN_MEAN_MM):
    """Rain on `probability` of days (30 %), Exponential(mean `mean_mm`, 8 mm) when it rains.

    Both draws are made whatever the probability, so a dry world keeps the weather's random stream.
    """
    wet = rng.random(size) < probability
    return np.where(wet, rng.exponential(mean_mm, size), 0.0)


@dataclass(frozen=True)
class LakeDay:
    """One day of one or many lakes; rates in m³/s, volumes in m³."""

    delivered_share: np.ndarray  # factor applied to every request (1 = no cut)
    withdrawal: np.ndarray
    release: np.ndarray
    spill: np.ndarray
    volume: np.ndarray  # end of day

    @property
    def level(self):
        return self.volume / CAPACITY_M3

    def pressure(self, inflow):
        """Outflow (release + spill) over inflow, clipped to [0, 1].

        The release share (0.6) on an ordinary day; more on a day the lake spills: a lake full at the
        start of the day, from which the farms withdraw W, reaches 1 − W/inflow.
        """
        return np.minimum(np.maximum((self.release + self.spill) / np.maximum(inflow, 1e-12), 0.0), 1.0)


def step_lake(volume, inflow, requested_m3, release_share=RELEASE_SHARE) -> LakeDay:
    """Advance lakes one day given their total requested withdrawal volume (m³)."""
    volume = np.asarray(volume, dtype=float)
    requested_m3 = np.asarray(requested_m3, dtype=float)
    available = volume + inflow * SECONDS_PER_DAY
    share = np.where(requested_m3 > available, available / np.maximum(requested_m3, 1e-300), 1.0)
    withdrawal = requested_m3 * share / SECONDS_PER_DAY
    after_withdrawal = volume + (inflow - withdrawal) * SECONDS_PER_DAY
    release = np.minimum(np.maximum(after_withdrawal / SECONDS_PER_DAY, 0.0), release_share * inflow)  # a clip
    before_spill = after_withdrawal - release * SECONDS_PER_DAY
    spill = np.maximum(0.0, before_spill - CAPACITY_M3) / SECONDS_PER_DAY
    # max(0, ·) only absorbs rounding (~1e-19 of capacity) when a lake is drained exactly
    new_volume = np.maximum(0.0, volume + (inflow - withdrawal - release - spill) * SECONDS_PER_DAY)
    return LakeDay(share, withdrawal, release, spill, new_volume)
