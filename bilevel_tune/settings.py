"""Every setting of a study, declared once: its key, default, range and meaning.

A setting is named `section.name` — its study file section and key:

    [world]     farms, horizon, smoothing,              the fresh-water world (docs/world.md)
                release_share, rain_probability, rain_mean_mm, farm_area_km2
    [network]   hidden                                  the policy and value networks (APPO)
    [appo]      lr, discount, entropy_coeff, grad_clip, RLlib APPO's own settings
                vtrace_clip_rho_threshold, vtrace_clip_pg_rho_threshold, fragments_per_batch
    [es]        sigma, lr, sigma_lr, sigma_decay, sigma_min, sigma_max, shaping, grad_clip
    [objective] econ_weight, sus_weight
    [rules]     the six rules' fixed values, physical (docs/world.md)
    [budget]    inner_iters, eval_episodes, final_eval_seeds (and generations, per population)
    [summary]   ceiling, tol

`check` holds a value to its range and returns it typed, or raises a
`SettingError` whose one line names the key, the value and the range. Any
setting can be a grid axis; `inner` marks those that change what the inner
loop computes (a rules scan is crossed with those), `appo` those only the
APPO loops read. Plain Python: no Ray, no numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bilevel_tune.hints import unknown_name
from bilevel_tune.world.basin import WorldConfig
from bilevel_tune.world.rules import RULE_SPECS

SHAPINGS = ("zscore", "centered_rank")


class SettingError(ValueError):
    """A setting that is unknown or out of its range; the message is one line."""


@dataclass(frozen=True)
class Setting:
    key: str
    default: Any
    kind: str  # "int", "float", "choice" or "layers" (a non-empty list of positive integers)
    doc: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False  # low itself excluded
    choices: tuple[str, ...] = ()
    inner: bool = True  # changes what the inner loop computes
    appo: bool = False  # read by the APPO loops only

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split(".", 1)[1]

    @property
    def allowed(self) -> str:
        """The range, as the error line and the docs state it."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "layers":
            return "a non-empty list of layer sizes ≥ 1"
        what = "an integer" if self.kind == "int" else "a number"
        if self.low is not None and self.high is not None:
            return f"{what} in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{what} {'>' if self.open_low else '≥'} {self.low:g}"
        return what

    def check(self, value: Any, where: str = "") -> Any:
        """The value, typed, if it is in range; SettingError naming key, value and range otherwise."""
        ok, typed = self._typed(value)
        if ok and self.kind in ("int", "float"):
            ok = (self.low is None or typed > self.low or (typed == self.low and not self.open_low)) and (
                self.high is None or typed <= self.high
            )
        if not ok:
            prefix = f"{where}: " if where else ""
            raise SettingError(f"{prefix}{self.key}={value!r} must be {self.allowed}")
        return typed

    def parse(self, text: str, where: str = "") -> Any:
        """A command-line value (`--set key=text`, `--grid key=a,b`), checked."""
        text = text.strip()
        if self.kind == "int":
            value: Any = _number(text, int)
        elif self.kind == "float":
            value = _number(text, float)
        elif self.kind == "layers":
            value = [_number(part, int) for part in text.split(",") if part.strip()] if text else []
        else:
            value = text
        return self.check(value, where)

    def _typed(self, value: Any) -> tuple[bool, Any]:
        if self.kind == "choice":
            return value in self.choices, value
        if self.kind == "layers":
            ok = isinstance(value, (list, tuple)) and len(value) > 0
            ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
            return ok, tuple(value) if ok else value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, value
        if self.kind == "int":
            return isinstance(value, int), value
        return math.isfinite(value), float(value)


