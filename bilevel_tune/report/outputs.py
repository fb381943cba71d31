"""`python -m bilevel_tune.summary RUN_DIR` (or `bilevel-summary`): a run folder's summary, rebuilt from the folder alone.

Writes summary.md (its Answers first), answers.csv, ceiling.csv (where runs sit at the ceiling), trials.csv,
generations.csv.gz, scan.csv (with a rules scan), cells.csv, grid.csv, verdicts.json, plots/*.png and
TensorBoard's summary run (tensorboard/summary/) into the run folder (docs/run-folder.md). It reads the
trials' records, or — in a shipped folder under docs/results/, which keeps no records — the tables a summary
wrote, through the folder's store (`study_data.run_store`), so it rebuilds a shipped summary as its run wrote it.
It writes only while it holds the folder's lock: on a folder another session holds it refuses in one line. The study runs this at the end of
every run; run it yourself on any run folder, finished or not.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bilevel_tune.report import against, optimizers, plots, run_history
from bilevel_tune.report.ceiling import CEILING, NO_CEILING  # noqa: F401 - the summary's public names
from bilevel_tune.report.columns import BEST, FINAL, MECHANISM, SummaryError, mechanism_factor  # noqa: F401
from bilevel_tune.report.grids import mean_grid
from bilevel_tune.report.pipeline import Summary, summarise, verdict_lines, verdicts  # noqa: F401
from bilevel_tune.report.seed_noise import FEW, NOISE, ROBUST  # noqa: F401
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.run_folder import (
    ANSWERS_CSV,
    CEILING_CSV,
    CELLS_CSV,
    GENERATIONS_CSV,
    GENERATIONS_FILE,
    GRID_CSV,
    HELDOUT_CSV,
    OPTIMIZERS_CSV,
    PILOT_FILE,
    ROBUSTNESS_CSV,
    STUDY_FILE,
    SUMMARY_MARKDOWN,
    TRIALS_CSV,
    VERDICTS_FILE,
    git_sha,
    write_json,
)
from bilevel_tune.study_data.run_lock import LockError
from bilevel_tune.study_data.run_store import RunStore, StoreError
from bilevel_tune.study_data.settings import describe as describe_settings
from bilevel_tune.views import curves

TRIAL_COLUMNS = (
    "population",
    "dims",
    "seed",
    "status",
    "best_objective",
    "best_generation",
    "generations",
    "final_objective",
    "final_objective_std",
    "gen0_objective",
    "upper_bound",
    "regret",
    "final_regret",
    "grid_spacing",
    "final_sigma",
    "shards",
    "nodes",
    "median_sec_per_gen",
    "max_threads",
)

INTEGER_COLUMNS = {
    "population",
    "dims",
    "seed",
    "generations",
    "best_generation",
    "shards",
    "nodes",
    "max_threads",
    "n_seeds",
    "budget_generations",
    "failed_candidates",
    "points",
    "first generation",
}
SCAN_COLUMNS = (
    "optimize_params",
    "seed",
    "points",
    "scan_best",
    "scan_best_rules",
    "scan_best_upper_bound",
    "scan_best_final",
    "grid_spacing",
)


def _text(column: str, value) -> str:
    """One table entry: integers as integers, measured values to 4 decimals, missing as –."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if column in INTEGER_COLUMNS and isinstance(value, (int, float, np.integer, np.floating)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{value:.4f}"
    return str(value)


def _markdown(df: pd.DataFrame) -> str:
    """Markdown with integers as integers (tabulate would float every entry of a mixed row)."""
    if df.empty:
        return "(no data)"
    text = pd.DataFrame({c: [_text(c, v) for v in df[c]] for c in df.columns})
    return text.to_markdown(index=False, disable_numparse=True)


