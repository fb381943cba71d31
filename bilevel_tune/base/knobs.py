"""A setting declared once, on the field of the config that holds it.

    @dataclass(frozen=True)
    class AppoSettings:
        lr: float = knob(1e-3, "Adam's learning rate", low=0, open_low=True, high=1, appo=True)

`knob` is a dataclass field whose metadata carries the meaning and the range;
everything else is derived from it: the study's table of keys
(`settings.SETTINGS`), the one range check (`Setting.check`, also what a
config's `__post_init__` calls through `check_knobs`), `--set`/`--grid`
parsing, the docs table, the dry run's settings block. Plain Python: the
numpy core declares its own knobs (the world's) without knowing of studies.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from typing import Any, Mapping

KNOB = "bilevel_tune.knob"  # the metadata key of a field declared with `knob`


class StudyError(ValueError):
    """Bad study input (a study file, a command line, a record); the message is the one line the user sees."""


class SettingError(StudyError):
    """A setting that is unknown or out of its range."""


@dataclass(frozen=True)
class Knob:
    """A field's meaning and range: what `knob` records in its metadata."""

    doc: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False  # low itself excluded
    choices: tuple[str, ...] = ()
    inner: bool = True  # changes what the inner loop computes
    appo: bool = False  # read by the APPO loops only
    study_name: str | None = None  # its name in the study file when it differs from the field's (num_farms: farms)
    words: bool = False  # a list of names (a tuple of strings), not of numbers
    unset: str = ""  # what the setting means when left unset (its default None); "" when it must have a value
    integer: bool = False  # an optional setting (default None) whose value is an integer
    plugin: bool = False  # a choice that also takes a class of the user's, named `module:Class`
    options: bool = False  # a table of name = value (a flag, a number or a word), handed on as keyword arguments


def knob(default: Any, doc: str, **range_and_flags: Any) -> Any:
    """A dataclass field that is a study setting: its default, meaning and range, declared once."""
    return dataclasses.field(default=default, metadata={KNOB: Knob(doc, **range_and_flags)})


def _kind(default: Any, spec: Knob) -> str:
    if spec.options:
        return "options"
    if default is None:
        return "int" if spec.integer else "float"  # an optional number (`unset` says what none means)
    if isinstance(default, bool):
        return "bool"
    if spec.choices:
        return "choice"
    if spec.words:
        return "words"
    if isinstance(default, tuple):
        return "layers"
    return "int" if isinstance(default, int) and not isinstance(default, bool) else "float"


