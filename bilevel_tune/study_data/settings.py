"""Every setting of a study: the table of keys, derived from the sections that declare them.

Each setting is declared once, as a `base.knobs.knob` field of the config that
holds it (`base.sections`, and the world's settings class); this module lists
them under their study-file keys, one `SettingsTable` per world: [world],
[objective], [rules] and [search] are the world's (`settings_table("fishery")`),
the other sections the runner's. A setting is named `section.name` — its
study file section and key; on the default world, fresh water:

    [world]     farms, horizon, smoothing,              the fresh-water world (docs/world.md)
                release_share, rain_probability, rain_mean_mm, farm_area_km2
    [network]   hidden                                  the policy and value networks (APPO)
    [appo]      lr, discount, entropy_coeff, grad_clip, RLlib APPO's own settings
                vtrace_clip_rho_threshold, vtrace_clip_pg_rho_threshold, fragments_per_batch
    [outer]     optimizer                               the outer optimiser: es, cma, bo, random, optuna or a
                                                        user's module:Class (core.outer)
    [es]        sigma, lr, sigma_lr, sigma_decay, sigma_min, sigma_max, shaping, grad_clip
    [cma]       sigma0                                  CMA-ES's settings
    [bo]        initial, raw_samples, restarts, mc_samples, acquisition, beta, noise   Bayesian optimisation's
    [optuna]    sampler, options                        an Optuna sampler's
    [objective] econ_weight, sus_weight
    [rules]     the six rules' fixed values, physical (docs/world.md)
    [search]    the range each rule is searched over, physical (default the campaign's map)
    [budget]    inner_iters, eval_episodes, final_eval_seeds, evaluations (and generations, per population)
    [summary]   ceiling, tol
    [decide]    test, alpha, seeds_per_stage, max_seeds, beta, compare, score, margin, equal_budget
                                                        how comparisons are decided (in stages): docs/verdicts.md
    [final]     learners                                held-out learners scoring each run's final rules
    [runtime]   pack                                    small populations' trials packed into one block (or off)

`Setting.check` holds a value to its range and returns it typed, or raises
a `SettingError` whose one line names the key, the value and the range. Any
setting can be a grid axis; `inner` marks those that change what the inner
loop computes (a rules scan is crossed with those), `appo` those only the
APPO loops read. Plain Python: no Ray, no numpy arrays.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

from bilevel_tune.base.hints import unknown_name
from bilevel_tune.base.knobs import Setting, SettingError, section_settings
from bilevel_tune.base.sections import (
    OPTIMIZER_SECTIONS,
    AppoSettings,
    Budget,
    DecideSettings,
    FinalSettings,
    NetworkSettings,
    OuterSettings,
    RuntimeSettings,
    SummarySettings,
)
from bilevel_tune.study_data import world_portrait
from bilevel_tune.worlds import DEFAULT_WORLD
from bilevel_tune.worlds.contract import Mechanisms

RULE_SECTIONS = ("rules", "search")  # held as (rule, value) pairs in the world's order, not as a dataclass
GENERATIONS = "budget.generations"  # [budget]'s one value that is not a knob: a count, or one per population
LEGACY_BUDGET_KEYS = {"horizon": "world.horizon", "num_farms": "world.farms", "hidden": "network.hidden"}  # before 0.2


class SettingsTable:
    """The settings of a study on one world: [world], [objective] and [rules] are the world's, the rest the runner's.

    `world` is the world's spec as a study names it (`fresh-water`, `fishery`, `module:Class`);
    `section_classes` each section's typed dataclass ([rules] is held as (name, physical value) pairs).
    """

    def __init__(self, world: str, world_class: type):
        self.world = world
        self.rule_specs = tuple(world_class.rule_specs)
        self.ceiling: float | None = getattr(world_class, "ceiling", None)  # the value its summary looks for
        self.regime = getattr(world_class, "regime", None)  # (settings, rules) -> one line; optional
        # what the summary's tables show of an outcome: a trial's best candidate (None: every number it holds), and
        # a scan point beside its objective and bound
        self.summary_diagnostics: tuple[str, ...] | None = getattr(world_class, "summary_diagnostics", None)
        self.scan_terms: tuple[str, ...] = tuple(getattr(world_class, "scan_terms", ()))
        self.mechanisms = Mechanisms.of(world_class)  # how its mechanisms are named: 1d, 2d-floor-risk
        self.section_classes: dict[str, type] = {
            "world": world_class.settings_class,
            "network": NetworkSettings,
            "appo": AppoSettings,
            "outer": OuterSettings,
            **OPTIMIZER_SECTIONS,
            "objective": world_class.objective_class,
            "budget": Budget,
            "summary": SummarySettings,
            "decide": DecideSettings,
            "final": FinalSettings,
            "runtime": RuntimeSettings,
        }
        rules = tuple(
            Setting(r.meaning + " (fixed value, physical)", *r.physical_limits, key=f"rules.{r.name}",
                    default=r.default, kind="float")
            for r in self.rule_specs
        )  # fmt: skip
        search = tuple(
            Setting(f"the range {r.name} is searched over, physical (its u in [0, 1] maps onto it)",
                    *r.physical_limits, key=f"search.{r.name}", default=(r.low, r.high), kind="range", inner=False)
            for r in self.rule_specs
        )  # fmt: skip
        self.settings: tuple[Setting, ...] = (
            *(s for name in ("world", "network", "appo", *OUTER_SECTIONS, "objective") for s in self._section(name)),
            *rules,
            *search,
            *self._section("budget"),
            *self._section("summary"),
            *self._section("decide"),
            *self._section("final"),
            *self._section("runtime"),
        )
        self.by_key = {s.key: s for s in self.settings}
        self.sections = tuple(dict.fromkeys(s.section for s in self.settings))
        self.defaults = {s.key: s.default for s in self.settings}
        # `--set fine=1` = `--set rules.fine=1`; `--set optimizer=bo` = `--set outer.optimizer=bo`
        self.rule_aliases = {**{r.name: f"rules.{r.name}" for r in self.rule_specs}, **SHORTHANDS}

    def _section(self, name: str) -> tuple[Setting, ...]:
        return section_settings(name, self.section_classes[name])

    def setting(self, key: str, where: str = "") -> Setting:
        """The setting named `key` (a bare rule name is its rules.* alias); SettingError with a "did you mean"."""
        key = self.rule_aliases.get(key, key)
        if key not in self.by_key:
            section = key.partition(".")[0]
            allowed = [k for k in self.by_key if k.startswith(section + ".")]  # its section's, if it names one
            if not allowed:
                allowed = [*self.by_key, *self.rule_aliases]  # a bare name: perhaps a rule's
            raise SettingError(unknown_name("setting", key, allowed, where))
        return self.by_key[key]

    def rule(self, name: str):
        """A rule's `RuleSpec` (its physical range and unit map), by name."""
        return next(r for r in self.rule_specs if r.name == name)

    def check_params(self, names: Sequence[str]) -> tuple[str, ...]:
        """One mechanism, the rules it searches (order kept): known, non-empty, no repeats; SettingError otherwise."""
        names, known = tuple(names), [r.name for r in self.rule_specs]
        if not names:
            raise SettingError(f"optimize_params is empty; choose from: {', '.join(known)}")
        for name in names:
            if name not in known:
                raise SettingError(unknown_name("rule", name, known))
        if len(set(names)) != len(names):
            raise SettingError(f"optimize_params {list(names)} repeats a rule")
        return names


