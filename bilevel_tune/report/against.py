"""Against its pilot: each row of a run's Answers beside the same comparison in its pilot's — the earlier run whose
effects planned it — in the words a paper uses: it confirms the pilot's decision, reverses it, differs from it
(a difference against equivalence), decides what the pilot left undecided, leaves it undecided, or has not decided
it yet; a row the pilot did not ask is new.

The pilot's answers are copied into the run folder (`pilot.json`, by `bilevel-summary RUN --against PILOT`; read
back through the results store): a
shipped folder keeps them, and its summary rebuilds the same where the pilot's folder is gone. Rows are matched by
their comparison (the hypothesis's key, as verdicts.json records it), never by order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from bilevel_tune.report.columns import SummaryError, markdown_table
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data.run_folder import ANSWERS_CSV, PILOT_FILE, VERDICTS_FILE
from bilevel_tune.verdicts.looks import A_BETTER, B_BETTER, EQUIVALENT, NO_DIFFERENCE, OPEN

HEADING = "Against its pilot"  # the summary's section (quoted in run.md and, its findings, in the README)
CONFIRMS, REVERSES, DIFFERS = "confirms", "reverses", "differs"
DECIDES = "decides what the pilot left undecided"
LEAVES_UNDECIDED = "leaves undecided"
NOT_YET = "not decided yet"
NEITHER = "undecided in both"
NEW = "new: not in the pilot"
NOT_ASKED = "not asked here"
DECIDED = (A_BETTER, B_BETTER, EQUIVALENT, NO_DIFFERENCE)
SIDES = {A_BETTER: B_BETTER, B_BETTER: A_BETTER}


def pilot_record(pilot_dir: Path) -> dict[str, Any]:
    """What `pilot.json` keeps of a pilot folder (a run's or a shipped one): its name, whether its answers were
    confirmatory, its looks, margin and each comparison's decision — from its verdicts.json and answers.csv."""
    pilot_dir = Path(pilot_dir)
    try:
        answers = json.loads((pilot_dir / VERDICTS_FILE).read_text())["answers"]
        comparisons = answers["comparisons"]
    except (OSError, ValueError, KeyError, TypeError):
        raise SummaryError(
            f"--against {pilot_dir}: no answers to compare with (its {VERDICTS_FILE} is missing or holds none); "
            "give a run's folder or one under docs/results/ whose summary decided its comparisons"
        ) from None
    marks = pd.read_csv(pilot_dir / ANSWERS_CSV) if (pilot_dir / ANSWERS_CSV).is_file() else pd.DataFrame()
    confirmatory = bool(marks["confirmatory"].all()) if "confirmatory" in marks and len(marks) else None
    keep = ("comparison", "kind", "a", "b", "decision", "within_margin", "effect", "interval")
    return {
        "pilot": pilot_dir.resolve().name,
        "confirmatory": confirmatory,
        "looks": answers.get("looks"),
        "stages": answers.get("stages"),
        "margin": answers.get("margin"),
        "comparisons": [{k: c.get(k) for k in keep} for c in comparisons],
    }


@dataclass(frozen=True)
class Side:
    """One run's decision on a comparison."""

    decision: str
    within_margin: bool
    a: str
    b: str
    interaction: bool
    effect: float | None = None  # a pilot's B − A and its 95 % interval, where its record keeps them (pilot.json
    interval: tuple[float, float] | None = None  # since 2026-12-06): the effects figure draws them

    def words(self, margin: float | None) -> str:
        if self.decision in SIDES:
            winner = ("positive" if self.decision == B_BETTER else "negative") if self.interaction else (
                f"{self.b if self.decision == B_BETTER else self.a} better")  # fmt: skip
            return winner + (f", by less than {margin:g}" if self.within_margin and margin is not None else "")
        if self.decision == EQUIVALENT and margin is not None:
            return f"equivalent within ±{margin:g}"
        return self.decision


@dataclass(frozen=True)
class Row:
    comparison: str
    pilot: Side | None
    here: Side | None  # None: the pilot asked it, this run does not

    @property
    def verdict(self) -> str:
        if self.pilot is None:
            return NEW
        if self.here is None:
            return NOT_ASKED
        here, pilot = self.here.decision, self.pilot.decision
        if here == OPEN:
            return NOT_YET
        if here not in DECIDED:
            return LEAVES_UNDECIDED if pilot in DECIDED else NEITHER
        if pilot not in DECIDED:
            return DECIDES
        if here == pilot:
            return CONFIRMS
        return REVERSES if SIDES.get(here) == pilot else DIFFERS


@dataclass(frozen=True)
class Against:
    pilot: str
    confirmatory: bool | None
    margin: float | None
    pilot_margin: float | None
    rows: tuple[Row, ...]

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "comparison": r.comparison,
                    f"{self.pilot} (the pilot)": r.pilot.words(self.pilot_margin) if r.pilot else "–",
                    "here": r.here.words(self.margin) if r.here else "–",
                    "against the pilot": r.verdict,
                }
                for r in self.rows
            ]
        )

    def record(self) -> dict[str, Any]:
        """verdicts.json's `against`: the pilot and each row's verdict."""
        table = self.table()
        return {"pilot": self.pilot, "pilot_confirmatory": self.confirmatory, "rows": table.to_dict("records")}

    def findings(self) -> list[str]:
        """One line: of the pilot's decided rows, how many this run confirms, reverses, differs from, has not decided
        yet or leaves undecided; of the pilot's undecided ones, how many it decides; and its new rows."""
        asked = [r for r in self.rows if r.pilot is not None and r.here is not None]
        decided = [r.verdict for r in asked if r.pilot.decision in DECIDED]
        undecided = [r.verdict for r in asked if r.pilot.decision not in DECIDED]

        def counts(verdicts: list[str], order: tuple[str, ...]) -> str:
            return ", ".join(f"{verdicts.count(v)} {v}" for v in order if verdicts.count(v)) or "none"

        line = f"Of the pilot's {len(decided)} decided row(s) asked here: {counts(decided, (CONFIRMS, REVERSES, DIFFERS, NOT_YET, LEAVES_UNDECIDED))}."
        if undecided:
            line += f" Of its {len(undecided)} undecided: {counts(undecided, (DECIDES, NOT_YET, NEITHER))}."
        new = sum(r.verdict == NEW for r in self.rows)
        return [line + (f" {new} row(s) new, not in the pilot." if new else "")]


