"""`python -m bilevel_tune.study STUDY` (or `bilevel-study`): run a study's grid of ES trials under Ray Tune.

    python -m bilevel_tune.study weekend --quick --wandb offline
    python -m bilevel_tune.study weekend --dry-run --num-cpus 16
    python -m bilevel_tune.study weekend --resume
    python -m bilevel_tune.study --reevaluate RUN_DIR --learners ppo,analytic,frozen
    python -m bilevel_tune.study --reevaluate RUN_DIR --final-seeds 16 --at-evaluations 1/8,1/4,1/2,1000
    python -m bilevel_tune.study --status RUN_DIR

STUDY is a built-in study's name or a path to a .toml file. Overrides
narrow or replace a grid axis (--population, --optimize-params, --seed),
set a budget (--outer-iters, --inner-iters) or any setting (--set
key=value), or cross a setting as a further axis (--grid key=v1,v2).
Results go to RESULTS/<study>-<UTC time>/ (or --name). Bad input exits 2
with one line, before anything is written; see docs/study.md for the exit
statuses of a run. The options are declared once, in bilevel_tune.cli.options.
"""

from __future__ import annotations

import os
import sys

from bilevel_tune.base.plugins import in_users_code
from bilevel_tune.cli.options import UsageError, build_parser, options_from
from bilevel_tune.runtime.lifecycle import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from bilevel_tune.study_data.definition import StudyError, available_studies, load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.worlds import BUILTIN_WORLDS

PROG = "python -m bilevel_tune.study"


def list_studies() -> None:
    """The built-in studies, then the worlds a study can name (`[world] kind`)."""
    for name in available_studies():
        s = load_study(name)
        budgets = "".join(", " + b for b, _ in s.budgets)
        print(f"{name:<16} {len(compile_design(s).cells)} trials; budgets: full{budgets}; world {s.world_kind} — {s.description}")
    print(f'worlds: {", ".join(BUILTIN_WORLDS)}, or your own as [world] kind = "module:Class" (docs/worlds.md)')


def find_plugins_here() -> None:
    """A study's `module:Class` (a world, an inner loop) is found from the folder the study runs in, as `python -m`
    finds it, under the `bilevel-study` script too (whose sys.path starts at its own folder); Ray's workers are
    started with the driver's sys.path, so they find it as well."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def pilot_plan(options, pilot) -> list[str]:
    """`--dry-run --pilot RUN_DIR`'s lines (`cli.pilot_plan`); UsageError in one line for a folder that is no pilot."""
    from bilevel_tune.cli.options import resolve_study
    from bilevel_tune.cli.pilot_plan import PilotError, plan_lines


    try:
        return ["", "planned from the pilot:", *plan_lines(compile_design(resolve_study(options)), pilot)]
    except PilotError as err:
        raise UsageError(str(err)) from None


def main(argv: list[str] | None = None) -> int:
    from bilevel_tune.cli.planner import dry_run
    from bilevel_tune.cli.rescoring import parse_budgets
    from bilevel_tune.cli.runner import default_command, reevaluate_run, run_study
    from bilevel_tune.cli.status import print_status

    find_plugins_here()
    try:
        args = build_parser(PROG, __doc__.splitlines()[0]).parse_args(argv)
        if args.list:
            list_studies()
            return EXIT_OK
        if args.status is not None:
            if args.study:
                raise UsageError(f"--status reads the run its folder records; drop the study {args.study!r}")
            print_status(args.status)
            return EXIT_OK
        rescoring = {"final_seeds": args.final_seeds, "budgets": parse_budgets(args.at_evaluations or "")}
        if args.reevaluate is None and (args.final_seeds or args.at_evaluations):
            flag = "--final-seeds" if args.final_seeds else "--at-evaluations"
            raise UsageError(f"{flag} re-scores a finished run: give its folder with --reevaluate RUN_DIR")
        if args.reevaluate is not None:
            if args.study:
                raise UsageError(f"--reevaluate scores the run its folder records; drop the study {args.study!r}")
            options = options_from(args, command=default_command())
            return reevaluate_run(options, args.reevaluate, args.dry_run, **rescoring)
        if not args.study:
            raise UsageError(f"give a study: one of {', '.join(available_studies())} (or a path); --list shows them")
        options = options_from(args, command=default_command())
        if args.pilot is not None and not args.dry_run:
            raise UsageError("--pilot plans a run: give it with --dry-run")
        if args.dry_run:
            planned = pilot_plan(options, args.pilot) if args.pilot is not None else []  # refused before anything prints
            dry_run(options)
            for line in planned:
                print(line)
            return EXIT_OK
        return run_study(options).exit_code
    except (UsageError, StudyError) as err:
        print(f"bilevel_tune.study: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted before any trial started; nothing to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # a user's world or loop that raises: one line naming where, not a traceback
        where = in_users_code(err)
        if where is None:
            raise
        print(f"bilevel_tune.study: error: {where}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
