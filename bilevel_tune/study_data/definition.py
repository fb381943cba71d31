"""A study: its grid, every setting as run (as typed sections), and how it came to be. No loops, no Ray.

A study file is read by `study_file`, a record (study.json, a trial's
config, with the migrations of older releases) by `study_record`, a
command line's changes applied by `study_overrides`, every value checked
where it enters by `study_checks`; a `Study` is their frozen result, and
expands into the trial cells of its grid.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from bilevel_tune.base.sections import (
    AppoSettings,
    BOSettings,
    Budget,
    CMASettings,
    DecideSettings,
    ESSettings,
    FinalSettings,
    NetworkSettings,
    OuterSettings,
    SummarySettings,
)
from bilevel_tune.study_data import study_file, study_overrides
from bilevel_tune.study_data.run_folder import Cell, Stage, json_safe
from bilevel_tune.study_data.settings import SettingsTable, section_value, settings_table
from bilevel_tune.study_data.study_checks import StudyError, check_study
from bilevel_tune.study_data.study_file import available_studies
from bilevel_tune.study_data.study_record import current_record, frozen
from bilevel_tune.worlds import DEFAULT_WORLD

__all__ = ["Budget", "Study", "StudyError", "available_studies", "load_study"]

FULL_BUDGET = "full"  # the name of a study file's [budget]


@dataclass(frozen=True)
class Study:
    """A resolved study: the grid, every section as run (typed: `study.appo.lr`), and how it came to be."""

    name: str
    populations: tuple[int, ...]
    optimize_params: tuple[tuple[str, ...], ...]
    seeds: tuple[int, ...]
    budget: Budget  # [budget] as run, with its generations
    world: Any = None  # [world]: its world's settings class; None: the world's defaults
    network: NetworkSettings = dataclasses.field(default_factory=NetworkSettings)
    appo: AppoSettings = dataclasses.field(default_factory=AppoSettings)
    outer: OuterSettings = dataclasses.field(default_factory=OuterSettings)
    es: ESSettings = dataclasses.field(default_factory=ESSettings)
    cma: CMASettings = dataclasses.field(default_factory=CMASettings)
    bo: BOSettings = dataclasses.field(default_factory=BOSettings)
    objective: Any = None  # [objective]: its world's objective class; None: the world's defaults
    rules: tuple[tuple[str, float], ...] = ()  # every rule's fixed value, physical; a rule left out: its default
    search: tuple[tuple[str, tuple[float, float]], ...] = ()  # every rule's search range; left out: its default
    summary: SummarySettings = dataclasses.field(default_factory=SummarySettings)
    decide: DecideSettings = dataclasses.field(default_factory=DecideSettings)
    final: FinalSettings = dataclasses.field(default_factory=FinalSettings)
    axes: tuple[tuple[str, tuple], ...] = ()  # settings crossed as further grid axes, each with its values
    description: str = ""
    inner: str = "appo"
    budget_name: str = FULL_BUDGET
    budgets: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # named budgets: (name, settings it changes)
    full_budget: Budget | None = None  # the file's [budget]: what "a shorter run" is measured against
    overrides: tuple[tuple[str, Any], ...] = ()  # what the command line changed, in order
    scan: int | None = None  # grid points per searched rule of the rules scan (bilevel_tune.core.scan); None: no scan
    source: str = ""
    world_kind: str = DEFAULT_WORLD  # the world it runs on: a built-in name or "module:Class"
    stages: tuple[Stage, ...] = ()  # seeds added after the grid's, stage by stage, to undecided comparisons' cells

    def __post_init__(self):
        """Its world's sections and rules where not given: every default is the world's own."""
        table = self.table
        defaults = {
            "world": self.world if self.world is not None else table.section_classes["world"](),
            "objective": self.objective if self.objective is not None else table.section_classes["objective"](),
            "rules": tuple((r.name, dict(self.rules).get(r.name, r.default)) for r in table.rule_specs),
            "search": tuple((r.name, tuple(dict(self.search).get(r.name, (r.low, r.high)))) for r in table.rule_specs),
        }
        for name, value in defaults.items():
            object.__setattr__(self, name, value)

    # -- where a study comes from, and its record ---------------------------
    @classmethod
    def from_toml(cls, path: Path) -> "Study":
        return cls.parse(study_file.read_toml(path), source=str(path))

    @classmethod
    def parse(cls, data: Mapping[str, Any], source: str = "") -> "Study":
        study = cls(**study_file.study_fields(data, source))
        return dataclasses.replace(study, full_budget=study.budget).validate()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Study":
        """From study.json or a trial's config (`to_dict`); an earlier release's record is brought up to date first."""
        fields = current_record(data)
        table = settings_table(fields.setdefault("world_kind", DEFAULT_WORLD))  # a record before worlds: the default
        for name, section in table.section_classes.items():  # a setting added since the record was made: its default
            fields[name] = section(**frozen_values(fields.get(name, {})))
        fields["stages"] = tuple(Stage.from_dict(stage) for stage in fields.get("stages", ()))
        fields["rules"], fields["search"] = (
            tuple(map(tuple, fields["rules"])),
            tuple(map(tuple, fields.get("search", ()))),
        )
        full = fields.get("full_budget")
        return cls(**{**fields, "full_budget": Budget(**frozen_values(full)) if full is not None else None})

    def to_dict(self) -> dict[str, Any]:
        return json_safe(dataclasses.asdict(self))

    def with_overrides(self, **changes) -> "Study":
        """The study as a command line changes it: see `study_overrides.overridden` (--population, --set, --grid, …)."""
        return study_overrides.overridden(self, **changes)

    def with_budget(self, name: str) -> "Study":
        return study_overrides.with_budget(self, name)

    def validate(self) -> "Study":
        return check_study(self)

    # -- settings, as run ---------------------------------------------------------------
    @property
    def table(self) -> SettingsTable:
        """Its world's settings: which keys it has, their ranges and sections."""
        return settings_table(self.world_kind)

    @property
    def settings(self) -> dict[str, Any]:
        """Every setting as run, by key; a further axis's setting holds its file (or --set) value, each trial its own."""
        return {s.key: section_value(self, s) for s in self.table.settings}

    @property
    def ceiling(self) -> float | None:
        """The objective value its summary looks for: [summary] ceiling, else its world's (None: no ceiling)."""
        return self.summary.ceiling if self.summary.ceiling is not None else self.table.ceiling

    @property
    def regime(self) -> str | None:
        """Its world's one line on the regime these settings make (fresh water: capped at 1/4 or not); None when
        the world has no such line."""
        return self.table.regime(self.world, self.fixed_rules) if self.table.regime else None

    @property
    def mechanisms(self):
        """How its world names a mechanism (its searched rules): `mechanisms.label(params)` 1-D, 2-D floor+risk;
        `mechanisms.name(params)` 1d, 2d-floor-risk."""
        return self.table.mechanisms

    @property
    def rule_specs(self) -> tuple:
        """Its world's rules, each mapping u in [0, 1] onto the range this study searches it over ([search])."""
        ranges = dict(self.search)
        return tuple(
            spec if tuple(ranges.get(spec.name, ())) == (spec.low, spec.high) else spec.with_range(*ranges[spec.name])
            for spec in self.table.rule_specs
        )

    @property
    def rule_specs_by_name(self) -> dict[str, Any]:
        """`rule_specs` by name."""
        return {spec.name: spec for spec in self.rule_specs}

    @property
    def optimizers(self) -> tuple[str, ...]:
        """The outer optimisers its trials run: [outer] optimizer, or that axis's values."""
        return dict(self.axes).get("outer.optimizer", (self.outer.optimizer,))

    def get(self, key: str) -> Any:
        return section_value(self, self.table.setting(key))

    @property
    def fixed_rules(self) -> dict[str, float]:
        """Every rule's fixed value, physical (the searched ones are the search's)."""
        return dict(self.rules)

    def trial_values(self) -> Iterable[dict[str, Any]]:
        """The settings of each combination of the further grid axes."""
        for combination in itertools.product(*(values for _, values in self.axes)):
            yield {**self.settings, **dict(zip((k for k, _ in self.axes), combination))}

    def for_cell(self, cell: Cell) -> "Study":
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


def frozen_values(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A section's fields from JSON: its lists as the tuples the section holds."""
    return {k: frozen(v) for k, v in fields.items()}


def load_study(name_or_path: str, directory: Path | None = None) -> Study:
    """A study by name (a built-in one, shipped in the package, or one in `directory`) or by path."""
    path, label = study_file.study_path(name_or_path, directory)
    study = Study.from_toml(path)
    return dataclasses.replace(study, source=label) if label else study
