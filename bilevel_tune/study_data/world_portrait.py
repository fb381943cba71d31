"""A world as a run folder keeps it: what its report needs of the world, written into study.json at the run's start.

A study names its world by a built-in name or as `module:Class`; reading the study back rebuilds its settings
table, which imports that class. A shipped folder outlives the module (a world tried in a scratch file, a package
not installed where the folder is read), so the run records its world's *portrait* — rule names, ranges, meanings
and short names, the [world] and [objective] settings with their defaults and ranges, the ceiling, the summary's
diagnostics and scan terms, and the regime line of the study as run — and a reader that cannot import the world
reads the portrait instead (`settings.settings_table`). Nothing here runs a world: a portrait cannot step one.

    {"kind": "mymodule:Herders", "rules": [{"name": "tax", "low": 0.0, "span": 1.0, ...}], "settings": [...], ...}
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, Mapping

from bilevel_tune.base.knobs import KNOB, Knob, check_knobs, knob, knob_fields
from bilevel_tune.worlds.contract import RuleSpec

PORTRAIT_KEY = "world"  # study.json's key for it


def portrait(table, regime: str | None) -> dict[str, Any]:
    """A settings table's world (`settings.SettingsTable`); `regime`: the study's regime line, if any (plain Python:
    `Study.world_portrait` makes it JSON)."""
    return {
        "kind": table.world,
        "rules": [dataclasses.asdict(spec) for spec in table.rule_specs],
        "plain_search": list(table.mechanisms.plain),
        "settings": _fields(table.section_classes["world"]),
        "objective": _fields(table.section_classes["objective"]),
        "ceiling": table.ceiling,
        "summary_diagnostics": table.summary_diagnostics,
        "scan_terms": list(table.scan_terms),
        "regime": regime,
    }


def portrayed(recorded: Mapping[str, Any]) -> SimpleNamespace:
    """The world a portrait describes, as far as a settings table reads one: no `reset`, no `step`."""
    name = str(recorded["kind"]).rpartition(":")[2].replace("-", "_") or "world"
    regime = recorded.get("regime")
    return SimpleNamespace(
        name=name,
        rule_specs=tuple(RuleSpec(**{**rule, "limits": _tuple(rule.get("limits"))}) for rule in recorded["rules"]),
        plain_search=tuple(recorded.get("plain_search", ())),
        settings_class=_section_class(f"{name}_settings", recorded["settings"]),
        objective_class=_section_class(f"{name}_objective", recorded["objective"]),
        ceiling=recorded.get("ceiling"),
        summary_diagnostics=_tuple(recorded.get("summary_diagnostics")),
        scan_terms=tuple(recorded.get("scan_terms", ())),
        regime=(lambda settings, rules: regime) if regime else None,  # the line of the study as run, recorded
    )


def _fields(cls) -> list[dict[str, Any]]:
    return [
        {"field": f.name, "default": f.default, "knob": dataclasses.asdict(f.metadata[KNOB])} for f in knob_fields(cls)
    ]


def _section_class(name: str, fields: list[Mapping[str, Any]]) -> type:
    """A frozen dataclass of the recorded knobs, each checked in its recorded range as the world's own class does."""
    specs = []
    for recorded in fields:
        meaning = dict(recorded["knob"])
        meaning["choices"] = tuple(meaning.get("choices", ()))
        doc = meaning.pop("doc")
        specs.append((recorded["field"], Any, knob(_tuple(recorded["default"]), doc, **_known(meaning))))
    return dataclasses.make_dataclass(
        name, specs, frozen=True, kw_only=True, namespace={"__post_init__": lambda self: check_knobs(self)}
    )


def _known(meaning: dict[str, Any]) -> dict[str, Any]:
    """A recorded knob's flags that this release's `Knob` has (a portrait from a later one may hold more)."""
    names = {f.name for f in dataclasses.fields(Knob)}
    return {k: v for k, v in meaning.items() if k in names}


def _tuple(value):
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value