def _mean_pm_std(cells: pd.DataFrame) -> pd.DataFrame:
    if cells.empty:
        return cells
    keys = [c for c in cells.columns if not c.endswith(("_mean", "_std"))]
    out = cells[keys].copy()
    for col in cells.columns:
        if col.endswith("_mean"):
            name = col.removesuffix("_mean")
            out[name] = [
                f"{m:.4f} ± {sd:.4f}" if np.isfinite(sd) else f"{m:.4f}"
                for m, sd in zip(cells[col], cells[name + "_std"])
            ]
    return out


def _incomplete(trials: pd.DataFrame) -> list[str]:
    missing = trials[trials["status"] != "complete"]
    if missing.empty:
        return []
    parts = [
        f"pop {r.population} {r.mechanism if hasattr(r, 'mechanism') else f'{r.dims}-D'} seed {r.seed}: {r.status}"
        + (f" ({r.stop_reason})" if isinstance(getattr(r, "stop_reason", ""), str) and r.stop_reason else "")
        for r in missing.itertuples()
    ]
    return [f"Not complete: {len(missing)} trial(s): " + "; ".join(parts), ""]


def render(s: Summary) -> str:
    """summary.md: the answers first, then the grids of final and best objectives, the ceiling, the trials, cells
    and scan, the detailed verdicts — labelled when the run was short."""
    design = s.design
    basis = "final re-evaluation" if s.verdicts_final else "best objective"
    label = f" — {s.budget_note}" if s.budget_note else ""
    lines = [f"# Study {design.name} (budget {design.budget_label}, inner loop {design.inner})", "",
             written_at(s.store), ""]  # fmt: skip
    if design.description:
        lines += [f"{design.description}.", ""]
    if design.regime:
        lines += [f"World: {design.regime}.", ""]
    if design.overrides_label:
        lines += [f"Command-line changes to the study: {design.overrides_label}.", ""]
    if s.budget_note:
        lines += [f"**{s.budget_note}.**", ""]
    lines += render_answers(s)
    lines += render_against(s)
    lines += render_robustness(s)
    lines += render_needed(s)
    lines += render_noise(s)
    lines += optimizers.render(s.optimizers, optimizers.table_epsilon(s.optimizers)) if s.optimizers is not None and not s.optimizers.empty else []
    lines += render_grids(s)
    axes = [k for k, _ in design.axes]
    title = "## Best objective per run (the campaign's grid: rows population × seed, columns mechanism dimensionality)"
    if mechanism_factor(s.trials) == MECHANISM:
        title = title.replace("mechanism dimensionality", "mechanism: the searched rules")
    if axes and not s.grid.empty:
        for values, block in s.grid.groupby(axes, sort=False):
            values = values if isinstance(values, tuple) else (values,)
            where = ", ".join(f"{k} {v}" for k, v in zip(axes, values))
            lines += [f"{title[:-1]}; {where})", "", _markdown(block.drop(columns=axes)), ""]
    else:
        lines += [title, "", _markdown(s.grid), ""]
    columns = [c for c in TRIAL_COLUMNS if c in s.trials]
    if mechanism_factor(s.trials) == MECHANISM:  # two mechanisms share a dimensionality: name each
        columns[columns.index("dims")] = MECHANISM
    columns[columns.index("seed") + 1 : columns.index("seed") + 1] = [a for a in axes if a in s.trials]
    lines += ["## Trials", "", _markdown(s.trials[columns]), ""]
    lines += ["## Cells (mean ± std over seeds)", "", _markdown(_mean_pm_std(s.cells)), ""]
    if not s.scan_bests.empty:
        lines += [
            f"## Rules scan ({design.scan} points per searched rule; the best point on the evaluation seeds, "
            "and that point re-evaluated on the final seeds)",
            "",
            _markdown(s.scan_bests[[c for c in SCAN_COLUMNS if c in s.scan_bests]]),
            "",
        ]
    lines += _incomplete(s.trials)
    lines += [
        f"## Seed-noise verdicts (effects on the {basis}){label}",
        "",
        "The design's descriptive rule, below the answers: an effect is robust when every matched pair agrees in "
        "sign and the mean gap exceeds 2 × the seed SD pooled over all cells. It describes; the Answers decide — "
        "each line names the Answers' decision on its factor, the one verdict per comparison.",
        "",
    ]
    lines += [f"- {line}" for line in verdict_lines(s, effects_only=True)]
    lines += ["", "## Settings (as run; a further axis's values are in the trials' columns)", ""]
    added = s.store.learners_added
    ran = {**design.settings, "final.learners": tuple(x for x in design.final.learners if x not in added)}
    lines += [line.strip() for line in describe_settings(
        ran, design.inner.startswith("appo"), design.table, design.optimizers
    )]
    if added:
        lines += ["", f"Added after the run, for its held-out step (`--reevaluate RUN --learners`): [final] learners "
                      f"{', '.join(added)}."]  # fmt: skip
    return "\n".join(lines)


