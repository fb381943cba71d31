"""## What the answers needed: the run's own test, at its last look, on the incumbents of earlier moments
(anytime.csv, `cli.rescoring`): each Answers row's B − A, interval and answer at each budget asked for, the
smallest budget at which every decided row reads as the run decided it, and — where a factor changes a run's
evaluations (generations per population) — that factor's rows at equal evaluations.

Each trial's score at a budget is as its final re-evaluation makes one: the best-so-far rules of that moment
retrained on the run's recorded final seeds, the mean. Every row here is **exploratory**: the budgets were read
after the run, not planned before it (a study plans an equal-budget row before look 1 to make it confirmatory).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.report.answers import Answers, decided
from bilevel_tune.report.columns import markdown_table
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data import final_scores
from bilevel_tune.verdicts import decide


@dataclass(frozen=True)
class AtBudget:
    asked: str  # as it was asked for: 1/8, 1000
    evaluations: tuple[int, ...]  # what it came to, per trial (sorted, distinct)
    total: int  # evaluations over every trial: what a run of the grid at this budget spends
    answers: Answers
    equal: bool  # every trial at the same evaluations


@dataclass(frozen=True)
class Needed:
    run: Answers  # the run's own answers, at its whole budget
    budgets: tuple[AtBudget, ...]  # smallest first

    def reads_same(self, at: AtBudget) -> bool:
        """Every row the run decided reads the same here (its decision and whether it is within the margin)."""
        ours = {r.hypothesis.key: r.decision for r in at.answers.rows}
        for r in self.run.rows:
            if r.decision.outcome in (decide.OPEN, decide.UNDECIDED) or _planned_at(r):
                continue
            there = ours.get(r.hypothesis.key)
            if there is None or (there.decision, there.within_margin) != (r.decision.decision, r.decision.within_margin):
                return False
        return True

    def smallest_same(self) -> AtBudget | None:
        return next((b for b in self.budgets if self.reads_same(b)), None)

    def table(self) -> pd.DataFrame:
        rows = []
        for b in self.budgets:
            table = b.answers.table()
            if table.empty:
                continue
            for r, (_, shown) in zip(b.answers.rows, table.iterrows()):
                run = self.run.by_key().get(r.hypothesis.key)
                same = run is not None and (run.decision.decision, run.decision.within_margin) == (
                    r.decision.decision, r.decision.within_margin)  # fmt: skip
                rows.append({
                    "comparison": shown["comparison"] + (_equal_label(b) if b.equal and _budgets_differ(run) else ""),
                    "budget": _budget_label(b),
                    "answer": shown["answer"],
                    "B − A [95 % CI]": shown["B − A [95 % CI]"],
                    "pairs agreeing": shown["pairs agreeing"],
                    "as the run decided": "yes" if same else "no",
                })  # fmt: skip
        return pd.DataFrame(rows)

    def equal_rows(self) -> pd.DataFrame:
        """The rows of factors that change a run's evaluations, at equal evaluations: the answers a comparison of
        populations at the same number of farm trainings gives."""
        table = self.table()
        if table.empty:
            return table
        return table[table["comparison"].str.contains("at equal evaluations", regex=False)]

    def lines(self) -> list[str]:
        same = self.smallest_same()
        decided = sum(r.decision.outcome not in (decide.OPEN, decide.UNDECIDED) for r in self.run.rows)
        if not decided:
            said = ["the run decided no row: nothing to read the same at a smaller budget."]
        elif same is None:
            said = [f"at none of the budgets asked do all {decided} decided rows read as the run decided them."]
        else:
            said = [f"the smallest budget asked at which all {decided} decided rows read as the run decided them: "
                    f"{_budget_label(same)}."]  # fmt: skip
        equal = self.equal_rows()
        if not equal.empty:
            answers = "; ".join(
                f"{r.comparison.split(', at equal evaluations')[0]}: {r.answer.split(';')[0]}" for r in equal.itertuples()
            )
            said.append(f"at equal evaluations ({equal['budget'].iloc[0]}): {answers}.")
        return said

    def record(self) -> dict[str, Any]:
        same = self.smallest_same()
        return {
            "exploratory": True,
            "smallest_budget_reading_the_same": same.asked if same else None,
            "rows": self.table().to_dict(orient="records"),
        }


def _planned_at(row) -> bool:
    """A row the study planned at equal evaluations (`[decide] equal_budget`): decided by the run itself."""
    return getattr(row.hypothesis, "at", None) is not None


def _unplanned(found: Answers) -> Answers:
    """The answers at a budget read after the run, less the rows planned at equal evaluations (whose budget is the
    run's own, not this one)."""
    return dataclasses.replace(found, rows=tuple(r for r in found.rows if not _planned_at(r)))


def _budget_label(b: AtBudget) -> str:
    if b.equal:
        return f"{b.evaluations[0]:,} evaluations each"
    if "/" in b.asked:
        return f"{b.asked} of each trial's budget ({' / '.join(f'{e:,}' for e in b.evaluations)})"
    return f"{b.asked} ({' / '.join(f'{e:,}' for e in b.evaluations)})"


def _equal_label(b: AtBudget) -> str:
    return f", at equal evaluations ({b.evaluations[0]:,} each)"


def _budgets_differ(run) -> bool:
    return run is not None and np.isfinite(run.evaluations).all() and run.evaluations[0] != run.evaluations[1]


def needed_section(design, store, run: Answers) -> Needed | None:
    """The run's answers at each budget anytime.csv holds for every finished trial; None without any. Each budget's
    rows are decided as the run's are (`answers.decided`), on its incumbents' scores by cell key."""
    anytime = store.anytime
    if anytime is None or anytime.empty or run.decisions is None:
        return None
    rows_of = store.trial_rows
    names = {key: final_scores.trial_of_folder(row["trial"]) for key, row in rows_of.items()
             if isinstance(row.get("trial"), str)}  # fmt: skip
    k = design.budget.final_eval_seeds
    best = anytime[anytime["rules"] == design.decide.score]  # the rules the study's score reads
    found = []
    for asked, rows in best.groupby("asked", sort=False):
        per_trial = rows.groupby("trial")
        scores = per_trial["value"].apply(lambda v: float(np.mean(v.to_numpy()[:k])) if len(v) >= k else np.nan)
        evaluations = per_trial["evaluations"].first()
        if not set(names.values()) <= set(scores.index):
            continue  # a budget not scored for every trial yet (a step still under way)
        finals = store.look_scores(design.decide.score)
        finals.update({key: float(scores[name]) for key, name in names.items() if key in finals})
        then = {key: _spent(row, evaluations.get(names.get(key))) for key, row in rows_of.items()}
        distinct = tuple(sorted({int(e) for e in evaluations}))
        total = int(sum(evaluations[name] for name in names.values()))
        found.append(AtBudget(str(asked), distinct, total, _unplanned(decided(design, then, finals)), len(distinct) == 1))
    found.sort(key=lambda b: b.total)
    return Needed(run, tuple(found)) if found else None


def _spent(row: pd.Series, evaluations) -> pd.Series:
    """A trial's row as it stood after `evaluations` (what its runs spent then)."""
    row = row.copy()
    row["evaluations"] = evaluations if evaluations is not None else np.nan
    return row


def _markdown(s: Summary) -> list[str]:
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
                  markdown_table(equal), ""]  # fmt: skip
    lines += [markdown_table(n.table()), ""]
    return lines


SECTION = Section(
    "needed", compute=lambda s: needed_section(s.design, s.store, s.answers), markdown=_markdown,
    short=lambda s: [f"- {line}" for line in s.needed.lines()] if s.needed else [],
    record=lambda s: {"needed": s.needed.record()} if s.needed is not None else {},
)  # fmt: skip
