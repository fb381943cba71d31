"""Every run option, declared once: `RunOptions` and its fields' metadata make the CLI, the record and the resume line.

A run option is one field of `RunOptions`, declared with `option(...)`:
its flag, help text, group, parser and default, and for a study option how
it changes the study (`override`: the `study_overrides.overridden` argument, or
`budget` for a named budget) and what of the study it changes (`aspect`).
From that one table come

* the command line's flags and help (`build_parser`),
* the options a parse gives (`options_from`),
* study.json's record of a session (`session_record`),
* the printed resume command (`resume_command`),
* the check that a resume does not change the recorded study (`changed_on_resume`),
* the study as a fresh run defines it (`resolve_study`).

Adding an option is one `option(...)` field; tests/test_options.py proves
each of these picks a new one up.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bilevel_tune.study_data.definition import Study, StudyError, load_study
from bilevel_tune.study_data.study_overrides import overridden, with_budget
from bilevel_tune.tune_edge.tracking import WANDB_MODES

STUDY, RUN_FOLDER, SESSION = "study", "run folder", "session"
GROUPS = {
    STUDY: "the study (a new run; --resume keeps the recorded one)",
    RUN_FOLDER: "the run folder",
    SESSION: "this session",
}
DEFAULT_RESULTS = "results"


class UsageError(Exception):
    """Bad input: printed as one line, exit code 2, nothing written."""


# -- value parsers: one line naming the flag ------------------------------------------------------
def _int_list(flag: str) -> Callable[[str], tuple[int, ...]]:
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            values = ()
        if not values:
            raise argparse.ArgumentTypeError(f"{flag} {text!r} must be comma-separated integers, e.g. 1,16")
        return values

    return parse


def _positive_int(flag: str) -> Callable[[str], int]:
    return _positive(flag, int, "an integer ≥ 1", lambda value: value >= 1)


def _positive_number(flag: str) -> Callable[[str], float]:
    return _positive(flag, float, "a number > 0", lambda value: 0 < value < float("inf"))


def _positive(flag: str, kind: type, what: str, allowed: Callable[[Any], bool]) -> Callable[[str], Any]:
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} {text!r} must be {what}") from None
        if not allowed(value):
            raise argparse.ArgumentTypeError(f"{flag} {text} must be {what.replace('an integer ', '')}")
        return value

    return parse


def _integer(flag: str, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return int(text)  # the range is the study definition's to check, as for a study file's value
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} {text!r} must be {what}") from None

    return parse


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _assignment(flag: str, example: str) -> Callable[[str], tuple[str, str]]:
    def parse(text: str) -> tuple[str, str]:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"{flag} {text!r} must look like key=value, e.g. {example}")
        return key.strip(), value.strip()

    return parse


def _learners(text: str) -> tuple[str, ...]:
    """A comma-separated list of learners; commas inside a learner's parentheses are its settings'."""
    from bilevel_tune.base.knobs import split_top

    values = tuple(part.strip() for part in split_top(text) if part.strip())
    if not values:
        raise argparse.ArgumentTypeError(f"--learners {text!r} must name at least one learner, e.g. ppo,analytic")
    return values


def _address(text: str) -> str:
    if text == "auto" or text.startswith("ray://"):
        return text
    host, sep, port = text.rpartition(":")
    if not (sep and host and port.isdigit()):
        raise argparse.ArgumentTypeError(f"--address {text!r} must be host:port, 'auto' or ray://host:port")
    return text


def _host(text: str) -> str:
    address = text.strip("[]")
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        pass
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", text):
        raise argparse.ArgumentTypeError(
            f"--dashboard-host {text!r} must be a host name or an IP address, e.g. 0.0.0.0"
        )
    return text


def option(
    flag: str | None,
    help: str,
    group: str,
    default: Any = None,
    *,
    parse: Callable[[str], Any] | None = None,
    action: str | None = None,
    metavar: str | None = None,
    choices: tuple | None = None,
    override: str | None = None,
    aspect: Callable[[Study], Any] | None = None,
    resumes: bool = True,
) -> Any:
    """A RunOptions field with its command-line and bookkeeping metadata.

    `resumes`: a session option the printed resume command carries (not a one-off like --recalibrate).
    """
    metadata = dict(
        flag=flag, help=help, group=group, parse=parse, action=action, metavar=metavar, choices=choices,
        override=override, aspect=aspect, resumes=resumes,
    )  # fmt: skip
    if action == "append":
        return field(default=(), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class RunOptions:
    """Everything a run can be told; the CLI builds one, tests and benchmarks too."""

    study: str = option(None, "a built-in study's name, or a path to a .toml file", STUDY)
    # the study: narrow or replace its axes and budget, set or cross settings (a fresh run only)
    budget: str | None = option(
        "--budget", "a named budget of the study file (--quick = --budget quick)", STUDY, override="budget",
        aspect=lambda s: (s.budget_name, s.budget, s.settings),
    )  # fmt: skip
    populations: tuple[int, ...] | None = option(
        "--population", "population axis, e.g. 1,16", STUDY, parse=_int_list("--population"),
        override="populations", aspect=lambda s: s.populations,
    )  # fmt: skip
    optimize_params: tuple[str, ...] | None = option(
        "--optimize-params", "the searched rules, e.g. min_demand_frac,fixed_quota", STUDY, parse=_names,
        override="optimize_params", aspect=lambda s: s.optimize_params,
    )  # fmt: skip
    seeds: tuple[int, ...] | None = option(
        "--seed", "seed axis, e.g. 42,7", STUDY, parse=_int_list("--seed"), override="seeds", aspect=lambda s: s.seeds
    )
    outer_iters: int | None = option(
        "--outer-iters", "ES generations, every cell", STUDY, parse=_positive_int("--outer-iters"),
        override="outer_iters", aspect=lambda s: s.budget.generations,
    )  # fmt: skip
    inner_iters: str | int | None = option(  # the text as given: budget.inner_iters' knob checks it
        "--inner-iters", "APPO train() calls per generation (= --set budget.inner_iters=K)", STUDY,
        override="inner_iters", aspect=lambda s: s.budget.inner_iters,
    )  # fmt: skip
    settings: tuple[tuple[str, str], ...] = option(
        "--set", "fix a setting, e.g. appo.lr=3e-4, world.horizon=60, or a rule by its name: fixed_quota=0.9", STUDY,
        parse=_assignment("--set", "appo.lr=3e-4"), action="append", metavar="KEY=VALUE", override="settings",
        aspect=lambda s: s.settings,
    )  # fmt: skip
    grid: tuple[tuple[str, str], ...] = option(
        "--grid", "cross a setting as a further grid axis, e.g. es.sigma=0.05,0.15", STUDY,
        parse=_assignment("--grid", "es.sigma=0.05,0.15"), action="append", metavar="KEY=V1,V2", override="grid",
        aspect=lambda s: s.axes,
    )  # fmt: skip
    inner: str | None = option(
        "--inner",
        "inner loop: appo (real RLlib APPO), appo-multiagent (the same, RLlib's per-agent path), analytic (fast "
        "stand-in) or package.module:Class",
        STUDY, override="inner", aspect=lambda s: s.inner,
    )  # fmt: skip
    scan: int | None = option(
        "--scan", "also scan the searched rules on a grid: N points for a 1-D mechanism, N × N for 2-D, per seed",
        STUDY, parse=_integer("--scan", "an integer ≥ 2 (grid points per searched rule)"), metavar="N",
        override="scan", aspect=lambda s: s.scan,
    )  # fmt: skip
    learners: tuple[str, ...] | None = option(
        "--learners",
        "held-out learners that also score every trial's final rules and its status quo ([final] learners; with "
        "--reevaluate, on a finished run): analytic, ppo, frozen, appo(appo.lr=3e-4), module:Class",
        STUDY, parse=_learners, override="learners", aspect=lambda s: s.final.learners,
    )  # fmt: skip
    # the run folder
    results: str = option(
        "--results", "results root, a folder every Ray node sees (default: results/)", RUN_FOLDER, DEFAULT_RESULTS
    )
    name: str | None = option("--name", "run folder name (default: <study>-<UTC time>)", RUN_FOLDER)
    resume: bool = option(
        "--resume", "continue the latest run of this study (or --name)", RUN_FOLDER, False, action="store_true"
    )
    until_decided: bool = option(
        "--until-decided",
        "run the study in stages: after each, decide its comparisons ([decide]) and add seeds to the cells "
        "of those still open, until all are decided or the cells hold [decide] max_seeds",
        SESSION, False, action="store_true",
    )  # fmt: skip
    extend_plan: int | None = option(
        "--extend-plan",
        "with --resume --until-decided: declare a larger plan, N seeds per cell at most, for a run whose own ended "
        "with comparisons undecided; every look is replayed under it (docs/verdicts.md)",
        SESSION, parse=_positive_int("--extend-plan"), metavar="N", resumes=False,
    )  # fmt: skip
    declare_margin: float | None = option(
        "--declare-margin",
        "with --resume: declare the smallest difference that matters ([decide] margin) before the run's next look; "
        "it decides from that look on, the looks taken keep their answers (docs/verdicts.md)",
        SESSION, parse=_positive_number("--declare-margin"), metavar="X", resumes=False,
    )  # fmt: skip
    # this session: where and how it runs
    address: str | None = option(
        "--address", "join a Ray cluster: host:port or auto (default: a Ray of its own; RAY_ADDRESS is honoured)",
        SESSION, parse=_address,
    )  # fmt: skip
    num_cpus: int | None = option(
        "--num-cpus", "CPUs of the study's own Ray (default: all cores)", SESSION, parse=_positive_int("--num-cpus")
    )
    cpus_per_trial: int | None = option(
        "--cpus-per-trial", "inner-loop shards (CPUs) per trial (default: planned)", SESSION,
        parse=_positive_int("--cpus-per-trial"),
    )  # fmt: skip
    max_concurrent: int | None = option(
        "--max-concurrent", "trials at once (default: as CPUs allow)", SESSION, parse=_positive_int("--max-concurrent")
    )
    node_wait: int = option(
        "--node-wait",
        "seconds a trial that no longer fits the cluster (a node was lost) waits for room before the study stops, "
        "resumable (default 20; on an autoscaling cluster, the minutes a new node takes)",
        SESSION, 20, parse=_positive_int("--node-wait"),
    )  # fmt: skip
    max_failures: int = option(
        "--max-failures",
        "retries of a failed trial from its checkpoint",
        SESSION,
        3,
        parse=_integer("--max-failures", "an integer"),
    )
    thread_cap: int = option(
        "--thread-cap", "BLAS/OpenMP/torch threads per process (default 1)", SESSION, 1,
        parse=_positive_int("--thread-cap"),
    )  # fmt: skip
    wandb: str = option("--wandb", "auto: online with credentials, else offline", SESSION, "auto", choices=WANDB_MODES)
    dashboard: bool = option(
        "--dashboard",
        "serve TensorBoard on the run's curves and start the Ray Dashboard while the study runs; print both URLs",
        SESSION, False, action="store_true",
    )  # fmt: skip
    dashboard_host: str | None = option(
        "--dashboard-host",
        "where --dashboard's servers bind (default 127.0.0.1; 0.0.0.0 for every interface); implies --dashboard",
        SESSION, parse=_host,
    )  # fmt: skip
    recalibrate: bool = option(
        "--recalibrate", "measure this machine's throughput again for the plan", SESSION, False, action="store_true",
        resumes=False,
    )  # fmt: skip
    command: str = option(
        None, "how the user invoked the study, for the resume line", SESSION, "python -m bilevel_tune.study"
    )

    def __post_init__(self):
        if self.dashboard_host is not None and not self.dashboard:  # --dashboard-host implies --dashboard
            object.__setattr__(self, "dashboard", True)


def fields_of(options_class: type = RunOptions, group: str | None = None) -> list[dataclasses.Field]:
    """The options with a flag (of one group)."""
    return [
        f
        for f in dataclasses.fields(options_class)
        if f.metadata.get("flag") and (group is None or f.metadata["group"] == group)
    ]


# -- the command line --------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(message)


def build_parser(prog: str, description: str, options_class: type = RunOptions) -> argparse.ArgumentParser:
    """The study CLI's parser: a flag per option, in its group; --quick, --list and --dry-run beside them."""
    parser = _Parser(prog=prog, description=description)
    parser.add_argument("study", nargs="?", help=dataclasses.fields(options_class)[0].metadata["help"])
    groups = {key: parser.add_argument_group(title) for key, title in GROUPS.items()}
    groups[STUDY].add_argument(
        "--quick", action="store_true", help="the study's `quick` budget (minutes; smoke verdicts)"
    )
    for f in fields_of(options_class):
        m = f.metadata
        kwargs: dict[str, Any] = {"dest": f.name, "help": m["help"]}
        if m["action"] == "store_true":
            kwargs["action"] = "store_true"
        else:
            kwargs.update(type=m["parse"] or str, default=None if m["action"] == "append" else f.default)
            if m["action"] == "append":
                kwargs["action"] = "append"
            for key in ("metavar", "choices"):
                if m[key]:
                    kwargs[key] = m[key]
        groups[m["group"]].add_argument(m["flag"], **kwargs)
    parser.add_argument("--list", action="store_true", help="list the studies and their budgets")
    parser.add_argument(
        "--reevaluate", metavar="RUN_DIR", type=Path,
        help="score a finished run (a run folder, or a shipped one under docs/results/) with --learners, from its "
        "recorded final rules, and rebuild its summary; the ES is not run again (resumable)",
    )  # fmt: skip
    parser.add_argument(
        "--final-seeds", metavar="N", type=_positive_int("--final-seeds"),
        help="with --reevaluate: retrain each trial's final rules (best-so-far and search mean) on its first N final "
        "seeds, the recorded ones first, into finals.csv (the recorded decisions keep their scores)",
    )  # fmt: skip
    parser.add_argument(
        "--at-evaluations", metavar="E1,E2", dest="at_evaluations",
        help="with --reevaluate: retrain each trial's incumbent after E evaluations (counts, or fractions of its "
        "budget: 1/8,1/4,1/2,1000) on the run's final seeds, into anytime.csv",
    )  # fmt: skip
    parser.add_argument(
        "--status", metavar="RUN_DIR", type=Path,
        help="where a run stands, read from its folder alone (while it runs too): its stage and last look, who holds "
        "it, each trial's generation, and when the stage's look comes at the trials' pace; starts nothing",
    )  # fmt: skip
    parser.add_argument(
        "--dry-run", action="store_true", help="print the grid, the CPU plan and a calibrated ETA; run nothing"
    )
    parser.add_argument(
        "--pilot", metavar="RUN_DIR", type=Path,
        help="with --dry-run: plan from a finished run of this study's world (its final scores seed by seed and "
        "its anytime scores): the designs that reach power 0.8 at its effects, the cheapest as study-file lines",
    )  # fmt: skip
    return parser


