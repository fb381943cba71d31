"""AnalyticLoop: a fast, deterministic stand-in for the APPO inner loop.

Same interface as `actor.PolicyLoop` (reset / train / evaluate / census /
stop) so ES, trainable and study run under real Tune in seconds. Instead of
learning, every farm plays the myopic best response the rules in its
observation imply: with yesterday's pressure P, no rain, and today's
allowed fraction a, maximise f − c·P·f^p over [0, a], i.e.
f* = min(a, (1/(c·P·p))^(1/(p−1))). The season is still simulated by the
real world, so objectives respond to the rules as the RL ones do, only
without training noise. Plain numpy.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from bilevel_tune.evaluation import census, evaluate_policy
from bilevel_tune.objective import ObjectiveWeights
from bilevel_tune.world import Rules, WorldConfig


def myopic_best_response(rules: Sequence[Rules]):
    scale = np.array([r.risk_penalty_scale for r in rules])
    power = np.array([r.risk_penalty_power for r in rules])

    def policy(obs: np.ndarray) -> np.ndarray:
        pressure, allowed = obs[:, 1].astype(float), obs[:, 2].astype(float)
        cost = scale * pressure * power
        with np.errstate(divide="ignore", over="ignore"):
            interior = np.where(
                (cost > 0) & (power > 1),
                (1.0 / np.where(cost > 0, cost, 1.0)) ** (1.0 / np.maximum(power - 1.0, 1e-12)),
                1.0,
            )
        return np.clip(np.minimum(interior, allowed), 0.0, 1.0)

    return policy


class AnalyticLoop:
    """The inner loop's interface without RL: deterministic given rules and seeds."""

    def __init__(self, config):
        self.config = config  # an actor.InnerLoopConfig (duck-typed: world fields and weights)
        self.rules: list[Rules] = []
        self.trained = 0

    def reset(self, rules: Sequence[dict[str, float]], seed: int) -> bool:
        self.rules = [Rules.from_physical(r) for r in rules]
        self.trained = 0
        return True

    def train(self) -> dict[str, float]:
        self.trained += 1
        return {"env_steps": float(self.trained * self.config.horizon), "modules_trained": float(len(self.rules))}

    def evaluate(self, seeds: Sequence[int]) -> dict[str, Any]:
        world = WorldConfig(self.config.num_farms, self.config.horizon, self.config.smoothing)
        weights = ObjectiveWeights(self.config.econ_weight, self.config.sus_weight)
        outcomes = evaluate_policy(world, weights, self.rules, seeds, myopic_best_response(self.rules))
        return {"candidates": outcomes, "census": self.census()}

    def census(self) -> dict[str, float]:
        return census()

    def stop(self) -> bool:
        return True
