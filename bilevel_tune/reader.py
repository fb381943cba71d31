"""The public reader of a run folder, for a notebook: `bilevel_tune.open(run_dir)` → `Run`.

    run = bilevel_tune.open("docs/results/weekend-confirm")
    run.trials, run.scores, run.answers, run.generations       pandas DataFrames
    run.section("answers")                                     a section of summary.md, as the tool writes it
    run.figure("effects")                                      a matplotlib figure of plots/

It reads a live run folder, a finished one or a shipped one through the folder's store (read only: it writes
nothing, and holds no lock) and answers from the same sections summary.md is rendered from.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import pandas as pd

from bilevel_tune.report import plots
from bilevel_tune.report.answers import by_group
from bilevel_tune.report.columns import BEST, FINAL
from bilevel_tune.report.grids import mean_grid
from bilevel_tune.report.pipeline import SECTIONS, Summary, summarise
from bilevel_tune.study_data.run_store import RunStore, open_store
from bilevel_tune.verdicts.family import SIMPLE

FIGURES = {  # a figure's name → how plots/ draws it (`landscape` takes a mechanism's name, `best_so_far` an x axis)
    "effects": plots.plot_effects,
    "final_pairs": plots.plot_final_pairs,
    "best_so_far": plots.plot_best_so_far,
    "ceiling": plots.plot_ceiling,
    "landscape": plots.plot_landscape,
}


class Run:
    """A run folder, read: its tables as DataFrames, its summary's sections and figures."""

    def __init__(self, store: RunStore):
        self.store = store

    @cached_property
    def _summary(self) -> Summary:
        return summarise(self.store)

    # -- the tables -------------------------------------------------------------------------------------------------
    @property
    def trials(self) -> pd.DataFrame:
        """One row per trial of the grid (trials.csv)."""
        return self.store.trials_table

    @property
    def generations(self) -> pd.DataFrame:
        """One row per ES trial and generation (generations.csv.gz)."""
        return self.store.generations_table

    @property
    def scores(self) -> pd.DataFrame:
        """Every score, one long table: trial, learner, rules, evaluations, final seed and its `value`."""
        return self.store.scores

    @property
    def costs(self) -> pd.DataFrame:
        """What each trial and held-out job spent: wall, CPUs, core-seconds."""
        return self.store.costs

    @property
    def answers(self) -> pd.DataFrame:
        """The comparisons decided, a row each (answers.csv)."""
        return self._summary.answers.csv_table()

    @property
    def paired(self) -> pd.DataFrame:
        """Every comparison's matched seeds: per seed, A's and B's final re-evaluation and B − A."""
        groups, rows = by_group(self.store.look_scores(self._summary.design.decide.score)), []
        for c in (r.hypothesis for r in self._summary.answers.rows if r.hypothesis.kind == SIMPLE):
            a, b = groups.get(c.a, {}), groups.get(c.b, {})
            rows += [{"comparison": c.key, "seed": s, "A": a[s], "B": b[s], "B − A": b[s] - a[s]} for s in sorted(set(a) & set(b))]
        return pd.DataFrame(rows)

    def grid(self, score: str = "final") -> pd.DataFrame:
        """Per cell, mean ± SD over seeds (seeds): the final re-evaluation (`final`, the answers' score) or the best
        objective (`best`, optimistic)."""
        return mean_grid(self.trials, {"final": FINAL, "best": BEST}[score])

    @property
    def robustness(self) -> pd.DataFrame | None:
        """The held-out learners' answers (robustness.csv); None where no held-out learner scored the run."""
        r = self._summary.robustness
        return None if r is None else r.table()

    @property
    def ceiling(self) -> pd.DataFrame:
        """The runs at the ceiling or within their own evaluation's noise of it (empty: none, or no ceiling)."""
        return self._summary.ceiling.rows

    @property
    def ceiling_value(self) -> float | None:
        """The objective value the summary looks for a ceiling at (None: its world names none)."""
        return self._summary.design.ceiling

    @property
    def scan(self) -> pd.DataFrame:
        """Each rules scan's best point (empty without a scan)."""
        return self._summary.scan_bests

    # -- what the summary says ------------------------------------------------------------------------------------
    @property
    def title(self) -> str:
        return plots.title(self._summary)

    @property
    def lines(self) -> list[str]:
        """The world's regime and the run's budget note, where it has them."""
        s = self._summary
        return [line for line in (f"World: {s.design.regime}" if s.design.regime else "", s.budget_note or "") if line]

    def section(self, name: str) -> str:
        """One section of summary.md, as the tool writes it ('' where the run has none): answers, against,
        robustness, needed, noise, … (`report.pipeline.SECTIONS`, those with markdown)."""
        names = [s.name for s in SECTIONS if s.markdown]
        if name not in names:
            raise ValueError(f"no section {name!r}; the sections: {', '.join(names)}")
        return "\n".join(dict(self._summary.markdown()).get(name, []))

    @property
    def landscapes(self) -> list[str]:
        """The mechanisms a rules scan drew a landscape of (`figure("landscape", name)`)."""
        return plots.landscape_names(self._summary) if not self.scan.empty else []

    def figure(self, name: str, *args):
        """A figure of plots/: effects, final_pairs, best_so_far (x: evaluations or elapsed_s), ceiling,
        landscape (a mechanism's name)."""
        if name not in FIGURES:
            raise ValueError(f"no figure {name!r}; the figures: {', '.join(FIGURES)}")
        return FIGURES[name](self._summary, *args)


def open_run(run_dir: str | Path) -> Run:
    """A run folder, read (`Run`); `StoreError`, one line, for a folder that is not a run's."""
    return Run(open_store(Path(run_dir)))
