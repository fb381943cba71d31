"""Robustness: does a designed mechanism hold against farms it was not designed with? (docs/verdicts.md)

Read from heldout.csv (`cli.reevaluation`): per trial, learner and final seed, the objective of the trial's final
rules and of its status quo (its searched rules at their defaults), each under that learner. Two questions, each
hypothesis decided in one family of its own at the study's α (Holm), apart from the Answers':

* **Is the gain positive?** Per cell (a group: one population, mechanism and further axes' values) and learner,
  the gain = final − status quo, paired within each trial's final seeds, one value per trial (its mean over them):
  a paired t-test of the cell's trials' gains (with one trial, of its final seeds' gains); a sign-flip where the
  gains have no spread.
* **Does each comparison's winner stay the winner?** Per comparison the Answers decided and held-out learner: the
  comparison's within-seed contrast of the learner's scores of the final rules (each trial's mean over its final
  seeds), tested as the Answers test one look: shown in the winner's direction ("holds"), shown the other way
  ("reversed"), or not shown.

A winner that holds under no held-out learner is said so in words: it wins only against its own learner. pandas
and numpy; the tests are `verdicts`' (`sequential.sign_flip_p`, `effects`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.report.answers import Answers
from bilevel_tune.report.columns import markdown_table, native
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data.learners import OWN
from bilevel_tune.study_data.run_folder import ROBUSTNESS_CSV, trial_name
from bilevel_tune.study_data.settings import plain
from bilevel_tune.verdicts import decide, effects, family

SHOWN_UP, SHOWN_DOWN, NOT_SHOWN = "positive", "negative", "not shown"
HOLDS, REVERSED = "holds", "reversed"


@dataclass(frozen=True)
class Row:
    """One hypothesis of the family: a cell's gain under a learner, or a comparison's winner under one."""

    question: str  # "gain" or "winner"
    where: str  # the cell, or the comparison
    learner: str
    effect: effects.Effect
    p: float  # two-sided
    shown: bool = False  # by Holm at the family's α
    winner: str = ""  # a winner row: the level the Answers found better
    expected: int = 0  # a winner row: the sign of B − A the Answers found (+1: B better)
    final: float = float("nan")  # a gain row: the final rules' and the status quo's mean objective
    status_quo: float = float("nan")

    @property
    def answer(self) -> str:
        e = self.effect
        if self.question == "gain":
            if not self.shown:
                return "not shown"
            return "gain" if e.mean > 0 else "loss"
        if not self.shown:
            return NOT_SHOWN
        return HOLDS if np.sign(e.mean) == self.expected else REVERSED


@dataclass(frozen=True)
class Robustness:
    learners: tuple[str, ...]  # labels, the run's own first
    status_quo: str  # what the status quo is, in words
    rows: tuple[Row, ...]
    alpha: float

    def gains(self) -> list[Row]:
        return [r for r in self.rows if r.question == "gain"]

    def winners(self) -> list[Row]:
        return [r for r in self.rows if r.question == "winner"]

    def lines(self) -> list[str]:
        """The section's findings in words: the status quo, then each comparison's winner under the learners."""
        out = [f"status quo: {self.status_quo}.", self._gains_line()]
        own = self.learners[0].removesuffix(OWN)
        for where in dict.fromkeys(r.where for r in self.winners()):
            rows = [r for r in self.winners() if r.where == where]
            winner = rows[0].winner
            holds = [r.learner for r in rows if r.answer == HOLDS]
            if not holds:
                said = ", ".join(f"{r.learner} {r.answer}" for r in rows)
                out.append(f"{where}: {winner} wins only against its own learner, {own}; under the held-out ones: {said}.")
            elif len(holds) == len(rows):
                out.append(f"{where}: {winner} stays the winner under every learner ({', '.join(holds)}).")
            else:
                rest = ", ".join(f"{r.learner} {r.answer}" for r in rows if r.answer != HOLDS)
                out.append(f"{where}: {winner} stays the winner under {', '.join(holds)}; {rest}.")
        return out

    def _gains_line(self) -> str:
        """How many cells gain over the status quo under each learner (and lose, where any is shown to), and the
        span of the cells' gains."""
        said = []
        for learner in self.learners:
            rows = [r for r in self.gains() if r.learner == learner]
            up, down = (sum(r.answer == a for r in rows) for a in ("gain", "loss"))
            low, high = (f"{f(r.effect.mean for r in rows):+.4f}" for f in (min, max))
            span = low if low == high else f"{low} to {high}"
            said.append(f"{learner} {up} of {len(rows)} ({span}" + (f"; a loss shown in {down})" if down else ")"))
        return f"a gain over the status quo shown in: {', '.join(said)} cells."

    def gains_table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "cell": r.where,
                    "learner": r.learner,
                    "gain [95 % CI]": _interval(r.effect),
                    "seeds agreeing": f"{r.effect.agreeing} of {r.effect.pairs}",
                    "final / status quo": f"{r.final:.4f} / {r.status_quo:.4f}",
                    "answer": r.answer,
                    "p": r.p,
                }
                for r in self.gains()
            ]
        )

    def winners_table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "comparison": r.where,
                    "winner": r.winner,
                    "learner": r.learner,
                    "B − A [95 % CI]": _interval(r.effect),
                    "seeds agreeing": f"{r.effect.agreeing} of {r.effect.pairs}",
                    "answer": r.answer,
                    "p": r.p,
                }
                for r in self.winners()
            ]
        )

    def table(self) -> pd.DataFrame:
        """robustness.csv: every hypothesis of the family, one row each."""
        return pd.DataFrame(
            [
                {
                    "question": r.question,
                    "where": r.where,
                    "learner": r.learner,
                    "winner": r.winner,
                    "effect": r.effect.mean,
                    "low": r.effect.low,
                    "high": r.effect.high,
                    "n": r.effect.pairs,
                    "agreeing": r.effect.agreeing,
                    "p": r.p,
                    "answer": r.answer,
                }
                for r in self.rows
            ]
        )

    def record(self) -> dict[str, Any]:
        """verdicts.json's `robustness`."""
        return {
            "learners": list(self.learners),
            "status_quo": self.status_quo,
            "alpha": self.alpha,
            "test": "paired t (a sign-flip where there is no spread), Holm over the family",
            "rows": self.table().to_dict(orient="records"),
            "lines": self.lines(),
        }


