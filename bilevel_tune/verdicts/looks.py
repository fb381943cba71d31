"""What a study's decisions look like, and the looks they are taken at: plain data both tests share.

A look is a stage (`study_data.stages`): `Replay` scores each stage's cells
from the stored final re-evaluations, in order, and stops at the first
stage with a trial not finished; `plan_of` is the plan's seeds per look and
looks at most. `Decisions` is what a test (`decide`) returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from bilevel_tune.base.knobs import StudyError
from bilevel_tune.study_data.run_folder import group_of, key_at_evaluations, real_group, trial_name
from bilevel_tune.verdicts import family

A_BETTER, B_BETTER = "A better", "B better"  # for an interaction: B − A below or above 0
NO_DIFFERENCE = "no difference"  # AdaStop accepted equality early (only with [decide] beta > 0)
EQUIVALENT = "equivalent"  # the paired test's repeated interval inside ±margin (only with [decide] margin)
UNDECIDED = "undecided"  # not shown different at the last look: the study's maximum seeds
OPEN = "open"  # not decided yet, and a later stage may decide it (--resume --until-decided)
PAIRED, ADASTOP = "paired", "adastop"
TESTS = (PAIRED, ADASTOP)
TEST_NAMES = {PAIRED: "paired t, group-sequential", ADASTOP: "AdaStop"}


class DecideError(StudyError):
    """Scores that cannot be decided on (a trial without a final re-evaluation); one line for the user."""


@dataclass(frozen=True)
class Decision:
    hypothesis: Any  # a family.Comparison, MainEffect or Interaction
    outcome: str  # A_BETTER, B_BETTER, NO_DIFFERENCE, UNDECIDED or OPEN
    look: int  # the stage it was decided at (1-based); else the last stage it was looked at
    seeds: int  # the seeds (matched pairs) it was decided on, or looked at so far
    level: float = 0.0  # the level it was last tested at (its share of α then); AdaStop: the family's α
    within_margin: bool = False  # shown equivalent within the margin: alone (EQUIVALENT), or beside a winner
    margin_level: float = 0.0  # with a margin: the level its equivalence claim was last tested at (each side's)
    margin_look: int = 0  # the stage its equivalence claim was shown at (0: not shown); may be after `look`
    margin_seeds: int = 0  # the seeds it was shown on

    @property
    def decision(self) -> str:
        """The machine-readable answer: A better, B better, equivalent, undecided or open (AdaStop's early 'no
        difference' reads equivalent: within its detectable effect)."""
        return EQUIVALENT if self.outcome == NO_DIFFERENCE else self.outcome


@dataclass(frozen=True)
class Decisions:
    """The decisions after the stages run so far."""

    decisions: tuple[Decision, ...]
    looks: int  # stages looked at
    stages: int  # K: the looks the plan allows
    alpha: float
    seeds_per_look: int
    incomplete: str | None = None  # why the latest stage was not looked at (a trial still running)
    test: str = PAIRED
    margin: float | None = None  # the paired test's equivalence margin, when the study declares one
    margin_from: int = 1  # the first look it decided at

    @property
    def open_groups(self) -> set[tuple]:
        """The groups of the hypotheses still open: the cells the next stage adds seeds to (a row at equal evaluations
        adds them to the grid's groups it reads)."""
        return {real_group(g) for d in self.decisions if d.outcome == OPEN for g in family.groups(d.hypothesis)}

    @property
    def finished(self) -> bool:
        return all(d.outcome != OPEN for d in self.decisions)

    @property
    def test_name(self) -> str:
        return TEST_NAMES[self.test]

    def record(self) -> list[dict[str, Any]]:
        """For study.json: one line per hypothesis."""
        return [
            {"comparison": d.hypothesis.key, "kind": d.hypothesis.kind, "outcome": d.outcome, "stage": d.look,
             "seeds": d.seeds, "level": d.level,
             **({} if self.margin is None else {"within_margin": d.within_margin, "margin_level": d.margin_level,
                                                "margin_stage": d.margin_look or None, "margin_seeds": d.margin_seeds or None})}
            for d in self.decisions
        ]  # fmt: skip


def plan_of(design) -> tuple[int, int]:
    """(n seeds per look, K looks): the study's stages when its grid is their first, else one look at every seed."""
    n = design.decide.seeds_per_stage
    return (n, design.decide.stages) if len(design.seeds) == n else (len(design.seeds), 1)


@dataclass
class Replay:
    """The looks taken so far: each group's scores by seed, and the stages whose cells were all scored.

    `finals` holds a cell's score at its own budget under its key, and at each smaller budget it was re-scored at
    under `key_at_evaluations` (`[decide] equal_budget`); a score at a smaller budget that is missing or failed
    leaves its rows' seeds unheld (not followed), never the look unfinished."""

    design: Any
    finals: Mapping[tuple, float]
    names: Mapping[tuple, str]
    scores: dict[tuple, dict[int, float]] = field(default_factory=dict)
    looks: int = 0
    incomplete: str | None = None

    def take(self, stage: int) -> bool:
        """Score the stage's cells; False (and `incomplete` says why) when one has not finished."""
        cells = self.design.stage_cells(stage)
        missing = [c for c in cells if c.key not in self.finals]
        if missing:
            first = self.names.get(missing[0].key) or trial_name(self.design, missing[0])  # not started: no record
            self.incomplete = f"stage {stage}: {len(missing)} trial(s) not finished ({first}…)"
            return False
        for cell in cells:
            value = self.finals[cell.key]
            if not np.isfinite(value):
                raise DecideError(
                    f"trial {self.names.get(cell.key, cell)} has no final re-evaluation (every retraining failed): "
                    "its comparisons cannot be decided"
                )
            self.scores.setdefault(cell.group, {})[cell.seed] = float(value)
            for evaluations in self.design.equal_evaluations(cell.population):
                key = key_at_evaluations(cell.key, evaluations)
                if np.isfinite(self.finals.get(key, np.nan)):
                    self.scores.setdefault(group_of(key), {})[cell.seed] = float(self.finals[key])
        self.looks = stage
        return True

    def seeds(self, hypothesis, look: int) -> list[int] | None:
        """The seeds of stages 1…look, when every group of the hypothesis holds them all; None when not (its groups
        were not continued: the hypothesis is not followed past its last complete look)."""
        seeds = [s for stage in range(1, look + 1) for s in self.design.stage_seeds(stage)]
        held = all(all(s in self.scores.get(g, {}) for s in seeds) for g in family.groups(hypothesis))
        return seeds if held else None


