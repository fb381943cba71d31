"""A study's grid and stage plan: the trials a study expands into — its cells, stage by stage, and its scans — and
its budget as run against the study file's. No settings are read here but the grid's own, the budget and
`[decide] equal_budget` (the smaller budgets a cell is also scored at).

`GridPlan` is a view of one study (`study.grid`: `study.grid.cells()`, `study.grid.stage_cells(2)`): the `Study` is
its typed settings and nothing else, the plan reads them — the grid's fields (`populations`, `optimize_params`,
`seeds`, `axes`, `stages`, `scan`), the budget (`budget`, `budget_name`, `full_budget`), `decide`, and for the
further axes' values its settings and world table (`settings`, `outer`, `table`). The cells it makes, `Cell` and
`Stage`, are the run folder's identities (`run_folder`: a record's cell key, a trial's name). No loops, no Ray.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Iterable

from bilevel_tune.study_data import study_overrides
from bilevel_tune.study_data.run_folder import Cell
from bilevel_tune.study_data.study_checks import StudyError

FULL_BUDGET = "full"  # the name of a study file's [budget]


@dataclass(frozen=True, eq=False)
class GridPlan:
    """The trials of a study (its grid fields expanded), and its budget as run."""

    study: Any  # the definition.Study it plans (typed by name only: definition imports this module)

    @property
    def optimizers(self) -> tuple[str, ...]:
        """The outer optimisers its trials run: [outer] optimizer, or that axis's values."""
        return dict(self.study.axes).get("outer.optimizer", (self.study.outer.optimizer,))

    def trial_values(self) -> Iterable[dict[str, Any]]:
        """The settings of each combination of the further grid axes."""
        for combination in itertools.product(*(values for _, values in self.study.axes)):
            yield {**self.study.settings, **dict(zip((k for k, _ in self.study.axes), combination))}

    def for_cell(self, cell: Cell):
        """The study one trial runs: its cell's further axes' values set, no axes left."""
        return dataclasses.replace(study_overrides.with_settings(self.study, dict(cell.extra)), axes=())

    # -- the budget as run --------------------------------------------------------
    @property
    def smoke(self) -> bool:
        """A named budget other than the full one: verdicts from it say nothing about the science."""
        return self.study.budget_name != FULL_BUDGET

    def full_generations_for(self, population: int) -> int | None:
        """The study file's full budget for this population; None when it has none (a population added on the command line)."""
        try:
            return (self.study.full_budget or self.study.budget).generations_for(population)
        except StudyError:
            return None

    def short_of_full(self, cell: Cell) -> bool:
        """Does this cell run fewer generations (or inner iterations) than the study file's full budget?"""
        full_generations = self.full_generations_for(cell.population)
        fewer = full_generations is not None and cell.generations < full_generations
        return fewer or self.study.budget.inner_iters < (self.study.full_budget or self.study.budget).inner_iters

    # -- the grid -----------------------------------------------------------------
    def _extras(self, inner_only: bool = False) -> list[tuple[tuple[str, Any], ...]]:
        """Each combination of the further axes as a trial's `extra` (sorted by key); scans cross only the inner loop's."""
        axes = sorted((k, v) for k, v in self.study.axes if self.study.table.by_key[k].inner or not inner_only)
        return [tuple(zip((k for k, _ in axes), values)) for values in itertools.product(*(v for _, v in axes))]

    def cells(self) -> list[Cell]:
        """One per ES trial: population × optimize_params × seed × the further axes, with its generation budget;
        then each stage's seeds, in the groups it added them to."""
        return [cell for stage in range(1, len(self.study.stages) + 2) for cell in self.stage_cells(stage)]

    def groups(self) -> list[tuple]:
        """The grid's groups (`Cell.group`: a cell less its seed: one arm of a comparison), in the grid's order."""
        return [
            (p, params, extra) for p in self.study.populations for params in self.study.optimize_params for extra in self._extras()
        ]

    def stage_cells(self, stage: int) -> list[Cell]:
        """The ES cells a stage runs: stage 1 the grid's seeds in every group, stage k ≥ 2 its seeds in its groups."""
        seeds = self.stage_seeds(stage)
        added = None if stage == 1 else self.study.stages[stage - 2].groups
        return [
            Cell(p, params, s, self.study.budget.generations_for(p), extra=extra)
            for p in self.study.populations
            for params in self.study.optimize_params
            for s in seeds
            for extra in self._extras()
            if added is None or (p, params, extra) in added
        ]

    def evaluations_of(self, population: int) -> int:
        """A run's inner-loop evaluations at this population: its generations × its population."""
        return self.study.budget.generations_for(population) * population

    def equal_evaluations(self, population: int) -> tuple[int, ...]:
        """The smaller budgets a run at this population is also scored at ([decide] equal_budget = ["population"]):
        each other population's evaluations that are fewer than its own, smallest first."""
        if "population" not in self.study.decide.equal_budget:
            return ()
        mine = self.evaluations_of(population)
        return tuple(sorted({e for p in self.study.populations if (e := self.evaluations_of(p)) < mine}))

    def stage_seeds(self, stage: int) -> tuple[int, ...]:
        return self.study.seeds if stage == 1 else self.study.stages[stage - 2].seeds

    @property
    def all_seeds(self) -> tuple[int, ...]:
        """The grid's seeds, then every stage's."""
        return self.study.seeds + tuple(s for stage in self.study.stages for s in stage.seeds)

    def scan_cells(self) -> list[Cell]:
        """One scan trial per optimize_params × seed × the further axes the inner loop reads, when the study scans."""
        passes = 1 + self.study.budget.final_eval_seeds  # the evaluation seeds, then each final re-evaluation seed
        return [
            Cell(self.study.scan ** len(params), params, s, passes, scan=True, extra=extra)
            for params in (self.study.optimize_params if self.study.scan else ())
            for s in self.study.seeds
            for extra in self._extras(inner_only=True)
        ]

    def trial_cells(self) -> list[Cell]:
        """Every trial of a run: the ES grid, then the scans."""
        return self.cells() + self.scan_cells()

    def cell_of(self, config) -> Cell:
        """The trial cell a Tune config (or a record) names."""
        cell = next((c for c in self.trial_cells() if c.key == Cell.key_of(config)), None)
        if cell is None:
            raise StudyError(f"no trial of study {self.study.name!r} has the cell {Cell.key_of(config)}")
        return cell