@functools.lru_cache(maxsize=None)
def settings_table(world: str = DEFAULT_WORLD) -> SettingsTable:
    """The settings table of a study on this world (a built-in name or `module:Class`); WorldError if it is none.

    A world that does not import but whose portrait a run folder gave (`remember_portrait`) is read from that.
    """
    from bilevel_tune.worlds import load_world  # a user's world is imported only when a study names it
    from bilevel_tune.worlds.contract import WorldError

    try:
        return SettingsTable(world, load_world(world))
    except WorldError:
        if world not in _PORTRAITS:
            raise
        return SettingsTable(world, world_portrait.portrayed(_PORTRAITS[world]))


# the portraits of worlds read from run folders, by world: a reader that cannot import a folder's world reads it
# from the folder (a process reads one folder's world as one world: the first portrait given is kept)
_PORTRAITS: dict[str, Mapping[str, Any]] = {}


def remember_portrait(record: Mapping[str, Any]) -> None:
    """A run folder's study.json: its world's portrait, if it has one, kept for `settings_table`."""
    recorded = record.get(world_portrait.PORTRAIT_KEY)
    if isinstance(recorded, Mapping) and "kind" in recorded:
        _PORTRAITS.setdefault(recorded["kind"], recorded)


OPTIONAL_SECTIONS = ("final",)  # shown only when set: what a run adds after its trials
# a setting left at this value is not shown: a plan with no margin, or no evaluations budget, reads as before them
UNSET_UNSHOWN = {"decide.margin": None, "decide.margin_from": 1, "budget.evaluations": None, "summary.eps": None,
                 "decide.equal_budget": (), "bo.acquisition": "qLogNEI", "bo.beta": 0.2, "bo.noise": None,
                 "optuna.options": (), "runtime.pack": "auto"}