def options_from(args: argparse.Namespace, command: str, options_class: type = RunOptions) -> RunOptions:
    if args.quick and args.budget and args.budget != "quick":
        raise UsageError(f"--quick and --budget {args.budget} disagree; give one")
    values = {f.name: getattr(args, f.name) for f in fields_of(options_class)}
    values.update(
        {
            name: tuple(values[name] or ())
            for name in values
            if _field(options_class, name).metadata["action"] == "append"
        }
    )
    if args.quick:
        values["budget"] = "quick"
    return options_class(study=args.study, **values, command=command)


def _field(options_class: type, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(options_class) if f.name == name)


# -- the study a run asks for, and whether a resume would change it -----------------------------------
def resolve_study(options: RunOptions) -> Study:
    """The study as this fresh run defines it: the file, a named budget, then the other study options."""
    study = load_study(options.study)
    if options.budget:
        study = with_budget(study, options.budget)
    overrides = {
        f.metadata["override"]: getattr(options, f.name)
        for f in fields_of(type(options), STUDY)
        if f.metadata["override"] not in (None, "budget") and getattr(options, f.name) not in (None, ())
    }
    study = overridden(study, **overrides)
    check_study_world(study)
    return study


def check_study_world(study: Study) -> None:
    """The study's world keeps its contract (`worlds.check`) and the study's loop can run it, before anything runs;
    one line if not. Every world alike, the built-in ones too."""
    from bilevel_tune.inner import InnerLoopError, check_loop_on_world
    from bilevel_tune.worlds import WorldError, load_world
    from bilevel_tune.worlds.check import check_world

    try:
        check_world(load_world(study.world_kind))
    except WorldError as err:
        raise StudyError(f"world {study.world_kind!r} breaks its contract: {err}") from None
    try:
        check_loop_on_world(study.inner, study.world_kind)
    except InnerLoopError as err:
        raise StudyError(str(err)) from None
    from bilevel_tune.study_data.learners import check_learners

    check_learners(study)


