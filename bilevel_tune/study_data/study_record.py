"""A study as recorded by an earlier release (study.json, a Tune trial's config) → today's record.

Today's record (`definition.Study.to_dict`) holds each section as a table of
its fields; 0.2 held every setting in one list of (key, value)
pairs, 0.1 had no sections at all. `current_record` brings any of them to
today's shape; a setting added since a record was made is absent from it
and takes its default in `Study.from_dict` (what that run ran). JSON's lists
come back as the tuples the study holds.
"""

from __future__ import annotations

from typing import Any, Mapping

from bilevel_tune.study_data.settings import LEGACY_BUDGET_KEYS, settings_table
from bilevel_tune.worlds import DEFAULT_WORLD


def _old_table():
    """Records made before studies named a world (0.1, 0.2) are the default world's (fresh water's)."""
    return settings_table(DEFAULT_WORLD)


BLOCK_STREAMS = "block"  # how a block drew its random numbers before lakes drew their own: a run from then resumes on it
OLD_CEILING = 0.25  # summary.ceiling's default before [decide] came (0.3): fresh water's, then set for every world


def current_record(data: Mapping[str, Any]) -> dict[str, Any]:
    """`Study`'s fields from its record, sections still tables of fields; `full_budget` a table of `Budget`'s."""
    data = dict(data)
    if "values" not in data and not isinstance(data.get("appo"), Mapping):
        data = _from_release_0_1(data)
    if "values" in data:
        data = _from_settings_list(data)
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
    data.setdefault("streams", BLOCK_STREAMS)  # a run begun before lakes drew their own goes on as it began
    summary = data.get("summary")
    if "decide" not in data and isinstance(summary, Mapping) and summary.get("ceiling") == OLD_CEILING:
        data["summary"] = {**summary, "ceiling": None}  # before 0.3 every study looked for 0.25: now its world's
    return data


def _from_settings_list(data: Mapping[str, Any]) -> dict[str, Any]:
    """A 0.2 record (fresh water's: the only world then): every setting in one list of (key, value), the generations
    beside it."""
    data = dict(data)
    table = _old_table()
    sections: dict[str, Any] = {section: {} for section in table.section_classes}
    pairs: dict[str, list] = {"rules": [], "search": []}
    for key, value in data.pop("values"):
        spec = table.by_key[key]
        if spec.section in pairs:
            pairs[spec.section].append((spec.name, value))
        else:
            sections[spec.section][spec.field_name] = value
    sections["budget"]["generations"] = data.pop("generations")
    return {**data, **sections, **pairs}


def _from_release_0_1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A 0.1 study.json: budgets held world and network fields; rules, objective, world, ES and summary were fields."""
    data = dict(data)
    budget = data.pop("budget")
    defaults = _old_table().defaults
    values = dict(defaults)
    values.update(
        {f"budget.{k}": budget[k] for k in ("inner_iters", "eval_episodes", "final_eval_seeds") if k in budget}
    )
    values.update({new: budget[old] for old, new in LEGACY_BUDGET_KEYS.items() if old in budget})
    values.update({f"rules.{k}": v for k, v in data.pop("rules", ())})
    values.update({f"es.{k}": v for k, v in data.pop("es", ())})
    values["objective.econ_weight"] = data.pop("econ_weight", 1.0)
    values["objective.sus_weight"] = data.pop("sus_weight", 0.0)
    values["world.smoothing"] = data.pop("smoothing", 0.0)
    values["summary.ceiling"] = data.pop("ceiling", defaults["summary.ceiling"])
    values["summary.tol"] = data.pop("tol", defaults["summary.tol"])
    data["generations"] = budget["generations"]
    data["values"] = [(k, values[k]) for k in defaults]
    data["budgets"] = [
        (name, [(LEGACY_BUDGET_KEYS.get(k, f"budget.{k}"), v) for k, v in b.items()])
        for name, b in data.get("budgets", ())
    ]
    return data


def frozen(value):
    """JSON's lists as tuples, nested."""
    return tuple(frozen(v) for v in value) if isinstance(value, list) else value