# The sections of every world's table, in order: [world], [objective] and [rules] are each world's own
OUTER_SECTIONS = ("outer", "es", "cma", "bo", "optuna")  # which optimiser searches the rules, then each one's own settings
SECTIONS = ("world", "network", "appo", *OUTER_SECTIONS, "objective", "rules", "search", "budget", "summary", "decide",
            "final", "runtime")  # fmt: skip
SHORTHANDS = {"optimizer": "outer.optimizer"}  # a setting a study file and --set/--grid may name without its section


def is_setting_key(name: str) -> bool:
    """Is this a setting's key (`section.name`) of any world's table: a column that holds a further axis."""
    section, dot, rest = str(name).partition(".")
    return bool(dot and rest) and section in SECTIONS  # every world's table has the same sections


def section_value(sections, spec: Setting) -> Any:
    """A setting's value in an object holding the typed sections as attributes (a `definition.Study`)."""
    section = getattr(sections, spec.section)
    return dict(section)[spec.name] if spec.section in RULE_SECTIONS else getattr(section, spec.field_name)


def short_name(key: str) -> str:
    """The part of a key a trial name carries: `es.sigma` → `sigma`."""
    return key.split(".", 1)[-1]


def plain(value: Any, sep: str = ",") -> str:
    """A value as a label or a trial name shows it: 0.05, 0.0003, 64,64 (a trial name joins lists with "-")."""
    if isinstance(value, (list, tuple)):
        return sep.join(plain(v, sep) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _is_table(value: Any) -> bool:
    """An options setting's value: (name, value) pairs, each name a word."""
    return bool(value) and isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], str) and p[0].isidentifier() for p in value
    )


def _toml(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else shown(value)


def shown(value: Any) -> str:
    """A value as the user gave it (0.00037, not 3.7e-04): the dry run, study.json, the summary; an options table
    as TOML writes one ({multivariate = true, n_startup_trials = 5})."""
    if _is_table(value):
        return "{" + ", ".join(f"{name} = {_toml(v)}" for name, v in value) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"  # as a study file writes it
    return repr(value) if isinstance(value, float) else str(value)


def describe(
    values: dict[str, Any], appo_loop: bool, table: SettingsTable, optimizers: Sequence[str] = ("es",)
) -> list[str]:
    """One line per section: its settings as run; a loop that is not APPO is told it ignores the APPO ones. Of the
    outer optimisers' sections only those of the `optimizers` the study runs; [outer] itself when it runs another
    than the ES (a study before other optimisers reads as it did)."""
    lines, by_key = [], table.by_key
    unrun = {s for s in OUTER_SECTIONS[1:] if s not in optimizers} | ({"outer"} if tuple(optimizers) == ("es",) else set())
    for section in (s for s in SECTIONS if s not in unrun):
        items = [(k, v) for k, v in values.items() if k.startswith(section + ".")]
        items = [(k, v) for k, v in items if k not in UNSET_UNSHOWN or v != UNSET_UNSHOWN[k]]
        if not items or (section in OPTIONAL_SECTIONS and all(v == () for _, v in items)):
            continue  # a step the run did not take ([final] without learners) is not a setting it ran with
        text = ", ".join(f"{k.partition('.')[2]} {shown(v)}" for k, v in items)
        ignored = not appo_loop and all(by_key[k].appo for k, _ in items if k in by_key)
        lines.append(f"  [{section}] {text}{' (not read by this inner loop)' if ignored else ''}")
    return lines


def default_shown(spec: Setting) -> str:
    """A setting's default as the docs table shows it: an empty options table as {}."""
    return "{}" if spec.kind == "options" else shown(spec.default)


def docs_table(world: str = DEFAULT_WORLD) -> str:
    """docs/study.md's table of every setting of a study on this world (the default one's), as the declarations
    give it (a test keeps the page equal to it)."""
    settings = settings_table(world).settings
    rows = ["| key | default | allowed | what |", "|---|---|---|---|"]
    for s in settings:
        what = s.doc + (" (APPO loops only)" if s.appo else "")
        rows.append(f"| `{s.key}` | {default_shown(s)} | {s.allowed} | {what} |")
    return "\n".join(rows)