def changed_on_resume(options: RunOptions, recorded: Study) -> list[str]:
    """The flags of the study options given that would change the recorded study (repeating a recorded value is fine)."""
    given = [f for f in fields_of(type(options), STUDY) if getattr(options, f.name) not in (None, ())]
    if not given:
        return []
    try:
        asked = resolve_study(options)
    except StudyError:
        return [f.metadata["flag"] for f in given]
    return [f.metadata["flag"] for f in given if f.metadata["aspect"](asked) != f.metadata["aspect"](recorded)]


# -- the record and the resume line -------------------------------------------------------------------
def session_record(options: RunOptions) -> dict[str, Any]:
    """What study.json keeps of a session's options: every session option as given."""
    return {f.name: getattr(options, f.name) for f in fields_of(type(options), SESSION)}


def resume_command(options: RunOptions, run_dir: Path) -> str:
    """The exact command that continues this run with this session's options."""
    args = [options.study, "--resume", "--name", run_dir.name]
    if options.results != DEFAULT_RESULTS:
        args += ["--results", str(options.results)]
    defaults = type(options)(study=options.study)
    for f in fields_of(type(options), SESSION):
        value = getattr(options, f.name)
        if (
            not f.metadata["resumes"]
            or value == getattr(defaults, f.name)
            or (f.name == "dashboard" and options.dashboard_host)
        ):
            continue  # a default, or implied (--dashboard-host implies --dashboard)
        args += [f.metadata["flag"]] if f.metadata["action"] == "store_true" else [f.metadata["flag"], str(value)]
    return f"{options.command} {shlex.join(args)}"