def compare(rows: Sequence, margin: float | None, pilot: dict[str, Any]) -> Against:
    """This run's Answers rows (`answers.Answers.rows`) against the pilot's record (`pilot_record`), by comparison."""
    theirs = {c["comparison"]: c for c in pilot["comparisons"]}
    out, seen = [], set()
    for r in rows:
        key = r.hypothesis.key
        a, b = r.hypothesis.levels()
        interaction = r.hypothesis.kind == "interaction"
        here = Side(r.decision.decision, bool(r.decision.within_margin), a, b, interaction)
        c = theirs.get(key)
        out.append(Row(key, _pilot_side(c) if c else None, here))
        seen.add(key)
    out += [Row(key, _pilot_side(c), None) for key, c in theirs.items() if key not in seen]
    return Against(pilot["pilot"], pilot.get("confirmatory"), margin, pilot.get("margin"), tuple(out))


def _pilot_side(c: dict[str, Any]) -> Side:
    interval = tuple(c["interval"]) if c.get("interval") is not None else None
    return Side(c["decision"], bool(c["within_margin"]), c["a"], c["b"], c["kind"] == "interaction", c.get("effect"),
                interval)  # fmt: skip


def _markdown(s: Summary) -> list[str]:
    """## Against its pilot (with a pilot.json): each row beside the pilot's decision on the same comparison."""
    if s.against is None:
        return []
    a = s.against
    mark = {True: ", confirmatory", False: ", exploratory"}.get(a.confirmatory, "")
    return [
        f"## {HEADING} ({a.pilot}{mark})",
        "",
        f"Each row of the Answers beside the same comparison in {a.pilot}'s answers (kept in {PILOT_FILE}): it confirms "
        "the pilot's decision, reverses it (the other side better), differs from it (a difference against "
        "equivalence), decides what the pilot left undecided, leaves it undecided at its plan's end, or has not "
        "decided it yet.",
        "",
        markdown_table(a.table()),
        "",
        *[f"- {line}" for line in a.findings()],
        "",
    ]


def _compute(s: Summary) -> Against | None:
    found = s.answers
    return compare(found.rows, s.design.decide.margin, s.store.pilot) if s.store.pilot and found.rows else None


SECTION = Section(
    "against", compute=_compute, markdown=_markdown, short=lambda s: [f"- {line}" for line in s.against.findings()] if s.against else [],
    record=lambda s: {"against": s.against.record()} if s.against is not None else {},
)  # fmt: skip
