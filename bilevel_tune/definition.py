"""Study definitions: TOML data validated into a frozen, typed definition.

A study file (see studies/weekend.toml) holds the grid (population ×
optimize_params × seed), the budget and named budgets such as `quick`,
fixed rules, objective weights, ES settings and summary thresholds.
Unknown keys fail with a "did you mean"; every error is one line naming
the key, the bad value and what is allowed. No loops, no Ray.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import tomllib

from bilevel_tune.es import SHAPINGS, ESConfig
from bilevel_tune.records import json_safe
from bilevel_tune.world.rules import RULE_NAMES, check_optimize_params, rule_spec

STUDIES_DIR = Path(__file__).resolve().parent.parent / "studies"
INNER_LOOPS = ("appo", "analytic")  # or "package.module:Class", a custom inner loop with the same interface
INNER_METHODS = ("reset", "train", "evaluate", "census", "stop")


class StudyError(ValueError):
    """A bad study file or override; the message is the one line the user sees."""


def _unknown(keys, allowed, where: str) -> None:
    for key in keys:
        if key not in allowed:
            close = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise StudyError(f"unknown key {key!r} in {where}{hint}; allowed: {', '.join(allowed)}")


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


def check_population(value, where: str = "population") -> int:
    value = _int(value, where, 1)
    if value > 1 and value % 2:
        raise StudyError(f"{where}={value} must be 1 or even (antithetic pairs)")
    return value


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
        values["hidden"] = tuple(values.get("hidden", cls.hidden))
        if isinstance(values["generations"], list):
            values["generations"] = tuple(tuple(p) for p in values["generations"])
        return cls(**values)

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
        """Inverse of dataclasses.asdict after a JSON round trip (lists back to tuples)."""
        data = dict(data)
        if not isinstance(data["generations"], int):
            data["generations"] = tuple(tuple(pair) for pair in data["generations"])
        data["hidden"] = tuple(data["hidden"])
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
    budget_name: str = "full"
    budgets: tuple[tuple[str, Budget], ...] = ()
    rules: tuple[tuple[str, float], ...] = ()
    econ_weight: float = 1.0
    sus_weight: float = 0.0
    smoothing: float = 0.0
    es: tuple[tuple[str, Any], ...] = ()
    ceiling: float = 0.25
    tol: float = 1e-4
    source: str = ""

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
        top = (
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
        )
        _unknown(data, top, "the study file")
        name = data.get("name")
        if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
            raise StudyError(f"name={name!r} must be a non-empty string of letters, digits, '-' and '_'")
        inner = check_inner(data.get("inner", "appo"), "inner")

        grid = data.get("grid", {})
        _unknown(grid, ("population", "optimize_params", "seed"), "[grid]")
        for key in ("population", "optimize_params", "seed"):
            if not isinstance(grid.get(key), list) or not grid[key]:
                raise StudyError(f"[grid].{key} must be a non-empty list")
        budget = Budget.parse(data.get("budget", {}), "[budget]")
        budgets = tuple(
            (bname, Budget.parse(b, f"[budgets.{bname}]", base=budget)) for bname, b in data.get("budgets", {}).items()
        )

        rules = data.get("rules", {})
        for rname in rules:
            if rname not in RULE_NAMES:
                close = difflib.get_close_matches(rname, RULE_NAMES, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise StudyError(f"unknown rule {rname!r} in [rules]{hint}; allowed: {', '.join(RULE_NAMES)}")
        objective = data.get("objective", {})
        _unknown(objective, ("econ_weight", "sus_weight"), "[objective]")
        world = data.get("world", {})
        _unknown(world, ("smoothing",), "[world]")
        es_fields = tuple(f.name for f in dataclasses.fields(ESConfig) if f.name != "population")
        es = data.get("es", {})
        _unknown(es, es_fields, "[es]")
        summary = data.get("summary", {})
        _unknown(summary, ("ceiling", "tol"), "[summary]")
        study = cls(
            name=name,
            description=str(data.get("description", "")),
            inner=inner,
            populations=tuple(check_population(p, "[grid].population") for p in grid["population"]),
            optimize_params=tuple(cls._params(p) for p in grid["optimize_params"]),
            seeds=tuple(_int(s, "[grid].seed", 0) for s in grid["seed"]),
            budget=budget,
            budgets=budgets,
            rules=tuple((k, _number(v, f"[rules].{k}")) for k, v in rules.items()),
            econ_weight=_number(objective.get("econ_weight", 1.0), "[objective].econ_weight", 0.0),
            sus_weight=_number(objective.get("sus_weight", 0.0), "[objective].sus_weight", 0.0),
            smoothing=_number(world.get("smoothing", 0.0), "[world].smoothing", 0.0),
            es=tuple(es.items()),
            ceiling=_number(summary.get("ceiling", 0.25), "[summary].ceiling"),
            tol=_number(summary.get("tol", 1e-4), "[summary].tol", 0.0),
            source=source,
        )
        study.validate()
        return study

    @staticmethod
    def _params(value) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
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
    def smoke(self) -> bool:
        return self.budget_name != "full"

    def cells(self) -> list[dict[str, Any]]:
        """One entry per trial: population × optimize_params × seed, with its generation budget."""
        return [
            {"population": p, "optimize_params": list(params), "seed": s, "generations": self.budget.generations_for(p)}
            for p in self.populations
            for params in self.optimize_params
            for s in self.seeds
        ]

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
    ) -> "Study":
        study = self
        if populations is not None:
            study = dataclasses.replace(
                study, populations=tuple(check_population(p, "--population") for p in populations)
            )
        if optimize_params is not None:
            study = dataclasses.replace(study, optimize_params=(self._params(list(optimize_params)),))
        if seeds is not None:
            study = dataclasses.replace(study, seeds=tuple(_int(s, "--seed", 0) for s in seeds))
        budget = study.budget
        if outer_iters is not None:
            budget = dataclasses.replace(budget, generations=_int(outer_iters, "--outer-iters", 1))
        if inner_iters is not None:
            budget = dataclasses.replace(budget, inner_iters=_int(inner_iters, "--inner-iters", 1))
        if rules:
            for rname, value in rules.items():
                try:
                    rule_spec(rname)
                except ValueError as err:
                    raise StudyError(f"--set: {err}") from None
                _number(value, f"--set {rname}")
            study = dataclasses.replace(study, rules=tuple({**study.fixed_rules, **rules}.items()))
        if inner is not None:
            study = dataclasses.replace(study, inner=check_inner(inner, "--inner"))
        return dataclasses.replace(study, budget=budget).validate()

    # -- serialisation (study.json, the trial config) -------------------------
    def to_dict(self) -> dict[str, Any]:
        return json_safe(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Study":
        data = dict(data)
        data["budget"] = Budget.from_dict(data["budget"])
        data["budgets"] = tuple((name, Budget.from_dict(b)) for name, b in data["budgets"])
        for key in ("populations", "seeds"):
            data[key] = tuple(data[key])
        data["optimize_params"] = tuple(tuple(p) for p in data["optimize_params"])
        data["rules"] = tuple(tuple(r) for r in data["rules"])
        data["es"] = tuple(tuple(e) for e in data["es"])
        return cls(**data)


def load_inner_class(spec: str):
    """The class named by a custom inner loop spec "package.module:Class"."""
    import importlib

    module_name, _, class_name = spec.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def check_inner(value, where: str) -> str:
    if value in INNER_LOOPS:
        return value
    if not isinstance(value, str) or value.count(":") != 1:
        raise StudyError(f"{where}={value!r} is unknown; allowed: {', '.join(INNER_LOOPS)}, or package.module:Class")
    try:
        cls = load_inner_class(value)
    except (ImportError, AttributeError, ValueError) as err:
        raise StudyError(f"{where}={value!r} cannot be imported ({err})") from None
    missing = [m for m in INNER_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise StudyError(f"{where}={value!r} lacks the inner-loop method(s) {', '.join(missing)}")
    return value


def trial_name(study_name: str, cell: Mapping[str, Any]) -> str:
    """Trial names carry study, cell and seed: weekend_pop16_2d_seed42."""
    return f"{study_name}_pop{cell['population']}_{len(cell['optimize_params'])}d_seed{cell['seed']}"


def trial_dirname(study_name: str, cell: Mapping[str, Any], trial_id: str) -> str:
    return f"{trial_name(study_name, cell)}_{trial_id}"


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
        close = difflib.get_close_matches(name_or_path, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise StudyError(
            f"unknown study {name_or_path!r}{hint}; available: {', '.join(names) or 'none'} (or a path to a .toml file)"
        )
    return Study.from_toml(directory / f"{name_or_path}.toml")
