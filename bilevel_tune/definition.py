"""Study definitions: TOML data validated into a frozen, typed definition.

A study file (see studies/weekend.toml and docs/study.md) holds the grid
(population × optimize_params × seed), the budget and named budgets such as
`quick`, fixed rules, objective weights, ES settings and summary thresholds.
Unknown keys fail with a "did you mean"; every error is one line naming the
key, the bad value and what is allowed. No loops, no Ray.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from bilevel_tune.es import SHAPINGS, ESConfig
from bilevel_tune.hints import unknown_name
from bilevel_tune.inner import InnerLoopError, check_loop_spec
from bilevel_tune.run_folder import Cell, json_safe
from bilevel_tune.scan import MIN_POINTS
from bilevel_tune.world.rules import RULE_NAMES, check_optimize_params, rule_spec

STUDIES_DIR = Path(__file__).resolve().parent.parent / "studies"
DEFAULT_CEILING = 0.25  # the value the user's best objectives stopped at
DEFAULT_TOL = 1e-4
FULL_BUDGET = "full"  # the name of a study file's [budget]
BUDGET_OVERRIDES = ("outer_iters", "inner_iters")


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


def _number(value, where: str, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise StudyError(f"{where}={value!r} must be a finite number")
    if minimum is not None and value < minimum:
        raise StudyError(f"{where}={value!r} must be ≥ {minimum}")
    return float(value)


def _rule(name: str, value, where: str) -> float:
    """A fixed rule's physical value, inside the range the search could reach."""
    if name not in RULE_NAMES:
        raise StudyError(unknown_name("rule", name, RULE_NAMES, where))
    value = _number(value, f"{where} {name}")
    try:
        return rule_spec(name).check_physical(value)
    except ValueError as err:
        raise StudyError(f"{where}: {err}") from None


def check_population(value, where: str = "population") -> int:
    value = _int(value, where, 1)
    if value > 1 and value % 2:
        raise StudyError(f"{where}={value} must be 1 or even (antithetic pairs)")
    return value


