"""Every setting of a study: the table of keys, derived from the sections that declare them.

Each setting is declared once, as a `declared.knob` field of the config that
holds it (`sections`, and the world's `WorldConfig`); this module lists
them under their study-file keys. A setting is named `section.name` — its study file section and key:

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

`Setting.check` holds a value to its range and returns it typed, or raises
a `SettingError` whose one line names the key, the value and the range. Any
setting can be a grid axis; `inner` marks those that change what the inner
loop computes (a rules scan is crossed with those), `appo` those only the
APPO loops read. Plain Python: no Ray, no numpy arrays.
"""

from __future__ import annotations

from typing import Any

from bilevel_tune.study_data.declared import Setting, SettingError, section_settings
from bilevel_tune.study_data.hints import unknown_name
from bilevel_tune.study_data.sections import (
    AppoSettings,
    Budget,
    BudgetSettings,
    ESSettings,
    NetworkSettings,
    ObjectiveSettings,
    SummarySettings,
)
from bilevel_tune.world.basin import WorldConfig
from bilevel_tune.world.rules import RULE_SPECS

SETTINGS: tuple[Setting, ...] = (
    *section_settings("world", WorldConfig),
    *section_settings("network", NetworkSettings),
    *section_settings("appo", AppoSettings),
    *section_settings("es", ESSettings),
    *section_settings("objective", ObjectiveSettings),
    *(
        Setting(
            r.meaning + " (fixed value, physical)",
            r.low,
            r.high,
            key=f"rules.{r.name}",
            default=r.default,
            kind="float",
        )
        for r in RULE_SPECS
    ),
    *section_settings("budget", BudgetSettings),
    *section_settings("summary", SummarySettings),
)
BY_KEY = {s.key: s for s in SETTINGS}
SECTIONS = tuple(dict.fromkeys(s.section for s in SETTINGS))
DEFAULTS = {s.key: s.default for s in SETTINGS}
RULE_ALIASES = {
    r.name: f"rules.{r.name}" for r in RULE_SPECS
}  # `--set fixed_quota=0.9` = `--set rules.fixed_quota=0.9`
SECTION_CLASSES = {
    "world": WorldConfig,
    "network": NetworkSettings,
    "appo": AppoSettings,
    "es": ESSettings,
    "objective": ObjectiveSettings,
    "budget": Budget,
    "summary": SummarySettings,
}  # each section's typed dataclass; [rules] is held as (name, physical value) pairs
GENERATIONS = "budget.generations"  # [budget]'s one value that is not a knob: a count, or one per population
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


def section_value(sections, spec: Setting) -> Any:
    """A setting's value in an object holding the typed sections as attributes (a `definition.Study`)."""
    section = getattr(sections, spec.section)
    return dict(section)[spec.name] if spec.section == "rules" else getattr(section, spec.field_name)


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


def docs_table(settings: tuple[Setting, ...] = SETTINGS) -> str:
    """docs/study.md's table of every setting, as the declarations give it (a test keeps the page equal to it)."""
    rows = ["| key | default | allowed | what |", "|---|---|---|---|"]
    for s in settings:
        what = s.doc + (" (APPO loops only)" if s.appo else "")
        rows.append(f"| `{s.key}` | {shown(s.default)} | {s.allowed} | {what} |")
    return "\n".join(rows)