@dataclass(frozen=True)
class Setting(Knob):
    """A setting under its study-file key: its knob's meaning and range, its default and its kind."""

    key: str = dataclasses.field(kw_only=True)
    default: Any = dataclasses.field(kw_only=True)
    kind: str = dataclasses.field(
        kw_only=True
    )  # "int", "float", "bool", "choice", "layers" (a non-empty list of positive integers), "words" (a list of names),
    # "range" (two numbers, low < high, within [low, high] of the setting: a rule's search range) or "options" (a
    # table of name = value, kept as sorted (name, value) pairs)
    field: str = dataclasses.field(default="", kw_only=True)  # the config field it is declared on (its name when empty)

    @classmethod
    def of_field(cls, section: str, field: dataclasses.Field) -> "Setting":
        spec: Knob = field.metadata[KNOB]
        key = f"{section}.{spec.study_name or field.name}"
        kind = _kind(field.default, spec)
        return cls(**dataclasses.asdict(spec), key=key, default=field.default, kind=kind, field=field.name)

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split(".", 1)[1]

    @property
    def field_name(self) -> str:
        return self.field or self.name

    @property
    def allowed(self) -> str:
        """The range, as the error line and the docs state it."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices) + (", or module:Class" if self.plugin else "")
        if self.kind == "bool":
            return "true or false"
        if self.kind == "layers":
            return "a non-empty list of layer sizes ≥ 1"
        if self.kind == "words":
            return "a list of names"
        if self.kind == "options":
            return "a table of name = value, each value true/false, a number or a word"
        if self.kind == "range":
            return f"two numbers, low < high, within [{self.low:g}, {self.high:g}]"
        if self.unset:
            return f"{self._range_text()}, or none ({self.unset})"
        return self._range_text()

    def _range_text(self) -> str:
        what = "an integer" if self.kind == "int" else "a number"
        if self.low is not None and self.high is not None:
            return f"{what} in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{what} {'>' if self.open_low else '≥'} {self.low:g}"
        return what

    def check(self, value: Any, where: str = "", label: str | None = None, flag: str | None = None) -> Any:
        """The value, typed, if it is in range; SettingError naming it (`label`, else the key), the value and the range.

        `flag`: the command-line shorthand that spelled this setting (`--inner-iters`), named as the user typed it.
        """
        if value is None and self.unset:
            return None
        ok, typed = self._typed(value)
        if ok and self.kind == "range":
            ok = self.low - 1e-12 <= typed[0] < typed[1] <= self.high + 1e-12
        if ok and self.kind in ("int", "float"):
            ok = (self.low is None or typed > self.low or (typed == self.low and not self.open_low)) and (
                self.high is None or typed <= self.high
            )
        if not ok and flag:
            raise SettingError(f"{flag} {value!r} must be {self.allowed}")
        if not ok:
            prefix = f"{where}: " if where else ""
            raise SettingError(f"{prefix}{label or self.key}={value!r} must be {self.allowed}")
        return typed

    def parse(self, text: str, where: str = "", flag: str | None = None) -> Any:
        """A command-line value (`--set key=text`, `--grid key=a,b`), checked."""
        text = text.strip()
        if self.unset and text.lower() == "none":
            return None
        if self.kind == "int":
            value: Any = _number(text, int)
        elif self.kind == "float":
            value = _number(text, float)
        elif self.kind == "bool":
            value = BOOLEAN_WORDS.get(text.lower(), text)
        elif self.kind == "layers":
            value = [_number(part, int) for part in text.split(",") if part.strip()] if text else []
        elif self.kind == "words":
            value = [part.strip() for part in split_top(text) if part.strip()]
        elif self.kind == "range":
            value = [_number(part, float) for part in text.strip("[]").split(",") if part.strip()]
        elif self.kind == "options":
            value = _options(text)
        else:
            value = text
        return self.check(value, where, flag=flag)

    def _typed(self, value: Any) -> tuple[bool, Any]:
        if self.kind == "choice":
            named = self.plugin and isinstance(value, str) and value.count(":") == 1 and all(value.split(":"))
            return value in self.choices or named, value
        if self.kind == "bool":
            return isinstance(value, bool), value
        if self.kind == "layers":
            ok = isinstance(value, (list, tuple)) and len(value) > 0
            ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
            return ok, tuple(value) if ok else value
        if self.kind == "words":
            ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value)
            return ok, tuple(value) if ok else value
        if self.kind == "options":
            pairs = list(value.items()) if isinstance(value, Mapping) else value
            ok = isinstance(pairs, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs)
            ok = ok and all(isinstance(name, str) and name.isidentifier() and _scalar(v) for name, v in pairs)
            ok = ok and len({name for name, _ in pairs}) == len(pairs)
            return ok, tuple(sorted((name, v) for name, v in pairs)) if ok else value
        if self.kind == "range":
            ok = isinstance(value, (list, tuple)) and len(value) == 2
            ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
            return ok, (float(value[0]), float(value[1])) if ok else value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, value
        if self.kind == "int":
            return isinstance(value, int), value
        return math.isfinite(value), float(value)


BOOLEAN_WORDS = {"true": True, "false": False}  # --set key=true, as TOML writes a boolean


def split_top(text: str, separator: str = ",") -> list[str]:
    """`text` split at the separators outside brackets, braces and parentheses: 'appo(appo.lr=3e-4,
    network.hidden=[64,64]), ppo' → ['appo(appo.lr=3e-4, network.hidden=[64,64])', 'ppo']."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char in "([{") - (char in ")]}")
        if char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def _scalar(value: Any) -> bool:
    """A value an options table holds: a flag, a finite number or a word (what a keyword setting takes here)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (bool, int, str))


def _options(text: str) -> Any:
    """`--set key=name=value,name=value` (or TOML's inline table, braces and all) as {name: value}; each value read
    as TOML reads it (true, 4, 0.5, "word"), a bare word as itself; the text itself where it is no such table."""
    inner = text[1:-1] if text.startswith("{") and text.endswith("}") else text
    table = {}
    for part in (p.strip() for p in split_top(inner) if p.strip()):
        name, sep, raw = (s.strip() for s in part.partition("="))
        if not sep or not name or name in table:
            return text
        try:
            table[name] = tomllib.loads(f"value = {raw}")["value"]
        except tomllib.TOMLDecodeError:
            table[name] = raw
    return table


def _number(text: str, kind):
    try:
        return kind(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            return text
        return int(as_float) if kind is int and as_float.is_integer() else as_float


def knob_fields(cls) -> list[dataclasses.Field]:
    """The fields of a config class declared with `knob`, in order (inherited sections first)."""
    return [f for f in dataclasses.fields(cls) if KNOB in f.metadata]


def section_settings(section: str, cls) -> tuple[Setting, ...]:
    """A section's settings, from the knobs of the class that declares it."""
    return tuple(Setting.of_field(section, f) for f in knob_fields(cls))


def check_knobs(config) -> None:
    """A config's every knob in its range (the same check as a study's): ValueError naming the field otherwise."""
    for field in knob_fields(type(config)):
        Setting.of_field("", field).check(getattr(config, field.name), label=field.name)


def section_kwargs(values: Mapping[str, Any], section: str, cls) -> dict[str, Any]:
    """A config's keyword arguments from a study's `section.key` values: {field name: value}."""
    return {s.field_name: values[s.key] for s in section_settings(section, cls) if s.key in values}