def _interval(e: effects.Effect) -> str:
    interval = f" [{e.low:+.4f}, {e.high:+.4f}]" if np.isfinite(e.low) else ""
    return f"{e.mean:+.4f}{interval}"


def robustness(design, heldout: pd.DataFrame, answers: Answers) -> Robustness | None:
    """The section, from heldout.csv's rows (None when the run has none)."""
    if heldout is None or heldout.empty:
        return None
    cells = {trial_name(design, c): c for c in design.cells}
    heldout = heldout[heldout["trial"].isin(cells)]
    per_trial = (
        heldout.groupby(["learner", "trial"], sort=False)[["final", "status_quo", "gain"]].mean().reset_index()
    )
    learners = tuple(dict.fromkeys(heldout["learner"]))
    rows = [_gain_row(design, cells, heldout, per_trial, learner, group) for learner in learners
            for group in design.groups if not _trials_of(per_trial, cells, learner, group).empty]  # fmt: skip
    rows += _winner_rows(design, cells, per_trial, learners[1:], answers)
    rows = _holm(rows, design.decide.alpha)
    return Robustness(learners, status_quo_words(design), tuple(rows), design.decide.alpha)


def _trials_of(per_trial: pd.DataFrame, cells: dict, learner: str, group: tuple) -> pd.DataFrame:
    mine = per_trial[(per_trial["learner"] == learner) & per_trial["trial"].map(lambda t: cells[t].group == group)]
    return mine