WRITTEN_AT = "Written at tool commit"  # summary.md's line naming the code that wrote it (a rebuild's only changed line)


def written_at(store: RunStore) -> str:
    """Which commit of the tool wrote this summary, and which the run ran."""
    tool, run = git_sha(marked=True), store.record.get("provenance", {}).get("git_sha")
    tool = (tool[:12] + "+" * tool.endswith("+")) if tool else "unknown"  # +: the package's code changed since
    return f"{WRITTEN_AT} {tool} (run commit {(run or 'unknown')[:12]})."


def render_answers(s: Summary) -> list[str]:
    """## Answers: one row per comparison, then the ceiling, the range edges and search vs grid, a line each."""
    a, design = s.answers, s.design
    lines = ["## Answers", ""]
    if a.error:
        lines += [f"Nothing decided: {a.error}.", ""]
    elif a.decisions is None or not a.rows:
        lines += ["No comparison: the grid varies no factor with two levels.", ""]
    else:
        d = a.decisions
        final = design.budget.final_eval_seeds
        lines += [_answers_intro(d, len(a.rows), final, design.decide.score), ""]
        if s.plan is not None:
            lines += [s.plan.sentence(), ""]
        lines += [
            _markdown(a.table()),
            "",
        ]
        if d.incomplete:
            lines += [f"Not looked at yet: {d.incomplete}.", ""]
    findings = s.findings()
    lines += [f"- {line}" for line in findings] + ([""] if findings else [])
    return lines


def render_against(s: Summary) -> list[str]:
    """## Against its pilot (with a pilot.json): each row beside the pilot's decision on the same comparison."""
    if s.against is None:
        return []
    a = s.against
    mark = {True: ", confirmatory", False: ", exploratory"}.get(a.confirmatory, "")
    return [
        f"## {against.HEADING} ({a.pilot}{mark})",
        "",
        f"Each row of the Answers beside the same comparison in {a.pilot}'s answers (kept in {PILOT_FILE}): it confirms "
        "the pilot's decision, reverses it (the other side better), differs from it (a difference against "
        "equivalence), decides what the pilot left undecided, leaves it undecided at its plan's end, or has not "
        "decided it yet.",
        "",
        _markdown(a.table()),
        "",
        *[f"- {line}" for line in a.findings()],
        "",
    ]


def render_robustness(s: Summary) -> list[str]:
    """## Robustness (with a held-out step): the gain over the status quo under each learner, per cell; whether each
    comparison's winner stays the winner under each held-out learner; both decided, in words."""
    r = s.robustness
    if r is None:
        return []
    own, others = r.learners[0], ", ".join(r.learners[1:]) or "none"
    lines = [
        "## Robustness",
        "",
        f"Each trial's final rules and its status quo are scored by the run's own learner, {own}, and by held-out "
        f"ones ({others}), on the trial's final seeds, as its final re-evaluation is (docs/verdicts.md). Per cell and "
        "learner the gain is final − status quo, one value per trial (its final seeds' mean; a cell of one trial: "
        "its final seeds); per comparison the Answers decided and held-out learner, whether its winner stays the "
        f"winner. Each row is a paired t-test (a sign-flip where there is no spread), all {len(r.rows)} at "
        f"family-wise α {r.alpha:g} (Holm), a family apart from the Answers'.",
        "",
    ]
    lines += [f"- {line}" for line in r.lines()] + [""]
    lines += [_markdown(r.gains_table()), ""]
    if r.winners():
        lines += ["Does each comparison's winner stay the winner?", "", _markdown(r.winners_table()), ""]
    return lines


