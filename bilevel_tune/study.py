"""`python -m bilevel_tune.study STUDY` (or `bilevel-study`): run a study's grid of ES trials under Ray Tune.

    python -m bilevel_tune.study weekend --quick --wandb offline
    python -m bilevel_tune.study weekend --dry-run --num-cpus 16
    python -m bilevel_tune.study weekend --resume

STUDY is a name in studies/ or a path to a .toml file. Overrides narrow or
replace a grid axis (--population, --optimize-params, --seed) or set a
budget (--outer-iters, --inner-iters) or a fixed rule (--set rule=value).
Results go to RESULTS/<study>-<UTC time>/ (or --name). Bad input exits 2
with one line, before anything is written; see docs/study.md for the exit
statuses of a run.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import sys

from bilevel_tune.definition import STUDIES_DIR, StudyError, available_studies, load_study
from bilevel_tune.lifecycle import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from bilevel_tune.runner import DEFAULT_RESULTS, RunOptions, UsageError, default_command
from bilevel_tune.tracking import WANDB_MODES

PROG = "python -m bilevel_tune.study"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(message)


def _int_list(flag: str):
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            values = ()
        if not values:
            raise argparse.ArgumentTypeError(f"{flag} {text!r} must be comma-separated integers, e.g. 1,16")
        return values

    return parse


def _positive_int(flag: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} {text!r} must be an integer ≥ 1") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} {value} must be ≥ 1")
        return value

    return parse


def _scan_points(text: str) -> int:
    try:
        return int(text)  # the range (≥ 2) is the study definition's to check, as for a [scan] section
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--scan {text!r} must be an integer ≥ 2 (grid points per searched rule)"
        ) from None


def _assignment(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--set {text!r} must look like rule=value, e.g. risk_penalty_scale=0.5")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--set {text!r}: value {value!r} must be a number") from None


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


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("study", nargs="?", help="a study name in studies/ or a path to a .toml file")
    study = p.add_argument_group("the study (a new run; --resume keeps the recorded one)")
    study.add_argument("--quick", action="store_true", help="the study's `quick` budget (minutes; smoke verdicts)")
    study.add_argument("--budget", help="a named budget of the study file (--quick = --budget quick)")
    study.add_argument("--population", type=_int_list("--population"), help="population axis, e.g. 1,16")
    study.add_argument("--optimize-params", help="the searched rules, e.g. min_demand_frac,fixed_quota")
    study.add_argument("--seed", type=_int_list("--seed"), help="seed axis, e.g. 42,7")
    study.add_argument("--outer-iters", type=_positive_int("--outer-iters"), help="ES generations, every cell")
    study.add_argument("--inner-iters", type=_positive_int("--inner-iters"), help="APPO train() calls per generation")
    study.add_argument(
        "--set", dest="rules", type=_assignment, action="append", default=[], metavar="RULE=VALUE",
        help="fix a rule (physical value, inside the rule's range)",
    )  # fmt: skip
    study.add_argument(
        "--inner",
        help="inner loop: appo (real RLlib APPO), appo-multiagent (the same, RLlib's per-agent path), analytic (fast stand-in) or package.module:Class",
    )
    study.add_argument(
        "--scan",
        type=_scan_points,
        metavar="N",
        help="also scan the searched rules on a grid: N points for a 1-D mechanism, N × N for 2-D, per seed",
    )
    where = p.add_argument_group("the run folder")
    where.add_argument(
        "--results", default=DEFAULT_RESULTS, help="results root, a folder every Ray node sees (default: results/)"
    )
    where.add_argument("--name", help="run folder name (default: <study>-<UTC time>)")
    where.add_argument("--resume", action="store_true", help="continue the latest run of this study (or --name)")
    how = p.add_argument_group("this session")
    how.add_argument(
        "--address",
        type=_address,
        help="join a Ray cluster: host:port or auto (default: a Ray of its own; RAY_ADDRESS is honoured)",
    )
    how.add_argument(
        "--num-cpus", type=_positive_int("--num-cpus"), help="CPUs of the study's own Ray (default: all cores)"
    )
    how.add_argument(
        "--cpus-per-trial",
        type=_positive_int("--cpus-per-trial"),
        help="inner-loop shards (CPUs) per trial (default: planned)",
    )
    how.add_argument(
        "--max-concurrent", type=_positive_int("--max-concurrent"), help="trials at once (default: as CPUs allow)"
    )
    how.add_argument("--max-failures", type=int, default=3, help="retries of a failed trial from its checkpoint")
    how.add_argument(
        "--thread-cap",
        type=_positive_int("--thread-cap"),
        default=1,
        help="BLAS/OpenMP/torch threads per process (default 1)",
    )
    how.add_argument("--wandb", default="auto", choices=WANDB_MODES, help="auto: online with credentials, else offline")
    how.add_argument(
        "--dashboard",
        action="store_true",
        help="serve TensorBoard on the run's curves and start the Ray Dashboard while the study runs; print both URLs",
    )
    how.add_argument(
        "--dashboard-host",
        type=_host,
        help="where --dashboard's servers bind (default 127.0.0.1; 0.0.0.0 for every interface); implies --dashboard",
    )
    how.add_argument("--recalibrate", action="store_true", help="measure this machine's throughput again for the plan")
    p.add_argument("--list", action="store_true", help="list the studies and their budgets")
    p.add_argument(
        "--dry-run", action="store_true", help="print the grid, the CPU plan and a calibrated ETA; run nothing"
    )
    return p


def options_from(args: argparse.Namespace) -> RunOptions:
    if args.quick and args.budget and args.budget != "quick":
        raise UsageError(f"--quick and --budget {args.budget} disagree; give one")
    params = None
    if args.optimize_params is not None:
        params = tuple(x.strip() for x in args.optimize_params.split(",") if x.strip())
    return RunOptions(
        study=args.study,
        budget="quick" if args.quick else args.budget,
        populations=args.population,
        optimize_params=params,
        seeds=args.seed,
        outer_iters=args.outer_iters,
        inner_iters=args.inner_iters,
        rules=tuple(args.rules),
        inner=args.inner,
        scan=args.scan,
        results=args.results,
        name=args.name,
        resume=args.resume,
        address=args.address,
        num_cpus=args.num_cpus,
        cpus_per_trial=args.cpus_per_trial,
        max_concurrent=args.max_concurrent,
        max_failures=args.max_failures,
        thread_cap=args.thread_cap,
        wandb=args.wandb,
        dashboard=args.dashboard or args.dashboard_host is not None,
        dashboard_host=args.dashboard_host,
        recalibrate=args.recalibrate,
        command=default_command(),
    )


def list_studies() -> None:
    for name in available_studies():
        s = load_study(name)
        budgets = "".join(", " + b for b in s.budget_names)
        print(f"{name:<16} {len(s.cells())} trials; budgets: full{budgets} — {s.description}")


def main(argv: list[str] | None = None) -> int:
    from bilevel_tune.runner import dry_run, run_study

    try:
        args = build_parser().parse_args(argv)
        if args.list:
            list_studies()
            return EXIT_OK
        if not args.study:
            raise UsageError(
                f"give a study: one of {', '.join(available_studies(STUDIES_DIR))} (or a path); --list shows them"
            )
        options = options_from(args)
        if args.dry_run:
            dry_run(options)
            return EXIT_OK
        return run_study(options).exit_code
    except (UsageError, StudyError) as err:
        print(f"bilevel_tune.study: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted before any trial started; nothing to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
