"""`python -m bilevel_tune.study STUDY`: run a study's grid of ES trials under Ray Tune.

    python -m bilevel_tune.study weekend --quick --wandb offline
    python -m bilevel_tune.study weekend --dry-run
    python -m bilevel_tune.study weekend --resume

STUDY is a name in studies/ or a path to a .toml file. Overrides narrow or
replace a grid axis (--population, --optimize-params, --seed) or set a
budget (--outer-iters, --inner-iters) or a fixed rule (--set rule=value).
Results go to RESULTS/<study>-<UTC time>/ (or --name): Tune's experiment,
study.json, each trial's generations.jsonl, and the summary. Bad input
exits 2 with one line, before anything is written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bilevel_tune import __version__
from bilevel_tune import metrics as M
from bilevel_tune.definition import STUDIES_DIR, Study, StudyError, available_studies, load_study
from bilevel_tune.run_folder import STUDY_FILE, trial_dirname, trial_name
from bilevel_tune.tracking import WANDB_MODES, TrackingError, resolve_wandb_mode

REPO_ROOT = Path(__file__).resolve().parent.parent


class UsageError(Exception):
    """Bad input: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(message)


def _int_list(flag: str):
    def parse(text: str) -> list[int]:
        try:
            values = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            values = []
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


def _assignment(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--set {text!r} must look like rule=value, e.g. risk_penalty_scale=0.5")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--set {text!r}: value {value!r} must be a number") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m bilevel_tune.study", description=__doc__.splitlines()[0])
    p.add_argument("study", nargs="?", help="a study name in studies/ or a path to a .toml file")
    p.add_argument("--quick", action="store_true", help="the study's `quick` budget (minutes; smoke-budget verdicts)")
    p.add_argument("--budget", help="a named budget of the study file (--quick = --budget quick)")
    p.add_argument("--population", type=_int_list("--population"), help="population axis, e.g. 1,16")
    p.add_argument("--optimize-params", help="the searched rules, e.g. min_demand_frac,fixed_quota")
    p.add_argument("--seed", type=_int_list("--seed"), help="seed axis, e.g. 42,7")
    p.add_argument("--outer-iters", type=_positive_int("--outer-iters"), help="ES generations, every cell")
    p.add_argument("--inner-iters", type=_positive_int("--inner-iters"), help="APPO train() calls per generation")
    p.add_argument(
        "--set",
        dest="rules",
        type=_assignment,
        action="append",
        default=[],
        metavar="RULE=VALUE",
        help="fix a rule (physical value)",
    )
    p.add_argument(
        "--inner", help="inner loop: appo (real RLlib APPO), analytic (fast stand-in) or package.module:Class"
    )
    p.add_argument("--results", default="results", help="results root (default: results/)")
    p.add_argument("--name", help="run folder name (default: <study>-<UTC time>)")
    p.add_argument("--resume", action="store_true", help="continue the latest run of this study (or --name)")
    p.add_argument("--address", help="join an existing Ray cluster (default: embedded local cluster)")
    p.add_argument("--num-cpus", type=_positive_int("--num-cpus"), help="CPUs of the embedded cluster (default: all)")
    p.add_argument(
        "--max-concurrent", type=_positive_int("--max-concurrent"), help="trials at once (default: as CPUs allow)"
    )
    p.add_argument("--max-failures", type=int, default=3, help="retries of a failed trial from its checkpoint")
    p.add_argument(
        "--thread-cap",
        type=_positive_int("--thread-cap"),
        default=1,
        help="BLAS/OpenMP/torch threads per process (default 1)",
    )
    p.add_argument("--wandb", default="auto", choices=WANDB_MODES, help="auto: online with a key, else offline")
    p.add_argument("--dashboard", action="store_true", help="start the Ray Dashboard and print its address")
    p.add_argument("--list", action="store_true", help="list the studies and their budgets")
    p.add_argument("--dry-run", action="store_true", help="print the resolved grid, budgets, resources and a rough ETA")
    return p


# -- resolving the study and the run folder ----------------------------------------
def resolve_study(args) -> Study:
    study = load_study(args.study)
    budget = "quick" if args.quick else args.budget
    if args.quick and args.budget and args.budget != "quick":
        raise StudyError(f"--quick and --budget {args.budget} disagree; give one")
    if budget:
        study = study.with_budget(budget)
    params = None
    if args.optimize_params is not None:
        params = [x.strip() for x in args.optimize_params.split(",") if x.strip()]
    return study.with_overrides(
        populations=args.population,
        optimize_params=params,
        seeds=args.seed,
        outer_iters=args.outer_iters,
        inner_iters=args.inner_iters,
        rules=dict(args.rules),
        inner=args.inner,
    )


