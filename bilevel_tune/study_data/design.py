"""A study compiled once into its design: the trials its grid expands into — cells with their keys, stage by stage,
and its scans —, the groups its comparisons read, the budget per population, the decision plan's settings, the
labels a reader sees and the world's portrait. No settings are read here but these; no Ray, no pandas.

    design = compile_design(study)
    design.cells, design.stage_cells(2), design.groups, design.evaluations_of(16), design.decide

The `Study` is its typed settings; what a study *runs* and *decides on* is read from its design, which holds no
reference back to it. verdicts/ and report/ take a design (and a run's store), never a study. The cells it makes,
`Cell` and `Stage`, are the run folder's identities (`run_folder`: a record's cell key, a trial's name).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from bilevel_tune.base.knobs import StudyError
from bilevel_tune.base.sections import Budget, DecideSettings, FinalSettings, SummarySettings
from bilevel_tune.study_data import study_overrides
from bilevel_tune.study_data.run_folder import Cell, Stage

FULL_BUDGET = "full"  # the name of a study file's [budget]


@dataclass(frozen=True, eq=False)
class Design:
    """What a study runs and decides on, compiled once (`compile_design`)."""

    name: str
    description: str
    inner: str
    world_kind: str
    populations: tuple[int, ...]
    optimize_params: tuple[tuple[str, ...], ...]
    seeds: tuple[int, ...]
    stages: tuple[Stage, ...]
    axes: tuple[tuple[str, tuple], ...]
    scan: int | None
    budget: Budget
    full_budget: Budget
    budget_name: str
    budget_label: str  # the budget as run, e.g. 'quick, outer_iters=4'
    overrides_label: str  # the command line's other changes
    decide: DecideSettings
    final: FinalSettings
    summary: SummarySettings
    ceiling: float | None
    regime: str | None
    optimizer: str  # [outer] optimizer: a trial's unless an axis sets it
    table: Any  # its world's settings table (`settings.SettingsTable`): rules, sections, mechanisms' names
    rule_specs: tuple  # each rule mapped onto the range this study searches it over
    settings: dict  # every setting as run, by key (the report's "Settings (as run)")
    fixed_rules: dict  # every rule's fixed value, physical (the searched ones are the search's)
    _inner_axes: tuple[str, ...] = ()  # the axes the inner loop reads: a scan crosses only these

    # -- labels -------------------------------------------------------------------------------------------------
    @property
    def mechanisms(self):
        """How its world names a mechanism: `label(params)` 1-D, 2-D floor+risk; `name(params)` 1d, 2d-floor-risk."""
        return self.table.mechanisms

    @cached_property
    def rule_specs_by_name(self) -> dict[str, Any]:
        return {spec.name: spec for spec in self.rule_specs}

    @property
    def summary_diagnostics(self) -> tuple[str, ...] | None:
        return self.table.summary_diagnostics

    @property
    def scan_terms(self) -> tuple[str, ...]:
        return self.table.scan_terms

    @property
    def optimizers(self) -> tuple[str, ...]:
        """The outer optimisers its trials run: [outer] optimizer, or that axis's values."""
        return dict(self.axes).get("outer.optimizer", (self.optimizer,))

    def optimizer_of(self, cell: Cell) -> str:
        """The outer optimiser a cell runs: its axis's value, else the study's."""
        return dict(cell.extra).get("outer.optimizer", self.optimizer)

    # -- the grid -----------------------------------------------------------------------------------------------
    def _extras(self, inner_only: bool = False) -> list[tuple[tuple[str, Any], ...]]:
        """Each combination of the further axes as a trial's `extra` (sorted by key); scans cross only the inner loop's."""
        axes = sorted((k, v) for k, v in self.axes if k in self._inner_axes or not inner_only)
        return [tuple(zip((k for k, _ in axes), values)) for values in itertools.product(*(v for _, v in axes))]

    @cached_property
    def groups(self) -> tuple[tuple, ...]:
        """The grid's groups (`Cell.group`: a cell less its seed: one arm of a comparison), in the grid's order."""
        return tuple(
            (p, params, extra) for p in self.populations for params in self.optimize_params for extra in self._extras()
        )

    def stage_seeds(self, stage: int) -> tuple[int, ...]:
        return self.seeds if stage == 1 else self.stages[stage - 2].seeds

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

    @cached_property
    def cells(self) -> tuple[Cell, ...]:
        """One per ES trial: population × optimize_params × seed × the further axes, with its generation budget;
        then each stage's seeds, in the groups it added them to."""
        return tuple(cell for stage in range(1, len(self.stages) + 2) for cell in self.stage_cells(stage))

    @cached_property
    def scan_cells(self) -> tuple[Cell, ...]:
        """One scan trial per optimize_params × seed × the further axes the inner loop reads, when the study scans."""
        passes = 1 + self.budget.final_eval_seeds  # the evaluation seeds, then each final re-evaluation seed
        return tuple(
            Cell(self.scan ** len(params), params, s, passes, scan=True, extra=extra)
            for params in (self.optimize_params if self.scan else ())
            for s in self.seeds
            for extra in self._extras(inner_only=True)
        )

    @property
    def trial_cells(self) -> tuple[Cell, ...]:
        """Every trial of a run: the ES grid, then the scans."""
        return self.cells + self.scan_cells

    @property
    def all_seeds(self) -> tuple[int, ...]:
        """The grid's seeds, then every stage's."""
        return self.seeds + tuple(s for stage in self.stages for s in stage.seeds)

    @cached_property
    def _by_key(self) -> dict[tuple, Cell]:
        return {c.key: c for c in self.trial_cells}

    def cell_of(self, config) -> Cell:
        """The trial cell a Tune config (or a record) names."""
        cell = self._by_key.get(Cell.key_of(config))
        if cell is None:
            raise StudyError(f"no trial of study {self.name!r} has the cell {Cell.key_of(config)}")
        return cell

    # -- the budget ---------------------------------------------------------------------------------------------
    @property
    def smoke(self) -> bool:
        """A named budget other than the full one: verdicts from it say nothing about the science."""
        return self.budget_name != FULL_BUDGET

    def evaluations_of(self, population: int) -> int:
        """A run's inner-loop evaluations at this population: its generations × its population."""
        return self.budget.generations_for(population) * population

    def equal_evaluations(self, population: int) -> tuple[int, ...]:
        """The smaller budgets a run at this population is also scored at ([decide] equal_budget = ["population"])."""
        return equal_evaluations(self, population)

    def full_generations_for(self, population: int) -> int | None:
        """The study file's full budget for this population; None when it has none (a population added on the command line)."""
        try:
            return self.full_budget.generations_for(population)
        except StudyError:
            return None

    def short_of_full(self, cell: Cell) -> bool:
        """Does this cell run fewer generations (or inner iterations) than the study file's full budget?"""
        full_generations = self.full_generations_for(cell.population)
        fewer = full_generations is not None and cell.generations < full_generations
        return fewer or self.budget.inner_iters < self.full_budget.inner_iters