def render_needed(s: Summary) -> list[str]:
    """## What the answers needed (with anytime.csv): the run's test on the incumbents of earlier moments."""
    n = s.needed
    if n is None:
        return []
    final = s.design.budget.final_eval_seeds
    lines = [
        "## What the answers needed",
        "",
        "**Exploratory**: the budgets were read after the run. Each trial's incumbent after that many inner-loop "
        f"evaluations — its best-so-far rules then, retrained on the run's {final} final seeds, the mean "
        "(`--reevaluate RUN_DIR --at-evaluations`, anytime.csv) — decided by the run's own test at its last look, "
        "row by row as the Answers; 'as the run decided' compares each row's decision with the Answers'.",
        "",
    ]
    lines += [f"- {line}" for line in n.lines()] + [""]
    equal = n.equal_rows()
    if not equal.empty:
        lines += ["Equal-budget rows (a factor that changes a run's evaluations, both sides at the same count):", "",
                  _markdown(equal), ""]  # fmt: skip
    lines += [_markdown(n.table()), ""]
    return lines


def render_noise(s: Summary) -> list[str]:
    """## Where the noise is (with final scores seed by seed): each row's variance split, its t by either score."""
    n = s.noise
    if n is None:
        return []
    return [
        "## Where the noise is",
        "",
        "Each row's contrast per run seed, d = B − A, is what the runs found plus the noise of their final "
        f"re-evaluation, which averages {n.recorded} final seeds shared by the cells of a run seed: Var(d) = σ²(runs) "
        f"+ σ²(one re-evaluation) / final seeds, split from finals.csv (the {s.design.decide.score} rules, seed by seed; "
        "docs/verdicts.md). 'final seeds at least variance per training' is Cochran's two-stage allocation at a run's "
        f"evaluations against {2} trainings per final seed (both rule sets scored). The last column is each score's "
        f"paired t over the run seeds at {n.recorded} final seeds: the best-so-far rules' (the decisions') and the "
        "search mean's.",
        "",
        _markdown(n.table()),
        "",
    ]


def _answers_intro(d, rows: int, final: int, score: str = "best-so-far") -> str:
    """What the Answers' table holds and how it was decided, in words."""
    rules = "the best-so-far rules" if score == "best-so-far" else "the final search mean's rules"
    scored = f"scored on the final re-evaluation ({rules} retrained on {final} fresh seeds, the mean)"
    looked = f"after stage {d.looks} of {d.stages} ({d.looks * d.seeds_per_look} seeds per cell at most)"
    if d.test == "adastop":
        return (
            f"Each row compares two groups of runs (A, B) that differ in one grid factor and match on the others and "
            f"on the seed, {scored}. AdaStop (a group-sequential permutation test; docs/verdicts.md) decides each at "
            f"family-wise α {d.alpha:g} over the {rows} comparisons, {looked}. Beside it: B − A with a 95 % interval "
            f"(paired over the matched seeds), the seeds a paired t-test would need at α/{rows}, power 0.8, at the "
            "observed effect, and what each side's runs spent."
        )
    margin = ""
    if d.margin is not None:
        since = "" if d.margin_from <= 1 else f", declared before look {d.margin_from} (the looks before it keep their answers)"
        margin = (
            f" With the study's margin {d.margin:g}{since}, each row makes two claims, each with half its share of α: "
            f"it differs (its repeated confidence interval excludes 0), and it is equivalent within ±{d.margin:g} "
            "(the interval lies inside ±margin: two one-sided tests, group-sequential); both shown reads 'better, by "
            "less than' the margin."
        )
    return (
        f"Every cell runs the same seeds (a seed fixes a run's worlds, initial weights and evaluation seasons), so each "
        f"row is a contrast read within seed, {scored}: main effects (a factor's B − A averaged over the other "
        "factors' levels) and interactions first, then simple effects (two groups that differ in one factor). A "
        "group-sequential paired t-test (O'Brien–Fleming spending over the stages; docs/verdicts.md) decides each at "
        f"family-wise α {d.alpha:g} over the {rows} rows, {looked}; a simple effect is tested only with the share of "
        "α its main effect, or an interaction it is part of, passes on once shown. Beside it: B − A with a 95 % "
        "paired interval, the seeds that agree in sign, the seeds a single paired t-test would need at the row's "
        "level (power 0.8, at the observed effect), and what each side's runs spent." + margin
    )


