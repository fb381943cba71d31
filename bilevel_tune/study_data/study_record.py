"""A study as recorded (study.json, a Tune trial's config) → the fields of a `definition.Study`.

Records of every release load: 0.1's (before settings had sections), and
any written before a setting existed (it takes its default: what that run
ran). JSON's lists come back as the tuples the study holds.
"""

from __future__ import annotations

from typing import Any, Mapping

from bilevel_tune.study_data.settings import DEFAULTS, LEGACY_BUDGET_KEYS


def recorded_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """`Study`'s fields from its record; `full_budget` stays a dict of `definition.Budget`'s fields."""
    data = dict(data)
    if "values" not in data:
        data = _from_release_0_1(data)
    data["generations"] = frozen(data["generations"])
    recorded = {k: frozen(v) for k, v in data["values"]}
    data["values"] = tuple((k, recorded.get(k, DEFAULTS[k])) for k in DEFAULTS)
    data["axes"] = tuple((k, tuple(frozen(x) for x in v)) for k, v in data.get("axes", ()))
    data["budgets"] = tuple(
        (name, tuple((k, frozen(v)) for k, v in changes)) for name, changes in data.get("budgets", ())
    )
    if data.get("full_budget") is not None:
        budget = {k: v for k, v in data["full_budget"].items() if k not in LEGACY_BUDGET_KEYS}
        data["full_budget"] = {**budget, "generations": frozen(budget["generations"])}
    for key in ("populations", "seeds"):
        data[key] = tuple(data[key])
    data["optimize_params"] = tuple(tuple(p) for p in data["optimize_params"])
    data["overrides"] = tuple((k, frozen(v)) for k, v in data.get("overrides", ()))
    return data


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


def frozen(value):
    """JSON's lists as tuples, nested."""
    return tuple(frozen(v) for v in value) if isinstance(value, list) else value
