"""The summary of a run: every table, verdict and answer a run folder gives, as one `Summary` (`summarise`).

It puts together the trial and cell tables and the verdicts (`analysis`),
the rules scan (`landscape`) and the answers (`answers`); `summary` writes
them to files, `plots` draws them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bilevel_tune.report import landscape, tables
from bilevel_tune.report.analysis import BEST, FINAL, cell_table, grid_table, verdicts
from bilevel_tune.report.answers import Answers, answers
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.study_overrides import budget_label


@dataclass(frozen=True)
class Summary:
    study: Study
    trials: pd.DataFrame
    cells: pd.DataFrame
    grid: pd.DataFrame
    verdicts_best: dict[str, dict]
    verdicts_final: dict[str, dict] | None
    budget_note: str | None  # why these verdicts may not speak for the study (a smoke or shorter run)
    scans: pd.DataFrame  # the rules scan, one row per grid point (empty without a scan)
    scan_bests: pd.DataFrame  # each scan's best point
    generations: pd.DataFrame  # one row per ES trial and generation (`generation_table`)
    answers: Answers  # the comparisons decided, the ceiling, the edges
    tables: tables.RunTables  # what it was read from: a run's records, or a shipped folder's tables

    @property
    def verdicts(self) -> dict[str, dict]:
        """The verdicts that count: effects on the final re-evaluation when there is one, the ceiling on the best."""
        primary = self.verdicts_final or self.verdicts_best
        return {k: (primary[k] if is_effect(k) else v) for k, v in self.verdicts_best.items()}


def summarise(run_dir: Path) -> Summary:
    """Every table, verdict and answer of a run folder, or of a shipped result's folder (`tables.read`)."""
    read = tables.read(run_dir)
    study, table, scans, generations = read.study, read.trials, read.scans, read.generations
    bests = landscape.scan_bests(scans, study)
    done = table[table["generations"] > 0]
    has_final = FINAL in done and done[FINAL].notna().any()
    return Summary(
        study=study,
        trials=table,
        cells=cell_table(table),
        grid=grid_table(table),
        verdicts_best=verdicts(done, study.ceiling, study.summary.tol, BEST, bests),
        verdicts_final=verdicts(done, study.ceiling, study.summary.tol, FINAL) if has_final else None,
        budget_note=budget_note(study),
        scans=scans,
        scan_bests=bests,
        generations=generations,
        answers=answers(study, table, generations, bests),
        tables=read,
    )


def is_effect(key: str) -> bool:
    return key.endswith("_effect")


def budget_note(study: Study) -> str | None:
    """A label for verdicts from a run shorter than its study's budget (a named smoke budget, or overrides)."""
    short = [c for c in study.cells() if study.short_of_full(c)]
    if not study.smoke and not short:
        return None
    full = study.full_budget or study.budget
    ran = sorted({c.generations for c in study.cells()})
    planned = sorted({g for c in study.cells() if (g := study.full_generations_for(c.population)) is not None})
    of = f" of {'/'.join(map(str, planned))}" if planned else ""
    return (
        f"SHORT RUN (budget {budget_label(study)}): cells ran {'/'.join(map(str, ran))} generations{of}, "
        f"K = {study.budget.inner_iters} of {full.inner_iters} — these verdicts describe this run, not the science"
    )


def verdict_lines(s: Summary, effects_only: bool = False) -> list[str]:
    """The verdicts as the summary states them, one sentence each (selection-bias notes included); `effects_only`:
    without the ceiling and search-vs-grid sentences, which the Answers carry."""
    lines = [v["sentence"] for k, v in s.verdicts.items() if is_effect(k) or not effects_only]
    if s.verdicts_final:
        for k in (k for k in s.verdicts_final if is_effect(k)):
            final, best = s.verdicts_final[k]["verdict"], s.verdicts_best[k]["verdict"]
            if final != best:
                lines.append(
                    f"selection bias: the {k.replace('_', ' ')} is '{best}' on the best objective but '{final}' "
                    "on the final re-evaluation; trust the re-evaluation."
                )
    return lines