def render_grids(s: Summary) -> list[str]:
    """The final and best objectives per cell, side by side in meaning; the ceiling's table where runs sit at it."""
    lines = [
        "## Final objective per cell (mean ± SD over seeds, (seeds): the score the answers use)",
        "",
        _markdown(mean_grid(s.trials, FINAL)),
        "",
        "## Best objective per cell (optimistic: the best of many noisy evaluations, more of them for a larger "
        "population; mean ± SD over seeds, (seeds))",
        "",
        _markdown(mean_grid(s.trials, BEST)),
        "",
    ]
    c = s.ceiling
    if c.value is not None and not c.rows.empty:
        lines += [
            f"## Ceiling {c.value:.4f}: the runs at it or within their own evaluation's noise of it (two SDs of "
            "their final re-evaluation)",
            "",
            "Cause: the rules when the run's upper bound — the best any action could earn, day by day — is within "
            "that noise of its best (the rules cap the objective there), else the search stopped short.",
            "",
            _markdown(c.rows),
            "",
        ]
    return lines


def write_summary(store: RunStore, with_plots: bool = True) -> str:
    """Write the summary's own files (and plots) into the run folder — summary.md, answers.csv, verdicts.json, the
    sections' tables — after the store's tables (`RunStore.export_tables`); return summary.md's text. The store must
    hold the run's lock: a command that does not writes nothing."""
    run_dir = store.run_dir
    store.export_tables()  # trials.csv, generations.csv.gz, scan.csv, finals.csv: what a shipped folder reopens from
    s = summarise(store)
    text = render(s)
    before = (run_dir / SUMMARY_MARKDOWN).read_text() if (run_dir / SUMMARY_MARKDOWN).is_file() else ""
    (run_dir / SUMMARY_MARKDOWN).write_text(text + "\n")
    run_history.requote(run_dir, before, text)
    run_history.record_held_out(store, text)
    answers_csv = s.answers.csv_table()
    if s.plan is not None and not answers_csv.empty:  # every row, undecided ones too, carries the run's mark
        answers_csv["confirmatory"] = s.plan.confirmatory
    answers_csv.to_csv(run_dir / ANSWERS_CSV, index=False)
    if not s.ceiling.rows.empty:
        s.ceiling.rows.to_csv(run_dir / CEILING_CSV, index=False)
    if s.robustness is not None:
        s.robustness.table().to_csv(run_dir / ROBUSTNESS_CSV, index=False)
    if s.optimizers is not None:
        optimizers.csv_table(s.optimizers).to_csv(run_dir / OPTIMIZERS_CSV, index=False)
    s.cells.to_csv(run_dir / CELLS_CSV, index=False)
    s.grid.to_csv(run_dir / GRID_CSV, index=False)
    verdicts_json = {
        "tool_commit": git_sha(marked=True),  # which code wrote it (a rebuild's only changed field), and which the run ran
        "run_commit": store.record.get("provenance", {}).get("git_sha"),
        "budget_note": s.budget_note,
        "answers": s.answers_record(),
        "best_objective": s.verdicts_best,
        "final_objective": s.verdicts_final,
        **({"robustness": s.robustness.record()} if s.robustness is not None else {}),
        **({"noise": s.noise.record()} if s.noise is not None else {}),
        **({"needed": s.needed.record()} if s.needed is not None else {}),
        **({"against": s.against.record()} if s.against is not None else {}),
    }
    write_json(run_dir / VERDICTS_FILE, verdicts_json)
    if with_plots:
        plots.write_plots(run_dir, s)
    if store.has_records:  # a shipped folder keeps no TensorBoard files
        curves.write_summary_board(run_dir)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bilevel_tune.summary", description=__doc__.splitlines()[0])
    parser.add_argument(
        "run_dir", type=Path, help="a run folder made by python -m bilevel_tune.study, or a shipped one (docs/results/)"
    )
    parser.add_argument("--no-plots", action="store_true", help="tables and verdicts only")
    parser.add_argument("--record", action="store_true", help="also print the run's record: sessions, stages, pace")
    parser.add_argument(
        "--ship", type=Path, metavar="DIR", help="copy the summary, tables and plots to DIR with run.md"
    )
    parser.add_argument("--notes", type=Path, metavar="FILE", help="markdown for run.md: commands, what else ran")
    parser.add_argument(
        "--against", type=Path, metavar="PILOT",
        help="compare each answer with the same comparison in PILOT's (a run's or a shipped folder): kept as pilot.json",
    )  # fmt: skip
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help exits 0, a bad argument 2 (its one-line usage is printed)
        return int(exit_.code or 0)
    try:
        notes = _notes(args.notes)
        with _held(_opened(args.run_dir)) as store:  # refused first while another session holds the folder
            if (args.record or args.ship) and not store.has_records:
                # refused before the summary is rewritten: a bad flag writes nothing
                raise SummaryError(f"{args.run_dir} keeps no trial records: its record and shipping need the run folder")
            pilot = against.pilot_record(args.against) if args.against else None  # checked before anything is written
            if args.ship and (adopted := store.adopt(RunStore(args.ship))):
                print(f"held-out: kept {adopted} row(s) of {args.ship / HELDOUT_CSV} (trials whose final rules it scored)")
            if pilot is not None:
                store.keep_pilot(pilot)
            print(write_summary(store, with_plots=not args.no_plots))
            if args.record or args.ship:
                run_history.report(store, args.ship, notes)
    except (SummaryError, StoreError, LockError) as err:
        print(f"bilevel_tune.summary: error: {err}", file=sys.stderr)
        return 2
    return 0


def _opened(run_dir: Path) -> RunStore:
    """The folder's store, read only; SummaryError, one line, for a folder holding neither records nor tables."""
    store = RunStore(run_dir)
    if run_dir.is_dir() and not store.has_records and not store.ships_tables:
        raise SummaryError(
            f"{run_dir} holds neither trial records (*/{GENERATIONS_FILE}) nor a summary's tables ({STUDY_FILE}, "
            f"{TRIALS_CSV}, {GENERATIONS_CSV}): give a run folder made by python -m bilevel_tune.study, or one under "
            "docs/results/"
        )
    return store.checked()


@contextlib.contextmanager
def _held(store: RunStore):
    """The folder held for this command's writes; refused in one line while another live session holds it."""
    try:
        with run_lock.held(store.run_dir, fresh=False, out=lambda line: None) as lock:
            yield RunStore(store.run_dir, lock)
    except LockError as err:
        raise SummaryError(
            f"{err}: this command writes nothing into a folder another session holds; see where it stands with "
            f"python -m bilevel_tune.study --status {store.run_dir}"
        ) from None


def _notes(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_text()
    except OSError as err:
        raise SummaryError(f"--notes {path}: {err.strerror}") from None


if __name__ == "__main__":
    sys.exit(main())