def check_results_root(root: Path) -> Path:
    """The results root must be (or be creatable as) a folder; root runs ignore permissions, so check the path."""
    root = root.expanduser().resolve()
    for parent in [root, *root.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--results {root}: {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK):
                raise UsageError(f"--results {root}: {parent} is not writable")
            break
    return root


def run_folder_name(study: Study, name: str | None) -> str:
    if name is not None:
        if not name or "/" in name or name.startswith("."):
            raise UsageError(f"--name {name!r} must be a plain folder name")
        return name
    return f"{study.name}-{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"


def find_resumable(root: Path, study: Study, name: str | None) -> Path:
    if name is not None:
        run_dir = root / name
        if not (run_dir / STUDY_FILE).is_file():
            raise UsageError(f"--resume: {run_dir} is not a study run folder (no {STUDY_FILE})")
        owner = json.loads((run_dir / STUDY_FILE).read_text())["study"]["name"]
        if owner != study.name:
            raise UsageError(f"--resume: run {name!r} belongs to study {owner!r}, not {study.name!r}")
        return run_dir
    runs = sorted(
        (
            d
            for d in root.glob(f"{study.name}-*")
            if (d / STUDY_FILE).is_file() and json.loads((d / STUDY_FILE).read_text())["study"]["name"] == study.name
        ),
        key=lambda d: d.stat().st_mtime,
    )
    if not runs:
        raise UsageError(f"--resume: no earlier run of study {study.name!r} under {root}")
    return runs[-1]


def provenance() -> dict[str, Any]:
    import ray

    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    versions = {"bilevel_tune": __version__, "python": platform.python_version(), "ray": ray.__version__}
    for module in ("torch", "numpy", "pandas", "wandb", "gymnasium"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = None
    return {
        "versions": versions,
        "git_sha": sha or None,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(),
    }


# -- dry run ------------------------------------------------------------------------
# Rough per-iteration cost on the 2-core development machine (benchmarks/leak.py, RAY-NOTES):
AGENT_STEPS_PER_S = 1500.0
ANALYTIC_FARM_DAYS_PER_S = 2e5


def plan(study: Study, cpus: int, max_concurrent: int | None) -> dict[str, Any]:
    cells = study.cells()
    b = study.budget
    concurrent = min(len(cells), max_concurrent or cpus, cpus)
    seconds = []
    for cell in cells:
        agent_steps = cell.population * b.num_farms * b.horizon
        if study.inner == "appo":
            per_gen = b.inner_iters * agent_steps / AGENT_STEPS_PER_S + 0.3
        else:
            per_gen = agent_steps * b.eval_episodes / ANALYTIC_FARM_DAYS_PER_S + 0.05
        seconds.append(per_gen * (cell.generations + 2 * b.final_eval_seeds))
    return {
        "cells": cells,
        "concurrent": concurrent,
        "trial_seconds": seconds,
        "eta_seconds": sum(seconds) / max(concurrent, 1),
    }


def _hms(seconds: float) -> str:
    return str(dt.timedelta(seconds=int(seconds)))


def print_dry_run(study: Study, cpus: int, max_concurrent: int | None) -> None:
    p = plan(study, cpus, max_concurrent)
    b = study.budget
    print(
        f"study {study.name} ({study.source}), budget {study.budget_name}{' (smoke-budget)' if study.smoke else ''}, inner loop {study.inner}"
    )
    print(
        f"{len(p['cells'])} trials = population {list(study.populations)} × optimize_params {[list(x) for x in study.optimize_params]} × seed {list(study.seeds)}"
    )
    print(
        f"budget: inner_iters {b.inner_iters}, horizon {b.horizon} days, {b.num_farms} farms, hidden {list(b.hidden)}, eval episodes {b.eval_episodes}, final re-evaluation seeds {b.final_eval_seeds}"
    )
    print(
        f"fixed rules: {study.fixed_rules or 'defaults'}; objective: econ {study.econ_weight}, sus {study.sus_weight}; es: {study.es_settings}"
    )
    print(f"{'trial':<44} {'generations':>11} {'~time':>10}")
    for cell, secs in zip(p["cells"], p["trial_seconds"]):
        print(f"{trial_name(study.name, cell):<44} {cell.generations:>11} {_hms(secs):>10}")
    print(
        f"resources: per trial a placement group [{{}}, {{'CPU': 1}}] (the trial function takes none; the inner-loop actor one CPU); {p['concurrent']} trials at once on {cpus} CPUs"
    )
    print(
        f"rough ETA: {_hms(p['eta_seconds'])} (from ~{AGENT_STEPS_PER_S:.0f} agent-steps/s per trial on this project's 2-core reference machine)"
    )


# -- running ------------------------------------------------------------------------
def run(study: Study, args, run_dir: Path, resume: bool) -> Path:
    os.environ.setdefault(
        "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0"
    )  # a checkpoint per generation is the design
    from ray import tune

    from bilevel_tune import runtime, summary, tracking
    from bilevel_tune.trainable import run_trial, trial_resources

    mode = resolve_wandb_mode(args.wandb, key_dirs=(Path.cwd(), REPO_ROOT))
    try:
        started = runtime.init(
            runtime.RuntimeConfig(
                address=args.address,
                num_cpus=args.num_cpus,
                include_dashboard=args.dashboard,
                thread_cap=args.thread_cap,
            )
        )
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = (
            f"--address {args.address}: cannot connect to a Ray cluster"
            if args.address
            else "cannot start a local Ray cluster"
        )
        raise UsageError(f"{where} ({str(err).splitlines()[0]})") from None
    if args.dashboard:
        print_dashboard()
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        (run_dir / STUDY_FILE).write_text(json.dumps({"study": study.to_dict(), "provenance": provenance()}, indent=2))
    # The study travels through the object store, not the trial config: Tune's tables and W&B's
    # config show the grid axes only, and study.json holds the whole definition.
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, study=study.to_dict(), run_dir=str(run_dir.resolve())), trial_resources(1)
    )
    callbacks = tracking.callbacks(mode, group=run_dir.name)
    start = time.time()
    if resume:
        tuner = tune.Tuner.restore(str(run_dir), trainable=trainable, resume_errored=True)
    else:
        param_space = {
            "population": tune.grid_search(list(study.populations)),
            "optimize_params": tune.grid_search([list(p) for p in study.optimize_params]),
            "seed": tune.grid_search(list(study.seeds)),
        }
        tuner = tune.Tuner(
            trainable,
            param_space=param_space,
            tune_config=tune.TuneConfig(
                metric=M.TUNE_METRIC,
                mode=M.TUNE_MODE,
                max_concurrent_trials=args.max_concurrent,
                trial_name_creator=lambda t: trial_name(study.name, t.config),
                trial_dirname_creator=lambda t: trial_dirname(study.name, t.config, t.trial_id),
            ),
            run_config=tune.RunConfig(
                name=run_dir.name,
                storage_path=str(run_dir.parent),
                failure_config=tune.FailureConfig(max_failures=args.max_failures),
                checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
                callbacks=callbacks,
                verbose=1,
            ),
        )
    results = tuner.fit()
    wall = time.time() - start
    try:
        print(summary.write_summary(run_dir))
    except Exception as err:  # noqa: BLE001 - the run's data is safe; the summary can be rebuilt from it
        print(
            f"summary failed ({type(err).__name__}: {err}); the records are intact — rebuild with: python -m bilevel_tune.summary {run_dir}"
        )
    errors = [r for r in results if r.error]
    print(
        f"\n{len(results) - len(errors)}/{len(results)} trials finished in {_hms(wall)} ({wall:.0f} s); results: {run_dir}"
    )
    print(f"TensorBoard: tensorboard --logdir {run_dir}")
    if mode == "offline":
        print(f"W&B (offline): wandb sync {run_dir}/*/wandb/offline-run-*")
    if started:  # leave a cluster we joined as we found it
        runtime.shutdown()
    return run_dir


