"""What a command line changes in a study: each flag narrows or replaces a grid axis, or sets settings.

`overridden` returns the changed study with the changes recorded, in order,
in its `overrides` (the dry run, study.json and the summary show them).
`--outer-iters` is one generation count for every cell, `--inner-iters K`
the same as `--set budget.inner_iters=K`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from bilevel_tune.study_data.settings import GENERATIONS, RULE_SECTIONS, plain
from bilevel_tune.study_data.study_checks import (
    StudyError,
    check_axis,
    check_inner,
    check_int,
    check_params,
    check_population,
    check_scan,
    check_setting,
)

BUDGET_OVERRIDES = ("outer_iters", "inner_iters")
GRID_OVERRIDE = "grid "  # prefix of a --grid change in `overrides`


def overridden(
    study,
    populations=None,
    optimize_params=None,
    seeds=None,
    outer_iters=None,
    inner_iters=None,
    rules: Mapping[str, float] | None = None,
    inner: str | None = None,
    scan: int | None = None,
    learners: Sequence[str] | None = None,
    settings: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
    grid: Mapping[str, Sequence[Any]] | Sequence[tuple[str, Sequence[Any]]] | None = None,
):
    """The `definition.Study` as a command line changes it: `settings` fix settings (`--set`), `grid` crosses them."""
    original, changed = study, []
    replace = dataclasses.replace
    if populations is not None:
        study = replace(study, populations=tuple(check_population(p, "--population") for p in populations))
        changed.append(("population", study.populations))
    if optimize_params is not None:
        study = replace(study, optimize_params=(check_params(list(optimize_params), study.table),))
        changed.append(("optimize_params", study.optimize_params[0]))
    if seeds is not None:
        study = replace(study, seeds=tuple(check_int(s, "--seed", 0) for s in seeds))
        changed.append(("seed", study.seeds))
    if outer_iters is not None:
        study = with_settings(study, {GENERATIONS: check_int(outer_iters, "--outer-iters", 1)})
        changed.append(("outer_iters", outer_iters))
    if inner_iters is not None:  # a spelling of --set budget.inner_iters=K, checked by that setting's knob
        inner_iters = study.table.setting("budget.inner_iters").parse(str(inner_iters), flag="--inner-iters")
        study = with_settings(study, {"budget.inner_iters": inner_iters})
        changed.append(("inner_iters", inner_iters))
    fixed = [(study.table.rule_aliases.get(k, k), v) for k, v in dict(rules or {}).items()]
    fixed += list(dict(settings or {}).items())
    typed_settings = {}
    regridded = {check_axis(k, v, "--grid", study.table)[0] for k, v in dict(grid or {}).items()}  # re-crossed here
    for key, value in fixed:
        if key == GENERATIONS:
            raise StudyError("--set budget.generations: use --outer-iters N (one count for every cell)")
        full, typed = check_setting(key, value, "--set", text=isinstance(value, str), table=study.table)
        crossed = dict(study.axes).get(full)
        if crossed is not None and full not in regridded:
            shown = ",".join(plain(v) if not isinstance(v, (list, tuple)) else str(list(v)) for v in crossed)
            raise StudyError(
                f"--set {key}={value}: the study crosses {full} as a grid axis ({shown}), which would override it; "
                f"use --grid {full}={plain(typed) if not isinstance(typed, (list, tuple)) else value} to run that "
                "value alone"
            )
        typed_settings[full] = typed
        changed.append((full, typed))
    if typed_settings:  # together: settings that must agree (decide.test with decide.margin) are set at once
        study = with_settings(study, typed_settings)
    for key, values in dict(grid or {}).items():
        axis = check_axis(key, values, "--grid", study.table)
        study = replace(study, axes=tuple((k, v) for k, v in study.axes if k != axis[0]) + (axis,))
        changed.append((GRID_OVERRIDE + axis[0], axis[1]))
    if inner is not None:
        study = replace(study, inner=check_inner(inner, "--inner"))
        changed.append(("inner", inner))
    if scan is not None:
        study = replace(study, scan=check_scan(scan, "--scan"))
        changed.append(("scan", scan))
    if learners is not None:
        study = replace(study, final=replace(study.final, learners=tuple(learners)))
        changed.append(("learners", tuple(learners)))
    return replace(study, overrides=original.overrides + tuple(changed)).validate()


def with_settings(study, changes: Mapping[str, Any]):
    """The study with these settings changed (by key), e.g. one trial's further axes: checked where they entered."""
    changed: dict[str, dict[str, Any]] = {}
    for key, value in changes.items():
        spec = None if key == GENERATIONS else study.table.by_key[key]
        section, name = ("budget", "generations") if spec is None else (spec.section, spec.field_name)
        changed.setdefault(section, {})[name] = value
    replaced = {
        section: tuple({**dict(getattr(study, section)), **values}.items())
        if section in RULE_SECTIONS
        else dataclasses.replace(getattr(study, section), **values)
        for section, values in changed.items()
    }
    return dataclasses.replace(study, **replaced)


def for_cell(study, cell):
    """The study one trial runs: its cell's further axes' values set (`run_folder.Cell.extra`), no axes left."""
    return dataclasses.replace(with_settings(study, dict(cell.extra)), axes=())


def with_budget(study, name: str):
    """The study at one of its named budgets (`quick`): the settings that budget changes, applied."""
    budgets = dict(study.budgets)
    if name not in budgets:
        raise StudyError(f"study {study.name!r} has no budget {name!r}; it has: {', '.join(budgets) or 'none'}")
    return dataclasses.replace(with_settings(study, dict(budgets[name])), budget_name=name)


def budget_label(study) -> str:
    """The budget as run: its name and the command line's changes to it, e.g. 'quick, outer_iters=4'."""
    return ", ".join([study.budget_name, *(f"{k}={plain(v)}" for k, v in study.overrides if k in BUDGET_OVERRIDES)])


def overrides_label(study) -> str:
    """The command line's other changes (grid axes, settings, inner loop), e.g. 'population=16, appo.lr=0.0003'."""
    return ", ".join(f"{k}={plain(v)}" for k, v in study.overrides if k not in BUDGET_OVERRIDES)