def check_scan(value, where: str = "--scan") -> int:
    """Grid points per searched rule: an integer ≥ 2 (both ends of every rule's range)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_POINTS:
        raise StudyError(f"{where}={value!r} must be an integer ≥ {MIN_POINTS} (grid points per searched rule)")
    return value


def check_inner(value, where: str) -> str:
    try:
        return check_loop_spec(value)
    except InnerLoopError as err:
        raise StudyError(f"{where}={err}") from None


@dataclass(frozen=True)
class Budget:
    generations: int | tuple[tuple[int, int], ...]  # one count, or (population, count) pairs
    inner_iters: int = 50
    eval_episodes: int = 1
    final_eval_seeds: int = 3
    horizon: int = 150
    num_farms: int = 5
    hidden: tuple[int, ...] = (256, 256)

    FIELDS = ("generations", "inner_iters", "eval_episodes", "final_eval_seeds", "horizon", "num_farms", "hidden")

    @classmethod
    def parse(cls, data: Mapping[str, Any], where: str, base: "Budget | None" = None) -> "Budget":
        _unknown(data, cls.FIELDS, where)
        values = dataclasses.asdict(base) if base else {}
        for key, value in data.items():
            if key == "generations":
                values[key] = cls._parse_generations(value, f"{where}.generations")
            elif key == "hidden":
                if not isinstance(value, list) or not value:
                    raise StudyError(f"{where}.hidden={value!r} must be a non-empty list of layer sizes")
                values[key] = tuple(_int(h, f"{where}.hidden", 1) for h in value)
            else:
                values[key] = _int(value, f"{where}.{key}", 0 if key == "final_eval_seeds" else 1)
        if "generations" not in values:
            raise StudyError(f"{where} needs 'generations' (an integer, or a table keyed by population)")
        return cls.from_dict(values)

    @staticmethod
    def _parse_generations(value, where: str):
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
        """Inverse of dataclasses.asdict, also after a JSON round trip (lists back to tuples)."""
        data = dict(data)
        if not isinstance(data["generations"], int):
            data["generations"] = tuple(tuple(pair) for pair in data["generations"])
        data["hidden"] = tuple(data.get("hidden", cls.hidden))
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


@dataclass(frozen=True)
class Study:
    """A resolved study: the grid, one budget, and everything every trial shares."""

    name: str
    populations: tuple[int, ...]
    optimize_params: tuple[tuple[str, ...], ...]
    seeds: tuple[int, ...]
    budget: Budget
    description: str = ""
    inner: str = "appo"
    budget_name: str = FULL_BUDGET
    budgets: tuple[tuple[str, Budget], ...] = ()
    full_budget: Budget | None = None  # the file's [budget]: what "a shorter run" is measured against
    overrides: tuple[tuple[str, Any], ...] = ()  # what the command line changed, in order
    rules: tuple[tuple[str, float], ...] = ()
    econ_weight: float = 1.0
    sus_weight: float = 0.0
    smoothing: float = 0.0
    es: tuple[tuple[str, Any], ...] = ()
    ceiling: float = DEFAULT_CEILING
    tol: float = DEFAULT_TOL
    scan: int | None = None  # grid points per searched rule of the rules scan (bilevel_tune.scan); None: no scan
    source: str = ""

    TOP_KEYS = (
        "name",
        "description",
        "inner",
        "grid",
        "budget",
        "budgets",
        "rules",
        "objective",
        "es",
        "world",
        "summary",
        "scan",
    )
    GRID_KEYS = ("population", "optimize_params", "seed")

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
        _unknown(data, cls.TOP_KEYS, "the study file")
        name = data.get("name")
        if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
            raise StudyError(f"name={name!r} must be a non-empty string of letters, digits, '-' and '_'")
        grid = data.get("grid", {})
        _unknown(grid, cls.GRID_KEYS, "[grid]")
        for key in cls.GRID_KEYS:
            if not isinstance(grid.get(key), list) or not grid[key]:
                raise StudyError(f"[grid].{key} must be a non-empty list")
        budget = Budget.parse(data.get("budget", {}), "[budget]")
        budgets = tuple(
            (bname, Budget.parse(b, f"[budgets.{bname}]", base=budget)) for bname, b in data.get("budgets", {}).items()
        )
        objective, world, summary = data.get("objective", {}), data.get("world", {}), data.get("summary", {})
        _unknown(objective, ("econ_weight", "sus_weight"), "[objective]")
        _unknown(world, ("smoothing",), "[world]")
        _unknown(summary, ("ceiling", "tol"), "[summary]")
        scan = data.get("scan", {})
        _unknown(scan, ("points",), "[scan]")
        es = data.get("es", {})
        _unknown(es, tuple(f.name for f in dataclasses.fields(ESConfig) if f.name != "population"), "[es]")
        study = cls(
            name=name,
            description=str(data.get("description", "")),
            inner=check_inner(data.get("inner", "appo"), "inner"),
            populations=tuple(check_population(p, "[grid].population") for p in grid["population"]),
            optimize_params=tuple(cls._params(p) for p in grid["optimize_params"]),
            seeds=tuple(_int(s, "[grid].seed", 0) for s in grid["seed"]),
            budget=budget,
            budgets=budgets,
            full_budget=budget,
            rules=tuple((k, _rule(k, v, "[rules]")) for k, v in data.get("rules", {}).items()),
            econ_weight=_number(objective.get("econ_weight", 1.0), "[objective].econ_weight", 0.0),
            sus_weight=_number(objective.get("sus_weight", 0.0), "[objective].sus_weight", 0.0),
            smoothing=_number(world.get("smoothing", 0.0), "[world].smoothing", 0.0),
            es=tuple(es.items()),
            ceiling=_number(summary.get("ceiling", DEFAULT_CEILING), "[summary].ceiling"),
            tol=_number(summary.get("tol", DEFAULT_TOL), "[summary].tol", 0.0),
            scan=check_scan(scan["points"], "[scan].points") if "points" in scan else None,
            source=source,
        )
        return study.validate()

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
        try:
            self.es_config(self.populations[0])
        except ValueError as err:
            raise StudyError(f"[es]: {err}") from None
        if self.es_settings.get("shaping", "zscore") not in SHAPINGS:
            raise StudyError(f"[es].shaping={self.es_settings['shaping']!r} is unknown; allowed: {', '.join(SHAPINGS)}")
        if self.econ_weight == 0 and self.sus_weight == 0:
            raise StudyError("[objective] econ_weight and sus_weight are both 0; at least one must be > 0")
        for axis in ("populations", "seeds", "optimize_params"):
            values = getattr(self, axis)
            if len(set(values)) != len(values):
                raise StudyError(f"grid axis {axis} repeats a value: {list(values)}")
        return self

    # -- derived -------------------------------------------------------------
    @property
    def es_settings(self) -> dict[str, Any]:
        return dict(self.es)

    def es_config(self, population: int) -> ESConfig:
        return ESConfig(population=population, **self.es_settings)

    @property
    def fixed_rules(self) -> dict[str, float]:
        return dict(self.rules)

    @property
    def budget_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.budgets)

    @property
    def budget_label(self) -> str:
        """The budget as run: its name and the command line's changes to it, e.g. 'quick, outer_iters=4'."""
        changes = [f"{k}={_plain(v)}" for k, v in self.overrides if k in BUDGET_OVERRIDES]
        return ", ".join([self.budget_name, *changes])

    @property
    def overrides_label(self) -> str:
        """The command line's other changes (grid axes, rules, inner loop), e.g. 'population=16, inner=analytic'."""
        return ", ".join(f"{k}={_plain(v)}" for k, v in self.overrides if k not in BUDGET_OVERRIDES)

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

    def cells(self) -> list[Cell]:
        """One per ES trial: population × optimize_params × seed, with its generation budget."""
        return [
            Cell(p, params, s, self.budget.generations_for(p))
            for p in self.populations
            for params in self.optimize_params
            for s in self.seeds
        ]

    def scan_cells(self) -> list[Cell]:
        """One scan trial per optimize_params × seed when the study scans: its grid points, its passes."""
        if not self.scan:
            return []
        passes = 1 + self.budget.final_eval_seeds  # the evaluation seeds, then each final re-evaluation seed
        return [
            Cell(self.scan ** len(params), params, s, passes, scan=True)
            for params in self.optimize_params
            for s in self.seeds
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

    # -- overrides (each narrows or replaces a grid axis, or a budget field) --
    def with_budget(self, name: str) -> "Study":
        budgets = dict(self.budgets)
        if name not in budgets:
            raise StudyError(f"study {self.name!r} has no budget {name!r}; it has: {', '.join(budgets) or 'none'}")
        return dataclasses.replace(self, budget=budgets[name], budget_name=name)

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
    ) -> "Study":
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
        budget = study.budget
        if outer_iters is not None:
            budget = dataclasses.replace(budget, generations=_int(outer_iters, "--outer-iters", 1))
            changed.append(("outer_iters", outer_iters))
        if inner_iters is not None:
            budget = dataclasses.replace(budget, inner_iters=_int(inner_iters, "--inner-iters", 1))
            changed.append(("inner_iters", inner_iters))
        if rules:
            fixed = {name: _rule(name, value, "--set") for name, value in rules.items()}
            study = dataclasses.replace(study, rules=tuple({**study.fixed_rules, **fixed}.items()))
            changed += [(name, value) for name, value in fixed.items()]
        if inner is not None:
            study = dataclasses.replace(study, inner=check_inner(inner, "--inner"))
            changed.append(("inner", inner))
        if scan is not None:
            study = dataclasses.replace(study, scan=check_scan(scan, "--scan"))
            changed.append(("scan", scan))
        return dataclasses.replace(study, budget=budget, overrides=self.overrides + tuple(changed)).validate()

    # -- serialisation (study.json, the trial config) -------------------------
    def to_dict(self) -> dict[str, Any]:
        return json_safe(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Study":
        data = dict(data)
        data["budget"] = Budget.from_dict(data["budget"])
        data["budgets"] = tuple((name, Budget.from_dict(b)) for name, b in data.get("budgets", ()))
        if data.get("full_budget") is not None:
            data["full_budget"] = Budget.from_dict(data["full_budget"])
        for key in ("populations", "seeds"):
            data[key] = tuple(data[key])
        data["optimize_params"] = tuple(tuple(p) for p in data["optimize_params"])
        for key in ("rules", "es"):
            data[key] = tuple(tuple(pair) for pair in data.get(key, ()))
        data["overrides"] = tuple((k, _frozen(v)) for k, v in data.get("overrides", ()))
        return cls(**data)


def _frozen(value):
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _plain(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_plain(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def available_studies(directory: Path = STUDIES_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.toml"))


def load_study(name_or_path: str, directory: Path = STUDIES_DIR) -> Study:
    """A study by name (a file in studies/) or by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise StudyError(f"study file {name_or_path!r} does not exist")
        return Study.from_toml(path)
    names = available_studies(directory)
    if name_or_path not in names:
        raise StudyError(unknown_name("study", name_or_path, names) + " (or a path to a .toml file)")
    return Study.from_toml(directory / f"{name_or_path}.toml")