def _gain_row(design, cells, heldout, per_trial, learner: str, group: tuple) -> Row:
    trials = _trials_of(per_trial, cells, learner, group)
    if len(trials) >= 2:
        values = trials["gain"].to_numpy(float)
    else:  # one trial: the spread of its final seeds' gains
        values = heldout[(heldout["learner"] == learner) & (heldout["trial"] == trials["trial"].iloc[0])]["gain"]
        values = values.to_numpy(float)
    values = values[np.isfinite(values)]
    effect = effects.paired(values, float("nan"), design.decide.alpha)
    return Row(
        "gain", _group_label(design, group), learner, effect, effects.p_value(values),
        final=float(trials["final"].mean()), status_quo=float(trials["status_quo"].mean()),
    )  # fmt: skip


def _winner_rows(design, cells, per_trial, learners, answers: Answers) -> list[Row]:
    out = []
    for answer in answers.rows:
        outcome = answer.decision.outcome
        h = answer.hypothesis
        if outcome not in (decide.A_BETTER, decide.B_BETTER) or h.kind == family.INTERACTION:
            continue
        a, b = h.levels()
        expected = 1 if outcome == decide.B_BETTER else -1
        for learner in learners:
            mine = per_trial[per_trial["learner"] == learner]
            scores: dict[tuple, dict[int, float]] = {}
            for _, row in mine.iterrows():
                cell = cells[row["trial"]]
                scores.setdefault(cell.group, {})[cell.seed] = float(row["final"])
            if not all(g in scores for g in family.groups(h)):
                continue
            values = np.array(list(decide.within_seed(scores, h).values()), float)
            values = values[np.isfinite(values)]
            effect = effects.paired(values, float("nan"), design.decide.alpha)
            out.append(Row("winner", h.key, learner, effect, effects.p_value(values), winner=b if expected > 0 else a,
                           expected=expected))  # fmt: skip
    return out


def _holm(rows: list[Row], alpha: float) -> list[Row]:
    """Holm's step-down over the family (`effects.holm`)."""
    import dataclasses

    shown = effects.holm([r.p for r in rows], alpha)
    return [dataclasses.replace(r, shown=s) for r, s in zip(rows, shown)]


def _group_label(design, group: tuple) -> str:
    population, params, extra = group
    parts = [f"population {population}", design.mechanisms.label(params)]
    parts += [f"{k} {plain(native(v))}" for k, v in extra]
    return ", ".join(parts)


def status_quo_words(design) -> str:
    """The status quo in words: the searched rules at their defaults, the fixed ones as the study sets them."""
    searched = list(dict.fromkeys(p for params in design.optimize_params for p in params))
    defaults = {spec.name: spec.default for spec in design.table.rule_specs}
    fixed = {name: value for name, value in design.fixed_rules.items() if name not in searched}
    said = ", ".join(f"{name} {plain(defaults[name])}" for name in searched)
    kept = ", ".join(f"{name} {plain(value)}" for name, value in fixed.items())
    return f"each trial's searched rules at their defaults ({said}); the fixed rules as the study sets them ({kept})"


def _markdown(s: Summary) -> list[str]:
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
    lines += [markdown_table(r.gains_table()), ""]
    if r.winners():
        lines += ["Does each comparison's winner stay the winner?", "", markdown_table(r.winners_table()), ""]
    return lines


SECTION = Section(
    "robustness", compute=lambda s: robustness(s.design, s.store.heldout, s.answers), markdown=_markdown,
    short=lambda s: [f"- {line}" for line in s.robustness.lines()] if s.robustness else [],
    record=lambda s: {"robustness": s.robustness.record()} if s.robustness is not None else {},
    tables=lambda s: {ROBUSTNESS_CSV: s.robustness.table()} if s.robustness is not None else {},
)  # fmt: skip
