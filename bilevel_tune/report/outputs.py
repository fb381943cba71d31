"""A run's summary written into its folder: summary.md (its Answers first), answers.csv, verdicts.json, each
section's tables (ceiling.csv, grid.csv, cells.csv, robustness.csv, optimizers.csv where a section has them), the
plots and TensorBoard's summary run (docs/run-folder.md) — the report's own outputs, from the list of sections
(`pipeline.SECTIONS`). The run's primary files (study.json, the records, the score tables, trials.csv) are its
store's: this writes none of them, and only through a store that holds the run's lock (`bilevel-summary`,
`cli/summary_command.py`; the study itself at the end of every run).
"""

from __future__ import annotations

from bilevel_tune.report import plots
from bilevel_tune.report.ceiling import CEILING, NO_CEILING  # noqa: F401 - the summary's public names
from bilevel_tune.report.columns import BEST, FINAL, MECHANISM, SummaryError, mechanism_factor  # noqa: F401
from bilevel_tune.report.pipeline import Summary, render, summarise  # noqa: F401 - summarise: its public name
from bilevel_tune.report.seed_noise import FEW, NOISE, ROBUST, verdicts  # noqa: F401 - the summary's public names
from bilevel_tune.study_data.run_folder import SUMMARY_MARKDOWN, VERDICTS_FILE, write_json
from bilevel_tune.study_data.run_store import RunStore
from bilevel_tune.views import curves


def write_summary(store: RunStore, with_plots: bool = True) -> Summary:
    """The store's tables (`RunStore.export_tables`: it must hold the run's lock), then the summary's own files, each
    section's as the list has it; returns the summary (`render(summary)`: summary.md's text)."""
    store.export_tables()  # trials.csv, generations.csv.gz, scan.csv, finals.csv: what a shipped folder reopens from
    s = summarise(store)
    run_dir = store.run_dir
    (run_dir / SUMMARY_MARKDOWN).write_text(render(s) + "\n")
    for name, table in s.tables().items():
        table.to_csv(run_dir / name, index=False)
    write_json(run_dir / VERDICTS_FILE, s.record())
    if with_plots:
        plots.write_plots(run_dir, s)
    if store.has_records:  # a shipped folder keeps no TensorBoard files
        curves.write_summary_board(run_dir, s.markdown())
    return s
