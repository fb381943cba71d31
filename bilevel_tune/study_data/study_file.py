"""Reading a study file: TOML → the fields of a `definition.Study`, every value checked where it enters.

A study file (studies/weekend.toml, docs/study.md) holds every
setting of the study in the sections `settings.SETTINGS` lists —
[world], [network], [appo], [es], [objective], [rules], [budget],
[summary] — the grid ([grid]: population × optimize_params × seed, and any
setting as a further axis), named budgets such as `quick` (which may
override any setting: `world.horizon = 30`), and an optional [scan].
Unknown keys fail with a "did you mean"; every error is one line naming the
file, the key, the bad value and what is allowed. Before 0.2 [budget] also
held horizon, num_farms and hidden: still accepted.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from bilevel_tune.base.hints import unknown_name
from bilevel_tune.study_data.settings import (
    GENERATIONS,
    LEGACY_BUDGET_KEYS,
    RULE_SECTIONS,
    SECTIONS,
    SHORTHANDS,
    SettingsTable,
    settings_table,
)
from bilevel_tune.study_data.study_checks import (
    StudyError,
    check_axis,
    check_inner,
    check_int,
    check_known,
    check_params,
    check_population,
    check_scan,
)
from bilevel_tune.worlds import DEFAULT_WORLD

STUDIES_PACKAGE = "bilevel_tune.studies"  # the built-in studies ship inside the package
GRID_AXES = ("population", "optimize_params", "seed")
WORLD_KIND = "kind"  # [world] kind = "fishery" (or "module:Class"): the world a study runs on; by default DEFAULT_WORLD
TOP_KEYS = (
    "name",
    "description",
    "inner",
    "grid",
    "budget",
    "budgets",
    "scan",
    *SHORTHANDS,  # `optimizer = "bo"`: [outer] optimizer
    *(s for s in SECTIONS if s != "budget"),
)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as err:
        raise StudyError(f"malformed TOML in {path}: {err}") from None
    except OSError as err:
        raise StudyError(f"cannot read study file {path}: {err.strerror}") from None


def study_fields(data: Mapping[str, Any], source: str = "") -> dict[str, Any]:
    """A study file's content as `Study`'s fields (its full budget aside: the study's own budget)."""
    file = Path(source).name if source else "the study file"
    check_known(data, TOP_KEYS, file)
    data = _shorthands_in_sections(data, file)
    name = data.get("name")
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise StudyError(f"{file}: name={name!r} must be a non-empty string of letters, digits, '-' and '_'")
    for section in SECTIONS:
        if not isinstance(data.get(section, {}), Mapping):
            raise StudyError(f"{file}: [{section}] must be a table")
    world = data.get("world", {}).get(WORLD_KIND, DEFAULT_WORLD)
    if not isinstance(world, str):
        raise StudyError(f"{file} [world] {WORLD_KIND}={world!r} must be a world's name or 'module:Class'")
    try:
        settings = settings_table(world)
    except ValueError as err:  # the world does not import, or is no world
        raise StudyError(f"{file} [world] {WORLD_KIND}: {err}") from None
    values = {}
    for section in SECTIONS:
        table = {k: v for k, v in data.get(section, {}).items() if (section, k) != ("world", WORLD_KIND)}
        for key, value in table.items() if section != "budget" else ():
            if f"{section}.{key}" not in settings.by_key:
                _unknown_key(file, section, key, settings)
            values[f"{section}.{key}"] = settings.setting(f"{section}.{key}").check(value, f"{file} [{section}]")
    generations, budget_values = budget_section(data.get("budget", {}), f"{file} [budget]", settings)
    if generations is None and budget_values.get("budget.evaluations") is None:
        raise StudyError(
            f"{file} [budget] needs 'generations' (an integer, or a table keyed by population) or 'evaluations'"
        )
    generations = () if generations is None else generations  # evaluations set each population's generations
    values.update(budget_values, **{GENERATIONS: generations})
    budgets = []
    for bname, table in data.get("budgets", {}).items():
        gens, changes = budget_section(table, f"{file} [budgets.{bname}]", settings)
        if gens is not None:
            changes = {GENERATIONS: gens, **changes}
        budgets.append((bname, tuple(changes.items())))
    grid = {SHORTHANDS.get(k, k): v for k, v in _dotted(data.get("grid", {})).items()}
    check_known([k for k in grid if k not in settings.by_key], GRID_AXES, f"{file} [grid]")
    for key in GRID_AXES:
        if not isinstance(grid.get(key), list) or not grid[key]:
            raise StudyError(f"{file} [grid].{key} must be a non-empty list")
    scan = data.get("scan", {})
    check_known(scan, ("points",), f"{file} [scan]")
    return dict(
        name=name,
        description=str(data.get("description", "")),
        inner=check_inner(data.get("inner", "appo"), "inner"),
        populations=tuple(check_population(p, "[grid].population") for p in grid["population"]),
        optimize_params=tuple(check_params(p, settings) for p in grid["optimize_params"]),
        seeds=tuple(check_int(s, "[grid].seed", 0) for s in grid["seed"]),
        world_kind=world,
        **_typed_sections(values, settings),
        axes=tuple(check_axis(k, v, f"{file} [grid]", settings) for k, v in grid.items() if k not in GRID_AXES),
        budgets=tuple(budgets),
        scan=check_scan(scan["points"], "[scan].points") if "points" in scan else None,
        source=source,
    )


def _shorthands_in_sections(data: Mapping[str, Any], file: str) -> dict[str, Any]:
    """A study file's top-level shorthands (`optimizer = "bo"`) moved into their sections ([outer] optimizer)."""
    data = dict(data)
    for short, key in SHORTHANDS.items():
        if short in data:
            section, _, name = key.partition(".")
            if name in data.get(section, {}):
                raise StudyError(f"{file}: {short} is given twice, at the top and as [{section}] {name}; keep one")
            data[section] = {**data.get(section, {}), name: data.pop(short)}
    return data


def _typed_sections(values: Mapping[str, Any], settings: SettingsTable) -> dict[str, Any]:
    """{section: its typed dataclass} from `section.key` values, each at its default where not given.

    [rules] comes back as (name, physical value) pairs in the world's order; `budget.generations` is required.
    """
    given: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}  # by field name
    for key, value in values.items():
        spec = settings.setting(key) if key != GENERATIONS else None
        given["budget" if spec is None else spec.section]["generations" if spec is None else spec.field_name] = value
    sections: dict[str, Any] = {name: cls(**given[name]) for name, cls in settings.section_classes.items()}
    sections["rules"] = tuple((r.name, given["rules"].get(r.name, r.default)) for r in settings.rule_specs)
    sections["search"] = tuple((r.name, given["search"].get(r.name, (r.low, r.high))) for r in settings.rule_specs)
    return sections


