"""AnalyticLoop: a fast, deterministic stand-in for the APPO inner loop.

It meets the same contract (`bilevel_tune.inner.InnerLoop`) so ES,
trainable and study run under real Tune in seconds. Instead of learning,
every agent plays the myopic best response its world offers (`myopic_actions`;
fresh water's farms maximise today's f − c·P·f^p over [0, a]). The season is
still played by the real world, so objectives respond to the rules as the RL
ones do, only without training noise. Plain numpy.
"""

from __future__ import annotations

from typing import Sequence

from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.evaluation import evaluate
from bilevel_tune.worlds.contract import Assessment


class AnalyticLoop:
    """The inner loop's contract without RL: deterministic given rules and seeds."""

    def __init__(self, config: InnerLoopConfig):
        self.config = config
        self.rules: list[dict[str, float]] = []  # the block's rules, physical

    def reset(self, rules: Sequence[dict[str, float]], seed: int, candidates: Sequence[int]) -> bool:
        self.rules = [r.as_dict() if hasattr(r, "as_dict") else dict(r) for r in rules]
        return True

    def train(self) -> None:
        """Nothing to learn: the myopic best response is already the policy."""

    def evaluate(self, seeds: Sequence[int]) -> list[Assessment]:
        world = self.config.build_world(self.rules)
        return evaluate(world, seeds, world.myopic_actions, self.config.objective_settings)

    def stop(self) -> bool:
        return True
