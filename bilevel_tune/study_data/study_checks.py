"""The checks a study's values pass where they enter (a study file, the command line, a record): one line each.

Every error is a `StudyError` whose message is the line the user sees: the
place, the key, the bad value and what is allowed. A setting's range is its
declaration's (`base.knobs.Setting.check`); these add the grid's own values.
"""

from __future__ import annotations

from typing import Any, Iterable

from bilevel_tune.base.hints import unknown_name
from bilevel_tune.base.knobs import StudyError, section_kwargs
from bilevel_tune.base.sections import ESSettings
from bilevel_tune.core import outer
from bilevel_tune.core.es import ESConfig
from bilevel_tune.core.scan import MIN_POINTS
from bilevel_tune.inner import InnerLoopError, check_loop_spec
from bilevel_tune.study_data.settings import OUTER_SECTIONS, SettingsTable, plain

__all__ = ["StudyError"]  # declared where a setting is checked: a setting's error is a study's


def check_known(keys: Iterable[str], allowed, where: str) -> None:
    for key in keys:
        if key not in allowed:
            raise StudyError(unknown_name("key", key, allowed, where))


def check_int(value, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise StudyError(f"{where}={value!r} must be an integer ≥ {minimum}")
    return value


def check_population(value, where: str = "population") -> int:
    """A population is an integer ≥ 1; what each optimiser runs (the ES: 1 or even) is its own `check`."""
    return check_int(value, where, 1)


def check_inner(value, where: str) -> str:
    if value == "frozen":  # it trains a block under its last rules: what scores a run's final rules, not a search
        raise StudyError(f"{where}='frozen' is a held-out learner ([final] learners), not a study's inner loop")
    try:
        return check_loop_spec(value)
    except InnerLoopError as err:
        raise StudyError(f"{where}={err}") from None


def check_scan(value, where: str = "--scan") -> int:
    """Grid points per searched rule: an integer ≥ 2 (both ends of every rule's range)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_POINTS:
        raise StudyError(f"{where}={value!r} must be an integer ≥ {MIN_POINTS} (grid points per searched rule)")
    return value


def check_params(value, table: SettingsTable) -> tuple[str, ...]:
    """One mechanism: a list of the world's rule names to search."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise StudyError(f"[grid].optimize_params entry {value!r} must be a list of rule names")
    return table.check_params(value)


def check_setting(key: str, value: Any, where: str, text: bool = False, *, table: SettingsTable) -> tuple[str, Any]:
    """(the setting's full key, its value typed and in range); StudyError otherwise. `text`: a command line's value."""
    spec = table.setting(key, where)
    return spec.key, spec.parse(value, where) if text else spec.check(value, where)


def check_axis(key: str, values, where: str, table: SettingsTable) -> tuple[str, tuple]:
    """A further grid axis: a setting and its values (a non-empty list, each checked)."""
    text = isinstance(values, str)  # a command line's "a,b,c"
    values = [v for v in values.split(",") if v.strip()] if text else values
    if not isinstance(values, (list, tuple)) or not values:
        raise StudyError(f"{where} {key}={values!r} must be a non-empty list of values")
    checked = [check_setting(key, v, f"{where} {key}", text=text, table=table) for v in values]
    full = checked[0][0]
    if full == "budget.generations":
        raise StudyError(f"{where} {key}: budget.generations is set per population, not crossed")
    if full.startswith("decide."):
        raise StudyError(f"{where} {key}: [decide] is how the study decides its comparisons, not a trial's setting")
    if full.startswith("final."):
        raise StudyError(f"{where} {key}: [final] is what scores every trial's final rules, not a trial's setting")
    if full.startswith("search."):
        raise StudyError(f"{where} {key}: a search range is the study's, not crossed (set it with --set or [search])")
    return full, tuple(v for _, v in checked)


def check_study(study):
    """What spans settings: a budget for every population, each trial's ES and objective sound, no axis repeating a
    value. (Whether the loop runs the world is the resolved study's check, `options.check_study_world`: `--inner`
    may replace the file's loop.)"""
    for population in study.populations:
        study.budget.generations_for(population)
    for values in trial_values(study):
        try:
            # [es]'s own cross-field rules (σ's bounds): the population's rule is the ES's `check` (check_optimizers)
            ESConfig(population=1, **section_kwargs(values, "es", ESSettings))
        except ValueError as err:
            raise StudyError(f"[es]: {err}") from None
        objective = study.table.section_classes["objective"]  # the world's own checks of its [objective]
        objective(**section_kwargs(values, "objective", objective))
    for axis in ("populations", "seeds", "optimize_params"):
        values = getattr(study, axis)
        if len(set(values)) != len(values):
            raise StudyError(f"grid axis {axis} repeats a value: {list(values)}")
    for key, values in study.axes:
        if len(set(values)) != len(values):
            raise StudyError(f"grid axis {key} repeats a value: {[plain(v) for v in values]}")
    check_effective(study)
    check_optimizers(study)
    return study


def _built_in_first(name: str) -> tuple[int, str]:
    return (list(outer.OPTIMIZERS).index(name), "") if name in outer.OPTIMIZERS else (len(outer.OPTIMIZERS), name)


def check_optimizers(study) -> None:
    """Every trial's optimiser can run its cells (CMA-ES a population ≥ 2, BO a bounded budget), and no optimiser's
    settings are changed in a study that runs none of its trials."""
    names = sorted({values["outer.optimizer"] for values in trial_values(study)}, key=_built_in_first)
    for name in names:
        optimizer = outer.load(name)
        for population in study.populations:
            evaluations = study.budget.generations_for(population) * population
            optimizer.check(population, evaluations, f"population {population}")
    for values in trial_values(study):  # each trial's own settings: a grid may cross them
        optimizer = outer.load(values["outer.optimizer"])
        if optimizer.section:
            cls = study.table.section_classes[optimizer.section]
            optimizer.check_settings(cls(**section_kwargs(values, optimizer.section, cls)), f"[{optimizer.section}]")
    runs, axes = ", ".join(names), dict(study.axes)
    for section in (s for s in OUTER_SECTIONS if s != "outer" and s not in names):
        for spec in (s for s in study.table.settings if s.section == section):
            if spec.key in axes or study.get(spec.key) != spec.default:
                value = axes.get(spec.key, study.get(spec.key))
                raise StudyError(
                    f"{spec.key}={plain(value)} is a setting of optimizer {section!r}, and this study runs {runs}: "
                    f"drop it, or run {section} (optimizer={section})"
                )


def check_effective(study) -> None:
    """Every setting given changes what some trial runs: a fixed rule that every mechanism searches does not (the
    search sets it), nor a grid axis of APPO settings under a loop that reads none."""
    searched_by_all = set.intersection(*(set(params) for params in study.optimize_params))
    mechanisms = " and ".join("[" + ", ".join(params) + "]" for params in study.optimize_params)
    for spec in study.table.rule_specs:
        value = dict(study.rules)[spec.name]
        if spec.name in searched_by_all and value != spec.default:
            raise StudyError(
                f"rule {spec.name}={plain(value)}: every mechanism of the grid ({mechanisms}) searches {spec.name}, so "
                f"no trial uses a fixed value; its search range is search.{spec.name} (drop the fixed value)"
            )
    reads_appo = study.inner.startswith("appo") or ":" in study.inner  # a user's loop may read them
    for key, values in study.axes:
        spec = study.table.by_key[key]
        rule = key.removeprefix("rules.")
        if spec.appo and not reads_appo:
            raise StudyError(
                f"grid axis {key}: the {study.inner} loop reads no APPO setting, so its values "
                f"{', '.join(plain(v) for v in values)} would run the same trials (an APPO loop reads it: --inner appo)"
            )
        if key.startswith("rules.") and rule in searched_by_all:
            raise StudyError(
                f"grid axis {key}: every mechanism of the grid ({mechanisms}) searches {rule}, so its values "
                f"{', '.join(plain(v) for v in values)} would run the same trials; its search range is search.{rule}"
            )


def trial_values(study) -> Iterable[dict[str, Any]]:
    """The settings of each combination of a study's further grid axes: each trial's own, checked one by one."""
    import itertools

    for combination in itertools.product(*(values for _, values in study.axes)):
        yield {**study.settings, **dict(zip((k for k, _ in study.axes), combination))}
