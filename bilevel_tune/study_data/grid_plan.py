"""A study's grid and stage plan: the trials a study expands into — its cells, stage by stage, and its scans — and
its budget as run against the study file's. No settings are read here but the grid's own, the budget and
`[decide] equal_budget` (the smaller budgets a cell is also scored at).

`GridPlan` is mixed into `definition.Study` (a study is its definition and its plan: `study.cells()`); it reads the
study's grid fields — `populations`, `optimize_params`, `seeds`, `axes` (the further axes), `stages`, `scan`,
`budget`, `budget_name`, `full_budget` and `decide` — and, for the further axes' values, its settings (`settings`, `outer`);
nothing else. No loops, no Ray.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Iterable, Self

from bilevel_tune.study_data import study_overrides
from bilevel_tune.study_data.run_folder import Cell
from bilevel_tune.study_data.study_checks import StudyError

FULL_BUDGET = "full"  # the name of a study file's [budget]


class GridPlan:
    """The trials of a study (`definition.Study`'s grid fields expanded), and its budget as run."""

    # What it reads of the study it is mixed into, declared here for its readers and type checkers (annotations of
    # a plain base class: `Study`'s dataclass fields are its own, these add none).
    name: str
    populations: tuple[int, ...]
    optimize_params: tuple[tuple[str, ...], ...]
    seeds: tuple[int, ...]
    axes: tuple[tuple[str, tuple], ...]  # the further grid axes, (setting key, values)
    stages: tuple  # run_folder.Stage, one a stage after the first
    scan: int | None
    budget: Any  # base.sections.Budget as run
    budget_name: str
    full_budget: Any  # the study file's Budget
    decide: Any  # base.sections.DecideSettings
    outer: Any  # base.sections.OuterSettings
    settings: dict[str, Any]  # every setting as run, by key (`Study.settings`)
    table: Any  # its world's settings.SettingsTable (`Study.table`)

    @property
    def optimizers(self) -> tuple[str, ...]:
        """The outer optimisers its trials run: [outer] optimizer, or that axis's values."""
        return dict(self.axes).get("outer.optimizer", (self.outer.optimizer,))

    def trial_values(self) -> Iterable[dict[str, Any]]:
        """The settings of each combination of the further grid axes."""
        for combination in itertools.product(*(values for _, values in self.axes)):
            yield {**self.settings, **dict(zip((k for k, _ in self.axes), combination))}

    def for_cell(self, cell: Cell) -> Self:
        """The study one trial runs: its cell's further axes' values set, no axes left."""
        return dataclasses.replace(study_overrides.with_settings(self, dict(cell.extra)), axes=())

    # -- the budget as run --------------------------------------------------------
    @property
    def smoke(self) -> bool:
        """A named budget other than the full one: verdicts from it say nothing about the science."""
        return self.budget_name != FULL_BUDGET

    def full_generations_for(self, population: int) -> int | None:
        """The study file's full budget for this population; None when it has none (a population added on the command line)."""
        try:
            return (self.full_budget or self.budget).generations_for(population)
        except StudyError:
            return None

    def short_of_full(self, cell: Cell) -> bool:
        """Does this cell run fewer generations (or inner iterations) than the study file's full budget?"""
        full_generations = self.full_generations_for(cell.population)
        fewer = full_generations is not None and cell.generations < full_generations
        return fewer or self.budget.inner_iters < (self.full_budget or self.budget).inner_iters

    # -- the grid -----------------------------------------------------------------
    def _extras(self, inner_only: bool = False) -> list[tuple[tuple[str, Any], ...]]:
        """Each combination of the further axes as a trial's `extra` (sorted by key); scans cross only the inner loop's."""
        axes = sorted((k, v) for k, v in self.axes if self.table.by_key[k].inner or not inner_only)
        return [tuple(zip((k for k, _ in axes), values)) for values in itertools.product(*(v for _, v in axes))]

    def cells(self) -> list[Cell]:
        """One per ES trial: population × optimize_params × seed × the further axes, with its generation budget;
        then each stage's seeds, in the groups it added them to."""
        return [cell for stage in range(1, len(self.stages) + 2) for cell in self.stage_cells(stage)]

    def groups(self) -> list[tuple]:
        """The grid's groups (`Cell.group`: a cell less its seed: one arm of a comparison), in the grid's order."""
        return [
            (p, params, extra) for p in self.populations for params in self.optimize_params for extra in self._extras()
        ]

    def stage_cells(self, stage: int) -> list[Cell]:
        """The ES cells a stage runs: stage 1 the grid's seeds in every group, stage k ≥ 2 its seeds in its groups."""
        seeds = self.stage_seeds(stage)
        added = None if stage == 1 else self.stages[stage - 2].groups
        return [
            Cell(p, params, s, self.budget.generations_for(p), extra=extra)
            for p in self.populations
            for params in self.optimize_params
            for s in seeds
            for extra in self._extras()
            if added is None or (p, params, extra) in added
        ]

    def evaluations_of(self, population: int) -> int:
        """A run's inner-loop evaluations at this population: its generations × its population."""
        return self.budget.generations_for(population) * population

    def equal_evaluations(self, population: int) -> tuple[int, ...]:
        """The smaller budgets a run at this population is also scored at ([decide] equal_budget = ["population"]):
        each other population's evaluations that are fewer than its own, smallest first."""
        if "population" not in self.decide.equal_budget:
            return ()
        mine = self.evaluations_of(population)
        return tuple(sorted({e for p in self.populations if (e := self.evaluations_of(p)) < mine}))

    def stage_seeds(self, stage: int) -> tuple[int, ...]:
        return self.seeds if stage == 1 else self.stages[stage - 2].seeds

    @property
    def all_seeds(self) -> tuple[int, ...]:
        """The grid's seeds, then every stage's."""
        return self.seeds + tuple(s for stage in self.stages for s in stage.seeds)

    def scan_cells(self) -> list[Cell]:
        """One scan trial per optimize_params × seed × the further axes the inner loop reads, when the study scans."""
        passes = 1 + self.budget.final_eval_seeds  # the evaluation seeds, then each final re-evaluation seed
        return [
            Cell(self.scan ** len(params), params, s, passes, scan=True, extra=extra)
            for params in (self.optimize_params if self.scan else ())
            for s in self.seeds
            for extra in self._extras(inner_only=True)
        ]

    def trial_cells(self) -> list[Cell]:
        """Every trial of a run: the ES grid, then the scans."""
        return self.cells() + self.scan_cells()

    def cell_of(self, config) -> Cell:
        """The trial cell a Tune config (or a record) names."""
        cell = next((c for c in self.trial_cells() if c.key == Cell.key_of(config)), None)
        if cell is None:
            raise StudyError(f"no trial of study {self.name!r} has the cell {Cell.key_of(config)}")
        return cell