def parse_generations(value, where: str):
    """budget.generations: one count, or a table of (population, count) pairs."""
    if isinstance(value, Mapping):
        pairs = []
        for key, count in value.items():
            try:
                population = int(key)
            except ValueError:
                raise StudyError(f"{where} key {key!r} must be a population (an integer)") from None
            pairs.append((check_population(population, f"{where} key"), check_int(count, f"{where}.{key}", 1)))
        return tuple(sorted(pairs))
    return check_int(value, where, 1)


def budget_section(data: Mapping[str, Any], where: str, settings: SettingsTable) -> tuple[Any, dict[str, Any]]:
    """([budget]'s or a named budget's generations (None if absent), its other settings as dotted keys).

    Its own keys are budget settings; before 0.2 it also held the world's and network's
    (horizon, num_farms, hidden), still accepted; a named budget may set any setting.
    """
    generations, values = None, {}
    for key, value in _dotted(data).items():
        if key == "generations":
            generations = parse_generations(value, f"{where}.generations")
            continue
        full = LEGACY_BUDGET_KEYS.get(key, key if "." in key else f"budget.{key}")
        if full not in settings.by_key:
            section, _, name = full.partition(".")
            allowed = ("generations", *(k.partition(".")[2] for k in settings.by_key if k.startswith("budget.")))
            raise StudyError(unknown_name("key", name if section == "budget" else full, allowed, where))
        values[full] = settings.setting(full).check(value, where)
    return generations, values


def _dotted(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML's nested tables as dotted keys: {"world": {"horizon": 30}} → {"world.horizon": 30}."""
    out = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping) and full.split(".")[0] in SECTIONS and full != GENERATIONS:
            out.update(_dotted(value, full + "."))
        else:
            out[full] = value
    return out


def _unknown_key(file: str, section: str, key: str, settings: SettingsTable):
    allowed = [k.partition(".")[2] for k in settings.by_key if k.startswith(section + ".")]
    allowed += [WORLD_KIND] if section == "world" else []
    kind = "rule" if section in RULE_SECTIONS else "key"
    raise StudyError(unknown_name(kind, key, allowed, f"{file} [{section}]"))


def available_studies(directory: Path | None = None) -> list[str]:
    if directory is not None:
        return sorted(p.stem for p in Path(directory).glob("*.toml"))
    return sorted(Path(f.name).stem for f in resources.files(STUDIES_PACKAGE).iterdir() if f.name.endswith(".toml"))


def study_path(name_or_path: str, directory: Path | None = None) -> tuple[Path, str | None]:
    """The file of a study named by name (a built-in one, or one in `directory`) or by path; and its source label.

    The label of a built-in study is its place in the package (the file's path changes with the install).
    """
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise StudyError(f"study file {name_or_path!r} does not exist")
        return path, None
    names = available_studies(directory)
    if name_or_path not in names:
        raise StudyError(unknown_name("study", name_or_path, names) + " (or a path to a .toml file)")
    if directory is not None:
        return Path(directory) / f"{name_or_path}.toml", None
    traversable = resources.files(STUDIES_PACKAGE) / f"{name_or_path}.toml"
    return Path(str(traversable)), f"{STUDIES_PACKAGE}/{name_or_path}.toml"
