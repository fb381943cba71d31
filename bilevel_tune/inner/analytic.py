"""AnalyticLoop: a fast, deterministic stand-in for the APPO inner loop.

It meets the same contract (`bilevel_tune.inner.InnerLoop`) so ES,
trainable and study run under real Tune in seconds. Instead of learning,
every farm plays the myopic best response the rules in its observation
imply: with yesterday's pressure P, no rain, and today's allowed fraction
a, maximise f − c·P·f^p over [0, a], i.e. f* = min(a, (1/(c·P·p))^(1/(p−1))).
The season is still simulated by the real world, so objectives respond to
the rules as the RL ones do, only without training noise. Plain numpy.
"""

from __future__ import annotations

from typing import Sequence

from bilevel_tune.core.objective import CandidateOutcome
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.evaluation import evaluate_on_world, evaluate_policy
from bilevel_tune.world import Rules
from bilevel_tune.world.fresh_water import myopic_best_response
from bilevel_tune.worlds.contract import Assessment


class AnalyticLoop:
    """The inner loop's contract without RL: deterministic given rules and seeds.

    On fresh water it is the basin's own myopic best response (the path every analytic summary was made
    with); on another world, the world's `myopic_actions` hook, played through the contract.
    """

    def __init__(self, config: InnerLoopConfig):
        self.config = config
        self.rules: list = []  # fresh water's `Rules`, another world's physical rule values

    def reset(self, rules: Sequence[dict[str, float]], seed: int, candidates: Sequence[int]) -> bool:
        self.rules = [Rules.from_physical(r) if self.config.fresh_water else dict(r) for r in rules]
        return True

    def train(self) -> None:
        """Nothing to learn: the myopic best response is already the policy."""

    def evaluate(self, seeds: Sequence[int]) -> list[CandidateOutcome | Assessment]:
        if self.config.fresh_water:
            policy = myopic_best_response(self.rules)
            return evaluate_policy(self.config.world, self.config.weights, self.rules, seeds, policy)
        world = self.config.build_world(self.rules)
        return evaluate_on_world(world, seeds, world.myopic_actions, self.config.objective_section)

    def stop(self) -> bool:
        return True
