"""The mechanism law: quota ramp, penalties and the farm's reward (docs/world.md).

All functions take physical rule values and broadcast over numpy arrays.
With q = fixed_quota, m = min_demand_frac, M = max(max_demand_frac, m):
stress s(L) = clip((L − q)/(1 − q), 0, 1), allowed fraction a = m + s·(M − m).
Smoothing width w > 0 replaces the ramp by
s_w(L) = w·[softplus((L − q)/w) − softplus((L − 1)/w)]/(1 − q), → s as w → 0.
"""

from __future__ import annotations

import numpy as np

TINY_VOLUME_M3 = 1e-9  # below this a need or deficit counts as zero


def _softplus(x):
    return np.logaddexp(0.0, x)


def stress(level, fixed_quota, smoothing=0.0):
    level = np.asarray(level, dtype=float)
    q = np.asarray(fixed_quota, dtype=float)
    if smoothing > 0.0:
        w = float(smoothing)
        smooth = w * (_softplus((level - q) / w) - _softplus((level - 1.0) / w)) / (1.0 - q)
        return np.clip(smooth, 0.0, 1.0)
    return np.clip((level - q) / (1.0 - q), 0.0, 1.0)


def allowed_fraction(level, fixed_quota, min_demand_frac, max_demand_frac, smoothing=0.0):
    m = np.asarray(min_demand_frac, dtype=float)
    top = np.maximum(max_demand_frac, m)
    return m + stress(level, fixed_quota, smoothing) * (top - m)


def quota_penalty(requested_m3, allowed_m3, deficit_m3, fine_amount):
    """min(1, fine·(requested − allowed)⁺ / deficit); 0 when the deficit is ≈ 0."""
    deficit = np.asarray(deficit_m3, dtype=float)
    excess = np.maximum(0.0, np.asarray(requested_m3) - np.asarray(allowed_m3))
    ratio = np.divide(
        excess, deficit, out=np.zeros(np.broadcast(excess, deficit).shape), where=deficit > TINY_VOLUME_M3
    )
    return np.minimum(1.0, fine_amount * ratio)


def flow_penalty(fraction, pressure, risk_penalty_scale, risk_penalty_power):
    return risk_penalty_scale * pressure * np.power(fraction, risk_penalty_power)


def satisfaction(delivered_m3, rain_m3, need_m3):
    """min(1, (delivered + rain)/need); 1 when the need is ≈ 0."""
    need = np.asarray(need_m3, dtype=float)
    supplied = np.asarray(delivered_m3) + np.asarray(rain_m3)
    ratio = np.divide(supplied, need, out=np.ones(np.broadcast(supplied, need).shape), where=need > TINY_VOLUME_M3)
    return np.minimum(1.0, ratio)


def reward(satisfaction_value, quota_penalty_value, flow_penalty_value):
    return satisfaction_value - np.minimum(1.0, quota_penalty_value + flow_penalty_value)
