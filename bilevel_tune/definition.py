"""Study definitions: TOML data validated into a frozen, typed definition.

A study file (bilevel_tune/studies/weekend.toml, docs/study.md) holds every
setting of the study in the sections `settings.SETTINGS` declares —
[world], [network], [appo], [es], [objective], [rules], [budget],
[summary] — the grid ([grid]: population × optimize_params × seed, and any
setting as a further axis), named budgets such as `quick` (which may
override any setting: `world.horizon = 30`), and an optional [scan].
Unknown keys fail with a "did you mean"; every error is one line naming the
file, the key, the bad value and what is allowed. No loops, no Ray.
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from bilevel_tune.es import ESConfig
from bilevel_tune.hints import unknown_name
from bilevel_tune.inner import InnerLoopError, check_loop_spec
from bilevel_tune.run_folder import Cell, json_safe
from bilevel_tune.scan import MIN_POINTS
from bilevel_tune.sections import BudgetSettings
from bilevel_tune.settings import (
    BY_KEY,
    DEFAULTS,
    LEGACY_BUDGET_KEYS,
    SECTIONS,
    SettingError,
    plain,
    setting,
)
from bilevel_tune.world.rules import RULE_NAMES, check_optimize_params

STUDIES_PACKAGE = "bilevel_tune.studies"  # the built-in studies ship inside the package
FULL_BUDGET = "full"  # the name of a study file's [budget]
BUDGET_OVERRIDES = ("outer_iters", "inner_iters")
GRID_AXES = ("population", "optimize_params", "seed")
GRID_OVERRIDE = "grid "  # prefix of a --grid change in `overrides`


class StudyError(ValueError):
    """A bad study file or override; the message is the one line the user sees."""


def _unknown(keys, allowed, where: str) -> None:
    for key in keys:
        if key not in allowed:
            raise StudyError(unknown_name("key", key, allowed, where))


def _int(value, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise StudyError(f"{where}={value!r} must be an integer ≥ {minimum}")
    return value


def check_population(value, where: str = "population") -> int:
    value = _int(value, where, 1)
    if value > 1 and value % 2:
        raise StudyError(f"{where}={value} must be 1 or even (antithetic pairs)")
    return value


def check_inner(value, where: str) -> str:
    try:
        return check_loop_spec(value)
    except InnerLoopError as err:
        raise StudyError(f"{where}={err}") from None


def check_scan(value, where: str = "--scan") -> int:
    """Grid points per searched rule: an integer ≥ 2 (both ends of every rule's range)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_POINTS:
        raise StudyError(f"{where}={value!r} must be an integer ≥ {MIN_POINTS} (grid points per searched rule)")
    return value


def _checked(key: str, value: Any, where: str, text: bool = False) -> tuple[str, Any]:
    """(the setting's full key, its value typed and in range); StudyError otherwise. `text`: a command line's value."""
    try:
        spec = setting(key, where)
        return spec.key, spec.parse(value, where) if text else spec.check(value, where)
    except SettingError as err:
        raise StudyError(str(err)) from None


def _dotted(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML's nested tables as dotted keys: {"world": {"horizon": 30}} → {"world.horizon": 30}."""
    out = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping) and full.split(".")[0] in SECTIONS and full != "budget.generations":
            out.update(_dotted(value, full + "."))
        else:
            out[full] = value
    return out


@dataclass(frozen=True)
class Budget(BudgetSettings):
    """How much of the study a run does: [budget]'s settings, and `generations`: one count, or (population, count) pairs."""

    generations: int | tuple[tuple[int, int], ...] = dataclasses.field(kw_only=True)

    @staticmethod
    def parse_generations(value, where: str):
        if isinstance(value, Mapping):
            pairs = []
            for key, count in value.items():
                try:
                    population = int(key)
                except ValueError:
                    raise StudyError(f"{where} key {key!r} must be a population (an integer)") from None
                pairs.append((check_population(population, f"{where} key"), _int(count, f"{where}.{key}", 1)))
            return tuple(sorted(pairs))
        return _int(value, where, 1)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Budget":
        """From study.json (before 0.2 a budget also held horizon, num_farms and hidden: now settings)."""
        data = {k: v for k, v in data.items() if k not in LEGACY_BUDGET_KEYS}
        if not isinstance(data["generations"], int):
            data["generations"] = tuple(tuple(pair) for pair in data["generations"])
        return cls(**data)

    def generations_for(self, population: int) -> int:
        if isinstance(self.generations, int):
            return self.generations
        table = dict(self.generations)
        if population not in table:
            raise StudyError(
                f"budget.generations has no entry for population {population}; add one or give one integer for all cells"
            )
        return table[population]


def _budget_section(data: Mapping[str, Any], where: str) -> tuple[Any, dict[str, Any]]:
    """([budget]'s or a named budget's generations (None if absent), its other settings as dotted keys).

    Its own keys are budget settings; before 0.2 it also held the world's and network's
    (horizon, num_farms, hidden), still accepted; a named budget may set any setting.
    """
    generations, values = None, {}
    for key, value in _dotted(data).items():
        if key == "generations":
            generations = Budget.parse_generations(value, f"{where}.generations")
            continue
        full = LEGACY_BUDGET_KEYS.get(key, key if "." in key else f"budget.{key}")
        if full not in BY_KEY:
            section, _, name = full.partition(".")
            allowed = ("generations", *(k.partition(".")[2] for k in BY_KEY if k.startswith("budget.")))
            raise StudyError(unknown_name("key", name if section == "budget" else full, allowed, where))
        values[full] = _checked(full, value, where)[1]
    return generations, values


@dataclass(frozen=True)
class Study:
    """A resolved study: the grid, every setting as run, and how it came to be."""

    name: str
    populations: tuple[int, ...]
    optimize_params: tuple[tuple[str, ...], ...]
    seeds: tuple[int, ...]
    generations: int | tuple[tuple[int, int], ...]  # the budget's generations as run
    values: tuple[tuple[str, Any], ...]  # every setting as run, in `settings.SETTINGS` order
    axes: tuple[tuple[str, tuple], ...] = ()  # settings crossed as further grid axes, each with its values
    description: str = ""
    inner: str = "appo"
    budget_name: str = FULL_BUDGET
    budgets: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # named budgets: (name, settings it changes)
    full_budget: Budget | None = None  # the file's [budget]: what "a shorter run" is measured against
    overrides: tuple[tuple[str, Any], ...] = ()  # what the command line changed, in order
    scan: int | None = None  # grid points per searched rule of the rules scan (bilevel_tune.scan); None: no scan
    source: str = ""

    TOP_KEYS = (
        "name",
        "description",
        "inner",
        "grid",
        "budget",
        "budgets",
        "scan",
        *(s for s in SECTIONS if s != "budget"),
    )

    # -- loading -----------------------------------------------------------
    @classmethod
    def from_toml(cls, path: Path) -> "Study":
        try:
            data = tomllib.loads(Path(path).read_text())
        except tomllib.TOMLDecodeError as err:
            raise StudyError(f"malformed TOML in {path}: {err}") from None
        except OSError as err:
            raise StudyError(f"cannot read study file {path}: {err.strerror}") from None
        return cls.parse(data, source=str(path))

    @classmethod
    def parse(cls, data: Mapping[str, Any], source: str = "") -> "Study":
        file = Path(source).name if source else "the study file"
        _unknown(data, cls.TOP_KEYS, file)
        name = data.get("name")
        if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
            raise StudyError(f"{file}: name={name!r} must be a non-empty string of letters, digits, '-' and '_'")
        values = dict(DEFAULTS)
        for section in SECTIONS:
            if section == "budget":
                continue
            table = data.get(section, {})
            if not isinstance(table, Mapping):
                raise StudyError(f"{file}: [{section}] must be a table")
            for key, value in table.items():
                if f"{section}.{key}" not in BY_KEY:
                    cls._unknown_key(file, section, key)
                values[f"{section}.{key}"] = _checked(f"{section}.{key}", value, f"{file} [{section}]")[1]
        generations, budget_values = _budget_section(data.get("budget", {}), f"{file} [budget]")
        if generations is None:
            raise StudyError(f"{file} [budget] needs 'generations' (an integer, or a table keyed by population)")
        values.update(budget_values)
        budgets = []
        for bname, table in data.get("budgets", {}).items():
            gens, changes = _budget_section(table, f"{file} [budgets.{bname}]")
            if gens is not None:
                changes = {"budget.generations": gens, **changes}
            budgets.append((bname, tuple(changes.items())))
        grid = _dotted(data.get("grid", {}))
        _unknown([k for k in grid if k not in BY_KEY], GRID_AXES, f"{file} [grid]")
        for key in GRID_AXES:
            if not isinstance(grid.get(key), list) or not grid[key]:
                raise StudyError(f"{file} [grid].{key} must be a non-empty list")
        scan = data.get("scan", {})
        _unknown(scan, ("points",), f"{file} [scan]")
        ordered = tuple((k, values[k]) for k in DEFAULTS)
        study = cls(
            name=name,
            description=str(data.get("description", "")),
            inner=check_inner(data.get("inner", "appo"), "inner"),
            populations=tuple(check_population(p, "[grid].population") for p in grid["population"]),
            optimize_params=tuple(cls._params(p) for p in grid["optimize_params"]),
            seeds=tuple(_int(s, "[grid].seed", 0) for s in grid["seed"]),
            generations=generations,
            values=ordered,
            axes=tuple(_axis(k, v, f"{file} [grid]") for k, v in grid.items() if k not in GRID_AXES),
            budgets=tuple(budgets),
            full_budget=None,
            scan=check_scan(scan["points"], "[scan].points") if "points" in scan else None,
            source=source,
        )
        return dataclasses.replace(study, full_budget=study.budget).validate()

    @staticmethod
    def _unknown_key(file: str, section: str, key: str):
        allowed = [k.partition(".")[2] for k in BY_KEY if k.startswith(section + ".")]
        kind = "rule" if section == "rules" else "key"
        raise StudyError(unknown_name(kind, key, allowed, f"{file} [{section}]"))

    @staticmethod
    def _params(value) -> tuple[str, ...]:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise StudyError(f"[grid].optimize_params entry {value!r} must be a list of rule names")
        try:
            return check_optimize_params(value)
        except ValueError as err:
            raise StudyError(str(err)) from None

    def validate(self) -> "Study":
        for population in self.populations:
            self.budget.generations_for(population)
        for values in self.trial_values():
            try:
                ESConfig(population=self.populations[0], **_section(values, "es"))
            except ValueError as err:
                raise StudyError(f"[es]: {err}") from None
            if values["objective.econ_weight"] == 0 and values["objective.sus_weight"] == 0:
                raise StudyError("[objective] econ_weight and sus_weight are both 0; at least one must be > 0")
        for axis in ("populations", "seeds", "optimize_params"):
            values = getattr(self, axis)
            if len(set(values)) != len(values):
                raise StudyError(f"grid axis {axis} repeats a value: {list(values)}")
        for key, values in self.axes:
            if len(set(values)) != len(values):
                raise StudyError(f"grid axis {key} repeats a value: {[plain(v) for v in values]}")
        return self

    # -- settings ----------------------------------------------------------------
    @property
    def settings(self) -> dict[str, Any]:
        """Every setting as run; a further axis's setting holds its file (or --set) value here, each trial its own (`for_cell`)."""
        return dict(self.values)

    def get(self, key: str) -> Any:
        return self.settings[setting(key).key]

    def trial_values(self) -> Iterable[dict[str, Any]]:
        """The settings of each combination of the further grid axes."""
        base = self.settings
        for combination in itertools.product(*(values for _, values in self.axes)):
            yield {**base, **dict(zip((k for k, _ in self.axes), combination))}

    @property
    def budget(self) -> Budget:
        return Budget(generations=self.generations, **_section(self.settings, "budget"))

    @property
    def es_settings(self) -> dict[str, Any]:
        return _section(self.settings, "es")

    def es_config(self, population: int) -> ESConfig:
        return ESConfig(population=population, **self.es_settings)

    @property
    def fixed_rules(self) -> dict[str, float]:
        """Every rule's fixed value, physical (the searched ones are the search's)."""
        return _section(self.settings, "rules")

    @property
    def econ_weight(self) -> float:
        return self.get("objective.econ_weight")

    @property
    def sus_weight(self) -> float:
        return self.get("objective.sus_weight")

    @property
    def smoothing(self) -> float:
        return self.get("world.smoothing")

    @property
    def ceiling(self) -> float:
        return self.get("summary.ceiling")

    @property
    def tol(self) -> float:
        return self.get("summary.tol")

    def with_values(self, changes: Mapping[str, Any]) -> "Study":
        """The study with these settings changed (checked), e.g. one trial's further axes."""
        changes = dict(changes)
        generations = changes.pop("budget.generations", self.generations)  # checked where it was read
        values = {**self.settings, **dict(_checked(k, v, "") for k, v in changes.items())}
        return dataclasses.replace(self, values=tuple((k, values[k]) for k in DEFAULTS), generations=generations)

    def for_cell(self, cell: Cell) -> "Study":
        """The study one trial runs: its cell's further axes' values set, no axes left."""
        return dataclasses.replace(self.with_values(dict(cell.extra)), axes=())

    # -- derived -------------------------------------------------------------
    @property
    def budget_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.budgets)

    @property
    def budget_label(self) -> str:
        """The budget as run: its name and the command line's changes to it, e.g. 'quick, outer_iters=4'."""
        changes = [f"{k}={plain(v)}" for k, v in self.overrides if k in BUDGET_OVERRIDES]
        return ", ".join([self.budget_name, *changes])

    @property
    def overrides_label(self) -> str:
        """The command line's other changes (grid axes, settings, inner loop), e.g. 'population=16, appo.lr=0.0003'."""
        return ", ".join(f"{k}={plain(v)}" for k, v in self.overrides if k not in BUDGET_OVERRIDES)

    @property
    def smoke(self) -> bool:
        """A named budget other than the full one: verdicts from it say nothing about the science."""
        return self.budget_name != FULL_BUDGET

    def full_generations_for(self, population: int) -> int | None:
        """The study file's full budget for this population; None when it has none (a population added on the command line)."""
        full = self.full_budget or self.budget
        try:
            return full.generations_for(population)
        except StudyError:
            return None

    def short_of_full(self, cell: Cell) -> bool:
        """Does this cell run fewer generations (or inner iterations) than the study file's full budget?"""
        full_generations = self.full_generations_for(cell.population)
        fewer = full_generations is not None and cell.generations < full_generations
        return fewer or self.budget.inner_iters < (self.full_budget or self.budget).inner_iters

    def _extras(self, inner_only: bool = False) -> list[tuple[tuple[str, Any], ...]]:
        """Each combination of the further axes as a trial's `extra` (sorted by key); scans cross only the inner loop's."""
        axes = sorted((k, v) for k, v in self.axes if BY_KEY[k].inner or not inner_only)
        return [
            tuple(zip((k for k, _ in axes), combination)) for combination in itertools.product(*(v for _, v in axes))
        ]

    def cells(self) -> list[Cell]:
        """One per ES trial: population × optimize_params × seed × the further axes, with its generation budget."""
        return [
            Cell(p, params, s, self.budget.generations_for(p), extra=extra)
            for p in self.populations
            for params in self.optimize_params
            for s in self.seeds
            for extra in self._extras()
        ]

    def scan_cells(self) -> list[Cell]:
        """One scan trial per optimize_params × seed × the further axes the inner loop reads, when the study scans."""
        if not self.scan:
            return []
        passes = 1 + self.budget.final_eval_seeds  # the evaluation seeds, then each final re-evaluation seed
        return [
            Cell(self.scan ** len(params), params, s, passes, scan=True, extra=extra)
            for params in self.optimize_params
            for s in self.seeds
            for extra in self._extras(inner_only=True)
        ]

    def trial_cells(self) -> list[Cell]:
        """Every trial of a run: the ES grid, then the scans."""
        return self.cells() + self.scan_cells()

    def cell_of(self, config) -> Cell:
        """The trial cell a Tune config (or a record) names."""
        key = Cell.key_of(config)
        cell = next((c for c in self.trial_cells() if c.key == key), None)
        if cell is None:
            raise StudyError(f"no trial of study {self.name!r} has the cell {key}")
        return cell

    # -- overrides (each narrows or replaces a grid axis, or sets settings) --
    def with_budget(self, name: str) -> "Study":
        budgets = dict(self.budgets)
        if name not in budgets:
            raise StudyError(f"study {self.name!r} has no budget {name!r}; it has: {', '.join(budgets) or 'none'}")
        return dataclasses.replace(self.with_values(dict(budgets[name])), budget_name=name)

    def with_overrides(
        self,
        populations=None,
        optimize_params=None,
        seeds=None,
        outer_iters=None,
        inner_iters=None,
        rules: Mapping[str, float] | None = None,
        inner: str | None = None,
        scan: int | None = None,
        settings: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        grid: Mapping[str, Sequence[Any]] | Sequence[tuple[str, Sequence[Any]]] | None = None,
    ) -> "Study":
        """The study as a command line changes it: `settings` fix settings (`--set`), `grid` crosses them (`--grid`)."""
        study, changed = self, []
        if populations is not None:
            study = dataclasses.replace(
                study, populations=tuple(check_population(p, "--population") for p in populations)
            )
            changed.append(("population", study.populations))
        if optimize_params is not None:
            study = dataclasses.replace(study, optimize_params=(self._params(list(optimize_params)),))
            changed.append(("optimize_params", study.optimize_params[0]))
        if seeds is not None:
            study = dataclasses.replace(study, seeds=tuple(_int(s, "--seed", 0) for s in seeds))
            changed.append(("seed", study.seeds))
        if outer_iters is not None:
            study = dataclasses.replace(study, generations=_int(outer_iters, "--outer-iters", 1))
            changed.append(("outer_iters", outer_iters))
        if inner_iters is not None:
            study = study.with_values({"budget.inner_iters": _int(inner_iters, "--inner-iters", 1)})
            changed.append(("inner_iters", inner_iters))
        fixed = [(f"rules.{k}" if k in RULE_NAMES else k, v) for k, v in dict(rules or {}).items()]
        fixed += list(dict(settings or {}).items())
        for key, value in fixed:
            if key == "budget.generations":
                raise StudyError("--set budget.generations: use --outer-iters N (one count for every cell)")
            full, typed = _checked(key, value, "--set", text=isinstance(value, str))
            study = study.with_values({full: typed})
            changed.append((full, typed))
        for key, values in dict(grid or {}).items():
            axis = _axis(key, values, "--grid")
            study = dataclasses.replace(study, axes=tuple((k, v) for k, v in study.axes if k != axis[0]) + (axis,))
            changed.append((GRID_OVERRIDE + axis[0], axis[1]))
        if inner is not None:
            study = dataclasses.replace(study, inner=check_inner(inner, "--inner"))
            changed.append(("inner", inner))
        if scan is not None:
            study = dataclasses.replace(study, scan=check_scan(scan, "--scan"))
            changed.append(("scan", scan))
        return dataclasses.replace(study, overrides=self.overrides + tuple(changed)).validate()

    # -- serialisation (study.json, the trial config) -------------------------
    def to_dict(self) -> dict[str, Any]:
        return json_safe(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Study":
        """From study.json (a run folder of 0.1, before settings had sections, too)."""
        data = dict(data)
        if "values" not in data:
            data = _from_release_0_1(data)
        data["generations"] = _frozen(data["generations"])
        # a setting added by a later release takes its default: what a run recorded before it existed ran
        recorded = {k: _frozen(v) for k, v in data["values"]}
        data["values"] = tuple((k, recorded.get(k, DEFAULTS[k])) for k in DEFAULTS)
        data["axes"] = tuple((k, tuple(_frozen(x) for x in v)) for k, v in data.get("axes", ()))
        data["budgets"] = tuple(
            (name, tuple((k, _frozen(v)) for k, v in changes)) for name, changes in data.get("budgets", ())
        )
        if data.get("full_budget") is not None:
            data["full_budget"] = Budget.from_dict(data["full_budget"])
        for key in ("populations", "seeds"):
            data[key] = tuple(data[key])
        data["optimize_params"] = tuple(tuple(p) for p in data["optimize_params"])
        data["overrides"] = tuple((k, _frozen(v)) for k, v in data.get("overrides", ()))
        return cls(**data)


def _from_release_0_1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A 0.1 study.json: budgets held world and network fields; rules, objective, world, ES and summary were fields."""
    data = dict(data)
    budget = data.pop("budget")
    values = dict(DEFAULTS)
    values.update(
        {f"budget.{k}": budget[k] for k in ("inner_iters", "eval_episodes", "final_eval_seeds") if k in budget}
    )
    values.update({new: budget[old] for old, new in LEGACY_BUDGET_KEYS.items() if old in budget})
    values.update({f"rules.{k}": v for k, v in data.pop("rules", ())})
    values.update({f"es.{k}": v for k, v in data.pop("es", ())})
    values["objective.econ_weight"] = data.pop("econ_weight", 1.0)
    values["objective.sus_weight"] = data.pop("sus_weight", 0.0)
    values["world.smoothing"] = data.pop("smoothing", 0.0)
    values["summary.ceiling"] = data.pop("ceiling", DEFAULTS["summary.ceiling"])
    values["summary.tol"] = data.pop("tol", DEFAULTS["summary.tol"])
    data["generations"] = budget["generations"]
    data["values"] = [(k, values[k]) for k in DEFAULTS]
    data["budgets"] = [
        (name, [(LEGACY_BUDGET_KEYS.get(k, f"budget.{k}"), v) for k, v in b.items()])
        for name, b in data.get("budgets", ())
    ]
    return data


def _axis(key: str, values, where: str) -> tuple[str, tuple]:
    """A further grid axis: a setting and its values (a non-empty list, each checked)."""
    text = isinstance(values, str)  # a command line's "a,b,c"
    values = [v for v in values.split(",") if v.strip()] if text else values
    if not isinstance(values, (list, tuple)) or not values:
        raise StudyError(f"{where} {key}={values!r} must be a non-empty list of values")
    checked = [_checked(key, v, f"{where} {key}", text=text) for v in values]
    full = checked[0][0]
    if full == "budget.generations":
        raise StudyError(f"{where} {key}: budget.generations is set per population, not crossed")
    return full, tuple(v for _, v in checked)


def _section(values: Mapping[str, Any], section: str) -> dict[str, Any]:
    return {k.partition(".")[2]: v for k, v in values.items() if k.startswith(section + ".")}


def _frozen(value):
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def available_studies(directory: Path | None = None) -> list[str]:
    if directory is not None:
        return sorted(p.stem for p in Path(directory).glob("*.toml"))
    return sorted(Path(f.name).stem for f in resources.files(STUDIES_PACKAGE).iterdir() if f.name.endswith(".toml"))


def load_study(name_or_path: str, directory: Path | None = None) -> Study:
    """A study by name (a built-in one, shipped in the package) or by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise StudyError(f"study file {name_or_path!r} does not exist")
        return Study.from_toml(path)
    names = available_studies(directory)
    if name_or_path not in names:
        raise StudyError(unknown_name("study", name_or_path, names) + " (or a path to a .toml file)")
    if directory is not None:
        return Study.from_toml(Path(directory) / f"{name_or_path}.toml")
    with resources.as_file(resources.files(STUDIES_PACKAGE) / f"{name_or_path}.toml") as path:
        study = Study.from_toml(path)
    return dataclasses.replace(study, source=f"{STUDIES_PACKAGE}/{name_or_path}.toml")