def _number(text: str, kind):
    try:
        return kind(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            return text
        return int(as_float) if kind is int and as_float.is_integer() else as_float


SETTINGS: tuple[Setting, ...] = (
    Setting("world.farms", 5, "int", "farms per lake", low=1),
    Setting("world.horizon", 150, "int", "days per season", low=1),
    Setting("world.smoothing", 0.0, "float", "width of the quota ramp's smoothing (0: the hard ramp)", low=0),
    Setting(
        "world.release_share",
        WorldConfig.release_share,
        "float",
        "an ordinary day's outflow over inflow (1: pressure saturated at 1)",
        low=0,
        high=1,
    ),
    Setting("world.rain_probability", WorldConfig.rain_probability, "float", "share of days with rain", low=0, high=1),
    Setting("world.rain_mean_mm", WorldConfig.rain_mean_mm, "float", "mean rain of a wet day (mm)", low=0),
    Setting(
        "world.farm_area_km2",
        WorldConfig.farm_area_km2,
        "float",
        "irrigated area of a lake's farms, all together (km²): their demand against the lake",
        low=0,
        open_low=True,
    ),
    Setting("network.hidden", (256, 256), "layers", "hidden layer sizes of the policy and value networks", appo=True),
    Setting("appo.lr", 1e-3, "float", "Adam's learning rate", low=0, open_low=True, high=1, appo=True),
    Setting("appo.discount", 0.99, "float", "the farms' discount γ", low=0, high=1, appo=True),
    Setting("appo.entropy_coeff", 0.001, "float", "weight of the entropy bonus", low=0, high=1, appo=True),
    Setting(
        "appo.grad_clip", 40.0, "float", "global gradient-norm clip, per candidate", low=0, open_low=True, appo=True
    ),
    Setting(
        "appo.vtrace_clip_rho_threshold",
        1.0,
        "float",
        "V-trace's clip of the value targets' IS ratios",
        low=0,
        open_low=True,
        appo=True,
    ),  # fmt: skip
    Setting(
        "appo.vtrace_clip_pg_rho_threshold",
        1.0,
        "float",
        "V-trace's clip of the policy gradient's IS ratios",
        low=0,
        open_low=True,
        appo=True,
    ),  # fmt: skip
    Setting(
        "appo.fragments_per_batch",
        1,
        "int",
        "seasons of the whole block in one training batch (a train step's sample)",
        low=1,
        appo=True,
    ),  # fmt: skip
    Setting("es.sigma", 0.15, "float", "initial ES step size σ, logit units", low=0, open_low=True, inner=False),
    Setting("es.lr", 0.10, "float", "ES learning rate of the mean", low=0, open_low=True, inner=False),
    Setting(
        "es.sigma_lr",
        0.02,
        "float",
        "how fast σ adapts (γ = sigma_decay ** sigma_lr)",
        low=0,
        open_low=True,
        inner=False,
    ),
    Setting("es.sigma_decay", 0.99, "float", "σ's factor base", low=0, open_low=True, high=1, inner=False),
    Setting("es.sigma_min", 0.01, "float", "σ's lower bound", low=0, open_low=True, inner=False),
    Setting("es.sigma_max", 0.25, "float", "σ's upper bound", low=0, open_low=True, inner=False),
    Setting("es.shaping", "zscore", "choice", "fitness shaping of population ≥ 2", choices=SHAPINGS, inner=False),
    Setting("es.grad_clip", 5.0, "float", "norm clip of the ES gradient", low=0, open_low=True, inner=False),
    Setting("objective.econ_weight", 1.0, "float", "weight of the farms' mean reward", low=0),
    Setting("objective.sus_weight", 0.0, "float", "weight of the lake's sustainability", low=0),
    *(
        Setting(f"rules.{r.name}", r.default, "float", r.meaning + " (fixed value, physical)", low=r.low, high=r.high)
        for r in RULE_SPECS
    ),
    Setting("budget.inner_iters", 50, "int", "K: APPO train() calls per generation", low=1),
    Setting("budget.eval_episodes", 1, "int", "evaluation seasons per candidate per generation", low=1),
    Setting("budget.final_eval_seeds", 3, "int", "fresh seeds of the final re-evaluation", low=0),
    Setting("summary.ceiling", 0.25, "float", "the objective value the ceiling verdict looks for", inner=False),
    Setting("summary.tol", 1e-4, "float", "how close to the ceiling counts as at it", low=0, inner=False),
)
BY_KEY = {s.key: s for s in SETTINGS}
SECTIONS = tuple(dict.fromkeys(s.section for s in SETTINGS))
DEFAULTS = {s.key: s.default for s in SETTINGS}
RULE_ALIASES = {
    r.name: f"rules.{r.name}" for r in RULE_SPECS
}  # `--set fixed_quota=0.9` = `--set rules.fixed_quota=0.9`
LEGACY_BUDGET_KEYS = {"horizon": "world.horizon", "num_farms": "world.farms", "hidden": "network.hidden"}  # before 0.2


def setting(key: str, where: str = "") -> Setting:
    """The setting named `key` (a bare rule name is its rules.* alias); SettingError with a "did you mean"."""
    key = RULE_ALIASES.get(key, key)
    if key not in BY_KEY:
        section = key.partition(".")[0]
        allowed = [k for k in BY_KEY if k.startswith(section + ".")]  # its section's, if it names one
        if not allowed:
            allowed = [*BY_KEY, *RULE_ALIASES]  # a bare name: perhaps a rule's
        raise SettingError(unknown_name("setting", key, allowed, where))
    return BY_KEY[key]


def short_name(key: str) -> str:
    """The part of a key a trial name carries: `es.sigma` → `sigma`."""
    return key.split(".", 1)[-1]


def plain(value: Any, sep: str = ",") -> str:
    """A value as a label or a trial name shows it: 0.05, 0.0003, 64,64 (a trial name joins lists with "-")."""
    if isinstance(value, (list, tuple)):
        return sep.join(plain(v, sep) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def shown(value: Any) -> str:
    """A value as the user gave it (0.00037, not 3.7e-04): the dry run, study.json, the summary."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return repr(value) if isinstance(value, float) else str(value)


def describe(values: dict[str, Any], appo_loop: bool) -> list[str]:
    """One line per section: its settings as run; a loop that is not APPO is told it ignores the APPO ones."""
    lines = []
    for section in SECTIONS:
        items = [(k, v) for k, v in values.items() if k.startswith(section + ".")]
        if not items:
            continue
        text = ", ".join(f"{k.partition('.')[2]} {shown(v)}" for k, v in items)
        ignored = not appo_loop and all(BY_KEY[k].appo for k, _ in items if k in BY_KEY)
        lines.append(f"  [{section}] {text}{' (not read by this inner loop)' if ignored else ''}")
    return lines
