"""A study's definition: its grid, every setting as run (as typed sections), and how it came to be. No loops, no Ray.

A study file is read by `study_file`, a record (study.json, a trial's
config, with the migrations of older releases) by `study_record`, a
command line's changes applied by `study_overrides`, every value checked
where it enters by `study_checks`; a `Study` is their frozen result, and
compiles into the design of what it runs and decides on (`design.compile_design`: its cells, stage by stage).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from bilevel_tune.base.sections import (
    AppoSettings,
    BOSettings,
    Budget,
    CMASettings,
    DecideSettings,
    ESSettings,
    FinalSettings,
    NetworkSettings,
    OptunaSettings,
    OuterSettings,
    RuntimeSettings,
    SummarySettings,
)
from bilevel_tune.study_data import study_file, study_overrides, world_portrait
from bilevel_tune.study_data.design import FULL_BUDGET
from bilevel_tune.study_data.run_folder import Stage, json_safe
from bilevel_tune.study_data.settings import SettingsTable, remember_portrait, section_value, settings_table
from bilevel_tune.study_data.study_checks import StudyError, check_study
from bilevel_tune.study_data.study_file import available_studies
from bilevel_tune.study_data.study_record import current_record, frozen
from bilevel_tune.worlds import DEFAULT_WORLD

__all__ = ["Budget", "Study", "StudyError", "available_studies", "load_study"]

@dataclass(frozen=True)
class Study:
    """A resolved study: its typed settings — the grid's fields, every section as run (`study.appo.lr`) — and how
    it came to be. What it runs and decides on is its design's (`design.compile_design`: cells, groups, budgets)."""

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
    optuna: OptunaSettings = dataclasses.field(default_factory=OptunaSettings)
    objective: Any = None  # [objective]: its world's objective class; None: the world's defaults
    rules: tuple[tuple[str, float], ...] = ()  # every rule's fixed value, physical; a rule left out: its default
    search: tuple[tuple[str, tuple[float, float]], ...] = ()  # every rule's search range; left out: its default
    summary: SummarySettings = dataclasses.field(default_factory=SummarySettings)
    decide: DecideSettings = dataclasses.field(default_factory=DecideSettings)
    final: FinalSettings = dataclasses.field(default_factory=FinalSettings)
    runtime: RuntimeSettings = dataclasses.field(default_factory=RuntimeSettings)
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
    streams: str = "lake"  # its lakes' random draws (`InnerLoopConfig.streams`); a run from before lakes: "block"

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

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Study":
        """From a run folder's study.json: its world read from the folder's portrait where the world's module does
        not import here (a shipped folder read without the package that held it)."""
        remember_portrait(record)
        return cls.from_dict(record["study"])

    def to_dict(self) -> dict[str, Any]:
        return json_safe(dataclasses.asdict(self))

    def world_portrait(self) -> dict[str, Any]:
        """What a run folder keeps of its world (`world_portrait`): enough to read the folder without it."""
        return json_safe(world_portrait.portrait(self.table, self.regime))

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

    def get(self, key: str) -> Any:
        return section_value(self, self.table.setting(key))

    @property
    def fixed_rules(self) -> dict[str, float]:
        """Every rule's fixed value, physical (the searched ones are the search's)."""
        return dict(self.rules)


def frozen_values(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A section's fields from JSON: its lists as the tuples the section holds."""
    return {k: frozen(v) for k, v in fields.items()}


def load_study(name_or_path: str, directory: Path | None = None) -> Study:
    """A study by name (a built-in one, shipped in the package, or one in `directory`) or by path."""
    path, label = study_file.study_path(name_or_path, directory)
    study = Study.from_toml(path)
    return dataclasses.replace(study, source=label) if label else study
