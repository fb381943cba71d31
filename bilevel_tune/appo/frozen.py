"""The frozen learner (`frozen`): farms that keep the habits they formed under the status quo (docs/verdicts.md).

A held-out learner's block is always (the run's final rules, the status quo). `FrozenLoop` trains every
candidate of the block with APPO (the population loop, the study's settings) under the block's last rule set —
the status quo — and then evaluates candidate k's policy under the block's k-th rules without retraining: the
final rules' score is what those habits earn under the new rules, the status quo's what they earn under the
rules they were formed under. The candidates' initial weights are drawn from `candidate_seed(seed, k)`, as every
loop's. A block of lakes (several final seeds' blocks as one) trains each seed's lakes under that seed's last
rule set.
"""

from __future__ import annotations

from typing import Sequence

from bilevel_tune.appo.population import PopulationPolicyLoop
from bilevel_tune.worlds.contract import Assessment
from bilevel_tune.worlds.lakes import Lake, groups


class FrozenLoop(PopulationPolicyLoop):
    """APPO trained under the block's last rules (the status quo), each candidate scored under its own."""

    def reset(self, rules: Sequence[dict[str, float]], seed: int, candidates: Sequence[int]) -> bool:
        self.targets = [dict(r) for r in rules]
        status_quo = self.targets[-1]
        return super().reset([status_quo] * len(self.targets), seed, candidates)

    def evaluate(self, seeds: Sequence[int]) -> list[Assessment]:
        return self.evaluate_on(self.targets, seeds)

    def reset_lakes(self, lakes: Sequence[Lake]) -> bool:
        self.targets = [dict(lake.rules) for lake in lakes]
        habits = [
            Lake(lakes[first + size - 1].rules, lake.seed, lake.index)
            for first, size in groups([lake.seed for lake in lakes])
            for lake in lakes[first : first + size]
        ]  # each seed's lakes trained under its block's last rules, the status quo
        return super().reset_lakes(habits)

    def evaluate_lakes(self, seeds: Sequence[Sequence[int]]) -> list[Assessment]:
        return self.evaluate_lakes_on(self.targets, seeds)
