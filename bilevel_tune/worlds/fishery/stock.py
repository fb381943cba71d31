"""A fish stock under surplus production (Pella–Tomlinson; logistic for p = 1): growth, MSY, one step.

    B' = max(B + (r/p)·B·(1 − (B/K)^p) + R + σ·Z·B − C, 0)

R is what the fishers restore, C what they catch, Z a standard normal draw.
The maximum sustainable yield sits at B_msy = K·(1 + p)^(−1/p), where growth is
MSY = r·B_msy/(1 + p); F_msy = MSY / B_msy = r/(1 + p) is the harvest rate that
holds the stock there (for p = 1: B_msy = K/2, MSY = r·K/4, F_msy = r/2).
"""

from __future__ import annotations

import numpy as np


def growth(stock, rate: float, capacity: float, shape: float):
    """Surplus production (r/p)·B·(1 − (B/K)^p)."""
    stock = np.asarray(stock, dtype=float)
    return (rate / shape) * stock * (1.0 - np.power(stock / capacity, shape))


def b_msy(capacity: float, shape: float) -> float:
    return capacity * (1.0 + shape) ** (-1.0 / shape)


def msy(rate: float, capacity: float, shape: float) -> float:
    return rate * b_msy(capacity, shape) / (1.0 + shape)


def f_msy(rate: float, shape: float) -> float:
    return rate / (1.0 + shape)


def next_stock(stock, catch, restored, noise_draw: float, rate: float, capacity: float, shape: float, sigma: float):
    """B' = max(B + growth + R + σ·Z·B − C, 0), per copy."""
    stock = np.asarray(stock, dtype=float)
    return np.maximum(stock + growth(stock, rate, capacity, shape) + restored + sigma * noise_draw * stock - catch, 0.0)
