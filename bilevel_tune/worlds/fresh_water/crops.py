"""Crop water need: Blaney–Criddle reference evapotranspiration for corn at 45° N.

ETo = max(0, p_month · (0.46 · T_month + 8)) mm/day, times the crop
coefficient Kc for the days since planting (FAO-24 stage lengths).
Day of year is 1-based (1 = 1 January); a non-leap 365-day year.
"""

from __future__ import annotations

import numpy as np

MONTHLY_MEAN_TEMP_C = np.array([-5, -3, 2, 8, 15, 20, 23, 22, 17, 10, 4, -2], dtype=float)
DAYLIGHT_SHARE_45N = np.array([0.20, 0.23, 0.27, 0.30, 0.34, 0.35, 0.34, 0.32, 0.28, 0.24, 0.21, 0.20])
MONTH_LENGTHS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
_MONTH_FIRST_DAY = np.concatenate([[1], 1 + np.cumsum(MONTH_LENGTHS)[:-1]])

# Kc by days since planting: (last day of the stage, Kc); 0 after the season.
KC_STAGES = ((30, 0.40), (70, 0.80), (110, 1.15), (150, 0.70))
KC_MAX = max(kc for _, kc in KC_STAGES)

ETO_MM_PER_DAY = np.maximum(0.0, DAYLIGHT_SHARE_45N * (0.46 * MONTHLY_MEAN_TEMP_C + 8.0))
ETO_MAX_MM_PER_DAY = float(ETO_MM_PER_DAY.max())


def day_of_year(planting_doy, days_since_planting):
    """1-based day of year, wrapping after day 365."""
    return (np.asarray(planting_doy) - 1 + np.asarray(days_since_planting)) % 365 + 1


def month_index(doy):
    """0-based month of a 1-based day of year."""
    return np.searchsorted(_MONTH_FIRST_DAY, np.asarray(doy), side="right") - 1


def reference_et_mm(doy):
    """Blaney–Criddle ETo (mm/day) for a 1-based day of year."""
    return ETO_MM_PER_DAY[month_index(doy)]


def crop_coefficient(days_since_planting):
    """Corn Kc; 0 before planting and after day 150."""
    days = np.asarray(days_since_planting)
    kc = np.zeros(days.shape)
    lower = 0
    for last_day, stage_kc in KC_STAGES:
        kc = np.where((days >= lower) & (days <= last_day), stage_kc, kc)
        lower = last_day + 1
    return kc if kc.ndim else float(kc)


def crop_need_mm(doy, days_since_planting):
    """Crop water need Kc · ETo (mm/day)."""
    return crop_coefficient(days_since_planting) * reference_et_mm(doy)