def compile_design(study) -> Design:
    """The design of a `definition.Study`: its grid expanded, its labels and plan's settings read once."""
    return Design(
        name=study.name,
        description=study.description,
        inner=study.inner,
        world_kind=study.world_kind,
        populations=study.populations,
        optimize_params=study.optimize_params,
        seeds=study.seeds,
        stages=study.stages,
        axes=study.axes,
        scan=study.scan,
        budget=study.budget,
        full_budget=study.full_budget or study.budget,
        budget_name=study.budget_name,
        budget_label=study_overrides.budget_label(study),
        overrides_label=study_overrides.overrides_label(study),
        decide=study.decide,
        final=study.final,
        summary=study.summary,
        ceiling=study.ceiling,
        regime=study.regime,
        optimizer=study.outer.optimizer,
        table=study.table,
        rule_specs=study.rule_specs,
        settings=study.settings,
        fixed_rules=study.fixed_rules,
        _inner_axes=tuple(k for k, _ in study.axes if study.table.by_key[k].inner),
    )


def equal_evaluations(study, population: int) -> tuple[int, ...]:
    """The smaller budgets a run at this population is also scored at ([decide] equal_budget = ["population"]): each
    other population's evaluations that are fewer than its own, smallest first. `study`: a Study or its Design."""
    if "population" not in study.decide.equal_budget:
        return ()
    evaluations = {p: study.budget.generations_for(p) * p for p in study.populations}
    return tuple(sorted({e for e in evaluations.values() if e < evaluations[population]}))