def print_dashboard() -> None:
    import ray

    url = ray._private.worker.global_worker.node.address_info.get("webui_url") or "127.0.0.1:8265"
    token = Path.home() / ".ray" / "auth_token"
    how = f"paste the token from {token} when it asks" if token.is_file() else "token authentication is off"
    print(
        f"Ray Dashboard: http://{url} — {how} (Ray 2.60 turns token auth on by default; RAY_AUTH_MODE=disabled turns it off)"
    )


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.list:
            for name in available_studies():
                s = load_study(name)
                print(
                    f"{name:<16} {len(s.cells())} trials; budgets: full{''.join(', ' + b for b in s.budget_names)} — {s.description}"
                )
            return 0
        if not args.study:
            raise UsageError(
                f"give a study: one of {', '.join(available_studies(STUDIES_DIR))} (or a path); --list shows them"
            )
        study = resolve_study(args)
        root = check_results_root(Path(args.results))
        if args.max_failures < 0:
            raise UsageError(f"--max-failures {args.max_failures} must be ≥ 0")
        cpus = args.num_cpus or os.cpu_count() or 1
        if args.dry_run:
            print_dry_run(study, cpus, args.max_concurrent)
            return 0
        resolve_wandb_mode(args.wandb, key_dirs=(Path.cwd(), REPO_ROOT))  # fail before anything is written
        if args.address is not None and not _looks_like_address(args.address):
            raise UsageError(f"--address {args.address!r} must be host:port, 'auto' or ray://host:port")
        if args.resume:
            run_dir = find_resumable(root, study, args.name)
            study = Study.from_dict(json.loads((run_dir / STUDY_FILE).read_text())["study"])
        else:
            run_dir = root / run_folder_name(study, args.name)
            if run_dir.exists():
                raise UsageError(f"run folder {run_dir} exists; --resume continues it, or choose another --name")
        run(study, args, run_dir, resume=args.resume)
        return 0
    except (UsageError, StudyError, TrackingError) as err:
        print(f"bilevel_tune.study: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "\ninterrupted: finished generations are in generations.jsonl; --resume continues the run", file=sys.stderr
        )
        return 130


def _looks_like_address(address: str) -> bool:
    if address == "auto" or address.startswith("ray://"):
        return True
    host, sep, port = address.rpartition(":")
    return bool(sep and host and port.isdigit())


if __name__ == "__main__":
    sys.exit(main())
