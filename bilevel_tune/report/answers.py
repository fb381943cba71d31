"""The study's answers, as summary.md leads with them: its hypotheses decided (`verdicts.decide`) — main effects,
interactions, simple effects —, each with the effect beside it: B − A with its 95 % interval, the seeds that agree,
the SD of the cells it reads only, the seeds used and those a paired test would need (`verdicts.effects`), what a
run of each side spent (inner-loop evaluations, wall time) and each side's best objective, labelled optimistic: the
best of many noisy evaluations, more of them for a larger population. The Answers block's one-line findings (the
ceiling, the range edges, search vs grid) are their sections' (`ceiling`, `edges`, `seed_noise`).

Reads the run's store (its look scores and trial rows, by cell key), so a shipped result folder answers as its run
folder did.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bilevel_tune.report.columns import BEST, FINAL, FINAL_MEAN, at_budget, markdown_table
from bilevel_tune.report.edges import edge_line
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data.run_folder import ANSWERS_CSV, group_of, key_at_evaluations
from bilevel_tune.study_data.run_store import COMPLETE
from bilevel_tune.verdicts import decide, effects, family, plan_mark, sequential

KINDS = {family.MAIN: "main effect", family.INTERACTION: "interaction", family.SIMPLE: "simple effect"}


@dataclass(frozen=True)
class Answer:
    """One hypothesis: its decision, the effect beside it, and what each side's runs cost."""

    decision: decide.Decision
    effect: effects.Effect
    runs: tuple[int, int]  # A's, B's (per group; a main effect's: per group of each side)
    evaluations: tuple[float, float]  # inner-loop evaluations per run (ES generations × population)
    wall_s: tuple[float, float]  # per run
    best: tuple[float, float]  # the best objective's mean, optimistic
    decided_at: int | None = None  # a row decided on an earlier look's seeds: that look (its effect is that look's)
    equivalence: tuple[float, float] | None = None  # its repeated interval at the look its equivalence was shown
    level: float = 0.0  # the level its seeds needed are computed at: its own, or a gated row's once it gets a share
    core_s: tuple[float, float] = (float("nan"), float("nan"))  # per run: CPU seconds, OS-measured (else wall × CPUs)
    core_measured: bool = True  # False: a run from before core-seconds were measured, priced at wall × its CPUs

    @property
    def hypothesis(self):
        return self.decision.hypothesis

    def text(self, decisions: decide.Decisions, by_key: dict[str, "Answer"] | None = None) -> str:
        """The answer in words: who is better, or why nothing is decided and what would decide it."""
        h, outcome, e, d = self.hypothesis, self.decision.outcome, self.effect, self.decision
        less = f", by less than {decisions.margin:g}" if d.within_margin else ""
        at, n = "", max(decisions.seeds_per_look, 1)
        if d.within_margin and outcome != decide.EQUIVALENT and d.margin_seeds != d.seeds:  # each claim at its own look
            low, high = self.equivalence or (float("nan"), float("nan"))
            at = f" at look {d.seeds // n}"
            less += (f" at look {d.margin_seeds // n} ({d.margin_seeds} seeds: [{low:+.4f}, {high:+.4f}] inside "
                     f"±{decisions.margin:g})")  # fmt: skip
        if h.kind == family.INTERACTION and outcome in (decide.A_BETTER, decide.B_BETTER):
            return _interaction_words(h, outcome, decisions, by_key or {}) + at + less
        a, b = h.levels()
        gated = decisions.test == decide.PAIRED and d.level <= 0
        need = _needed(e, d.seeds, decisions.test, self.level if gated else None)
        if outcome == decide.A_BETTER:
            return f"{a} better{at}{less}"
        if outcome == decide.B_BETTER:
            return f"{b} better{at}{less}"
        if outcome == decide.EQUIVALENT:
            return f"equivalent within ±{decisions.margin:g}"
        if outcome == decide.NO_DIFFERENCE:
            return f"no difference at the detectable effect (|B − A| < {e.detectable:.4f})"
        need += _equivalence_needed(e, self.decision, decisions.margin)
        if outcome == decide.UNDECIDED:
            return f"undecided at {self.decision.seeds} seeds; {need}"
        return (
            f"open after stage {decisions.looks} of {decisions.stages} ({self.decision.seeds} seeds; "
            f"`--resume --until-decided` adds seeds); {need}"
        )

    def short(self, decisions: decide.Decisions) -> str:
        """The answer in a few words (a figure's panel title)."""
        outcome = self.decision.outcome
        if self.hypothesis.kind == family.INTERACTION and outcome in (decide.A_BETTER, decide.B_BETTER):
            return "interaction shown"
        if outcome in (decide.A_BETTER, decide.B_BETTER, decide.NO_DIFFERENCE, decide.EQUIVALENT):
            return self.text(decisions).split(" (")[0].split(",")[0]
        if outcome == decide.UNDECIDED:
            return f"undecided at {self.decision.seeds} seeds"
        return f"open after stage {decisions.looks} of {decisions.stages}"


def _interaction_words(h: family.Interaction, outcome: str, decisions: decide.Decisions, by_key: dict) -> str:
    """A decided interaction in words: where the first factor's difference is larger, and what its comparisons at
    each of the second factor's two levels say ('2-D − 1-D is larger at population 1 than at population 16: 2-D
    better at population 1, not shown at population 16')."""
    (a, b), (e, f) = h.first_levels(), h.levels()
    larger, smaller = (f, e) if outcome == decide.B_BETTER else (e, f)
    said = []
    for where in (larger, smaller):
        simple = next(
            (r for key, r in by_key.items() if r.hypothesis.kind == family.SIMPLE and key == f"{b} vs {a} at {where}"), None
        )
        if simple is None:
            continue
        o = simple.decision.outcome
        if o in (decide.A_BETTER, decide.B_BETTER):
            said.append(f"{b if o == decide.B_BETTER else a} better at {where}")
        else:
            said.append(f"equivalent at {where}" if o == decide.EQUIVALENT else f"not shown at {where}")
    return f"{b} − {a} is larger at {larger} than at {smaller}" + (f": {', '.join(said)}" if said else "")


def _equivalence_needed(e: effects.Effect, decision: decide.Decision, margin: float | None) -> str:
    """With a margin, what showing equivalence would take at the observed difference and contrast SD ('' without)."""
    if margin is None or not e.paired or not np.isfinite(e.sd_contrast) or decision.margin_level <= 0:
        return ""
    seeds = effects.equivalence_seeds_needed(e.mean, e.sd_contrast, decision.margin_level, margin)
    if seeds is None:
        return f"; |B − A| is {margin:g} or more: no number of seeds shows it equivalent within ±{margin:g}"
    if seeds > effects.MOST_SEEDS:
        return f"; equivalence within ±{margin:g} would need more than {effects.MOST_SEEDS:,} seeds"
    return f"; equivalence within ±{margin:g} would need {seeds} seeds"


def _needed(e: effects.Effect, used: int, test: str, gated: float | None = None) -> str:
    if gated is not None:  # no share of α yet: its seeds at the level it gets once what gates it is shown
        if gated <= 0:
            return "gated: it has no share of α yet, and would get none once its main effect is shown"
        return f"gated: at the α {gated:.3g} it gets once its main effect is shown, " + _needed(e, used, test)
    seeds = e.seeds_needed
    if seeds is None and not np.isfinite(e.sd):
        return "one seed per cell measures no seed noise: no estimate of the seeds needed"
    if seeds is None:
        return "no effect observed: no number of seeds would show one"
    if seeds > effects.MOST_SEEDS:
        return f"a paired test would need more than {effects.MOST_SEEDS:,} seeds"
    if seeds <= used and test == decide.ADASTOP:  # the t-test pairs the seeds, AdaStop permutes them unpaired
        as_many = "as many as" if seeds == used else "fewer than"
        return f"a paired test would need {seeds} seeds, {as_many} ran (AdaStop does not pair them)"
    if seeds <= used:  # the single t-test at this level; the sequential test's looks spend some of it earlier
        as_many = "as many as" if seeds == used else "fewer than"
        return f"a single paired t-test at its level would need {seeds} seeds, {as_many} ran (the looks cost power)"
    return f"a paired test would need {seeds} seeds"


@dataclass(frozen=True)
class Answers:
    """The study's hypotheses, decided (`verdicts.decide`), each with its effect and what its runs cost."""

    decisions: decide.Decisions | None
    rows: tuple[Answer, ...]
    error: str | None  # why nothing could be decided (a trial without a score)

    def by_key(self) -> dict[str, Answer]:
        return {r.hypothesis.key: r for r in self.rows}

    def texts(self) -> list[str]:
        keyed = self.by_key()
        return [r.text(self.decisions, keyed) for r in self.rows]

    def table(self) -> pd.DataFrame:
        """One row per hypothesis, as summary.md, verdicts.json and W&B show it."""
        rows = []
        paired_test = self.decisions is not None and self.decisions.test == decide.PAIRED
        for r, text in zip(self.rows, self.texts()):
            e = r.effect
            interval = f" [{e.low:+.4f}, {e.high:+.4f}]" if np.isfinite(e.low) else ""
            if r.decided_at is not None:
                interval += f" at look {r.decided_at} ({r.decision.seeds} seeds)"
            sides = r.hypothesis.kind != family.INTERACTION
            row = {"comparison": r.hypothesis.key}
            if paired_test:
                row["kind"] = KINDS[r.hypothesis.kind]
            row.update(
                {
                    "answer": text,
                    "B − A [95 % CI]": f"{e.mean:+.4f}{interval}",
                    "pairs agreeing": f"{e.agreeing} of {e.pairs}" if e.paired else "unmatched",
                    "SD of these cells": e.sd,
                    "seeds": f"{r.runs[0]} / {r.runs[1]}" if sides else f"{min(r.runs)}",
                    "evaluations per run A / B": f"{r.evaluations[0]:,.0f} / {r.evaluations[1]:,.0f}" if sides else "–",
                    "wall per run A / B": f"{_hms(r.wall_s[0])} / {_hms(r.wall_s[1])}" if sides else "–",
                    "core-h per run A / B": _core_hours(r) if sides else "–",
                    "best A / B (optimistic)": f"{r.best[0]:.4f} / {r.best[1]:.4f}" if sides else "–",
                    "test": _test_label(self.decisions, r.decision),
                }
            )
            rows.append(row)
        return pd.DataFrame(rows)

    def csv_table(self) -> pd.DataFrame:
        """answers.csv: the table, with each row's `decision` (A better, B better, equivalent, undecided, open) and
        `within_margin` (shown within the margin, alone or beside a winner) after its answer in words."""
        table = self.table()
        at = list(table.columns).index("answer") + 1 if len(table) else 0
        table.insert(at, "decision", [r.decision.decision for r in self.rows])
        table.insert(at + 1, "within_margin", [r.decision.within_margin for r in self.rows])
        return table

    def record(self) -> dict[str, Any]:
        """verdicts.json's `answers`, the comparisons' part."""
        return {
            "test": self.decisions.test_name if self.decisions else None,
            "alpha": self.decisions.alpha if self.decisions else None,
            "margin": self.decisions.margin if self.decisions else None,
            "looks": self.decisions.looks if self.decisions else 0,
            "stages": self.decisions.stages if self.decisions else 0,
            "error": self.error,
            "comparisons": [
                {
                    "comparison": r.hypothesis.key,
                    "kind": r.hypothesis.kind,
                    "factor": r.hypothesis.factor,
                    "a": r.hypothesis.levels()[0],
                    "b": r.hypothesis.levels()[1],
                    "outcome": r.decision.outcome,
                    "decision": r.decision.decision,
                    "within_margin": r.decision.within_margin,
                    "answer": text,
                    "stage": r.decision.look,
                    "level": r.decision.level,
                    "effect": r.effect.mean,
                    "interval": [r.effect.low, r.effect.high],
                    "paired": r.effect.paired,
                    "pairs": r.effect.pairs,
                    "agreeing": r.effect.agreeing,
                    "sd": r.effect.sd,
                    "seeds": list(r.runs),
                    "seeds_needed": r.effect.seeds_needed,
                    "detectable": r.effect.detectable,
                    "evaluations_per_run": list(r.evaluations),
                    "wall_s_per_run": list(r.wall_s),
                    "core_s_per_run": list(r.core_s), "core_s_measured": r.core_measured,
                    "best_objective": list(r.best),
                }
                for r, text in zip(self.rows, self.texts())
            ],
        }


def _test_label(decisions: decide.Decisions, decision: decide.Decision) -> str:
    if decisions.test == decide.ADASTOP:
        return f"AdaStop, α {decisions.alpha:g}"
    if decision.level <= 0 and decision.margin_level <= 0:
        return "paired t, gated (no share of α)"
    if decisions.margin is None:
        return f"paired t, α {decision.level:.3g}"
    return f"paired t, α {decision.level:.3g}; within ±{decisions.margin:g}, α {decision.margin_level:.3g}"


def _core_hours(r: Answer) -> str:
    """Each side's core-hours a run, '≈' where priced at wall × CPUs (a run from before they were measured)."""
    if not np.isfinite(r.core_s).any():
        return "–"
    shown = " / ".join(f"{s / 3600:.2f}" if np.isfinite(s) else "–" for s in r.core_s)
    return shown if r.core_measured else f"≈ {shown}"


def _hms(seconds: float) -> str:
    if not np.isfinite(seconds):
        return "–"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# -- comparisons -------------------------------------------------------------------------------
def _gated_level(design, decisions: decide.Decisions, decision: decide.Decision) -> float:
    """A row with no share of α (gated behind its main effect): the level it gets once that is shown; AdaStop's
    rows: the family's α."""
    if decisions.test != decide.PAIRED:
        return decisions.alpha
    return decide.gated_level(design, decision.hypothesis)


def _equivalence(decisions: decide.Decisions, decision: decide.Decision, scores, design) -> tuple[float, float] | None:
    """The repeated interval a row's equivalence claim was shown by: at its look, at twice its level (two one-sided
    tests at that level each); None where it was not shown."""
    if not decision.margin_look or decisions.test != decide.PAIRED:
        return None
    n = decisions.seeds_per_look
    seeds = [s for stage in range(1, decision.margin_look + 1) for s in design.stage_seeds(stage)]
    values = family.values(decision.hypothesis, scores, seeds)
    return sequential.t_levels(n, decisions.stages, 2 * decision.margin_level).interval(values, decision.margin_look)


def at_smaller_budgets(design, rows: dict[tuple, pd.Series]) -> dict[tuple, pd.Series]:
    """The rows by cell key and, under `key_at_evaluations`, each run's row at every smaller budget it was compared
    at (`[decide] equal_budget`): its final scores, evaluations and best so far then (its wall time then unknown)."""
    out = dict(rows)
    for key, row in rows.items():
        for e in design.equal_evaluations(key[0]):
            then = row.copy()
            for column in (FINAL, FINAL_MEAN, "evaluations", BEST):
                then[column] = row.get(at_budget(column, e), np.nan)
            then["wall_s"] = then["core_s"] = np.nan
            out[key_at_evaluations(key, e)] = then
    return out


def answers(design, store) -> Answers:
    """The study's hypotheses decided on the run's look scores (`RunStore.look_scores`: by cell key, the scores every
    look decides from), each with its effect and what its runs spent (the store's trial rows, by cell key)."""
    return decided(design, store.trial_rows, store.look_scores(design.decide.score))


def decided(design, rows_of: dict[tuple, pd.Series], finals: dict[tuple, float]) -> Answers:
    """The hypotheses decided on these scores by cell key (`finals`), with the trials' rows beside them."""
    by_key = at_smaller_budgets(design, {key: row for key, row in rows_of.items() if row.get("status") in COMPLETE})
    names = {key: row["trial"] for key, row in rows_of.items() if isinstance(row.get("trial"), str)}
    decisions, error, rows = None, None, []
    try:
        decisions = decide.decide(design, finals, names)
    except decide.DecideError as err:
        error = str(err)
    if decisions is not None:
        scores = by_group(finals)
        for decision in decisions.decisions:
            level = decision.level or _gated_level(design, decisions, decision)  # a gated row: what it would get
            seeds = decided_seeds(design, decision, decisions)
            found = _answer(design, decision, by_key, scores, level)
            if seeds is not None:
                then = {key: row for key, row in by_key.items() if key[2] in seeds}
                scores_then = {g: {s: v for s, v in by_seed.items() if s in seeds} for g, by_seed in scores.items()}
                found = dataclasses.replace(_answer(design, decision, then, scores_then, level),
                                            decided_at=decision.seeds // decisions.seeds_per_look)  # fmt: skip
            rows.append(dataclasses.replace(found, equivalence=_equivalence(decisions, decision, scores, design), level=level))
    return Answers(decisions, tuple(rows), error)


def by_group(scores: dict[tuple, float]) -> dict[tuple, dict[int, float]]:
    """Look scores by cell key (`RunStore.look_scores`) as each group's, by seed; a cell without a score left out."""
    out: dict[tuple, dict[int, float]] = {}
    for key, value in scores.items():
        if np.isfinite(value):
            out.setdefault(group_of(key), {})[key[2]] = float(value)
    return out


def decided_seeds(design, decision: decide.Decision, decisions: decide.Decisions) -> set[int] | None:
    """The seeds a row was decided on, where that is an earlier look's (its interval is that look's); None when it
    reads every seed so far."""
    decided = decision.outcome in (decide.A_BETTER, decide.B_BETTER, decide.EQUIVALENT, decide.NO_DIFFERENCE)
    n = decisions.seeds_per_look
    if not decided or decisions.test != decide.PAIRED or decision.seeds >= n * decisions.looks:
        return None
    return {s for stage in range(1, decision.seeds // n + 1) for s in design.stage_seeds(stage)}


def _answer(design, decision: decide.Decision, by_key: dict[tuple, pd.Series], scores, level: float) -> Answer:
    h = decision.hypothesis
    sides = [[g for g, w in h.contrast if w < 0], [g for g, w in h.contrast if w > 0]]
    runs = [[row for g in side for row in _side(by_key, g).values()] for side in sides]
    cells = [np.array(list(scores.get(g, {}).values())) for g in family.groups(h)]
    if h.kind == family.SIMPLE:
        effect = effects.effect(scores.get(h.a, {}), scores.get(h.b, {}), level)
    else:
        effect = effects.paired(np.array(list(decide.within_seed(scores, h).values())), effects.pooled_sd(cells),
                                level)  # fmt: skip
    return Answer(
        decision=decision,
        effect=effect,
        runs=tuple(len(side) // max(len(groups), 1) for side, groups in zip(runs, sides)),
        evaluations=tuple(_mean(side, "evaluations") for side in runs),
        wall_s=tuple(_mean(side, "wall_s") for side in runs),
        core_s=tuple(_mean([_priced(row) for row in side], "core_s") for side in runs),
        core_measured=all(pd.notna(row.get("core_s")) for side in runs for row in side),
        best=tuple(_mean(side, BEST) for side in runs),
    )


def _side(by_key: dict[tuple, pd.Series], group: tuple) -> dict[int, pd.Series]:
    """A group's finished runs, by seed."""
    return {key[2]: row for key, row in by_key.items() if group_of(key) == group}


def _priced(row: pd.Series) -> pd.Series:
    """A run's row with its core-seconds: as measured, else its wall × its CPUs (one a shard)."""
    if pd.notna(row.get("core_s")) or pd.isna(row.get("wall_s")):
        return row
    row = row.copy()
    row["core_s"] = float(row["wall_s"]) * float(row.get("shards", 1) or 1)
    return row


def _mean(rows: list[pd.Series], column: str) -> float:
    values = [float(row[column]) for row in rows if column in row and pd.notna(row[column])]
    return float(np.mean(values)) if values else float("nan")


# -- the section -------------------------------------------------------------------------------------------------
SHORT_COLUMNS = ("comparison", "answer", "B − A [95 % CI]", "seeds")  # a README's quote: what was answered


def findings(s: Summary) -> list[str]:
    """The Answers' one-line findings under their table: the ceiling, the range edges, search vs grid."""
    grid = s.verdicts_best.get("search_vs_grid")
    return [line for line in (s.ceiling.line(), *(edge_line(e) for e in s.edges)) if line] + ([grid["sentence"]] if grid else [])


def _markdown(s: Summary) -> list[str]:
    """## Answers: one row per comparison, then the ceiling, the range edges and search vs grid, a line each."""
    a, design = s.answers, s.design
    lines = ["## Answers", ""]
    if a.error:
        lines += [f"Nothing decided: {a.error}.", ""]
    elif a.decisions is None or not a.rows:
        lines += ["No comparison: the grid varies no factor with two levels.", ""]
    else:
        d = a.decisions
        lines += [_answers_intro(d, len(a.rows), design.budget.final_eval_seeds, design.decide.score), ""]
        if s.plan is not None:
            lines += [s.plan.sentence(), ""]
        lines += [markdown_table(a.table()), ""]
        if d.incomplete:
            lines += [f"Not looked at yet: {d.incomplete}.", ""]
    said = findings(s)
    return lines + [f"- {line}" for line in said] + ([""] if said else [])


def _short(s: Summary) -> list[str]:
    """What the Answers answered, for a README: its plan's mark and test in a line, each row's answer, B − A and the
    seeds, the findings; the method is summary.md's."""
    a = s.answers
    if a.error or a.decisions is None or not a.rows:
        return _markdown(s)[2:]
    d = a.decisions
    how = (f"{d.test_name} at family-wise α {d.alpha:g} over {len(a.rows)} rows, after stage {d.looks} of {d.stages}"
           + (f", margin ±{d.margin:g}" if d.margin is not None else ""))  # fmt: skip
    mark = f"{s.plan.sentence()} " if s.plan is not None else ""
    table = a.table()[list(SHORT_COLUMNS)]
    table["answer"] = [text.split(";")[0] for text in table["answer"]]  # what it answered; what more would take: summary.md
    lines = [f"{mark}Decided by {how}; how, each row's test and what an undecided row would need: summary.md's "
             "Answers.", "", markdown_table(table), ""]  # fmt: skip
    said = findings(s)
    return lines + [f"- {line}" for line in said]


def _record(s: Summary) -> dict[str, Any]:
    """verdicts.json's `answers`: the decided hypotheses, the plan's mark, the ceiling's runs, the edges and the
    findings."""
    return {"answers": {
        **s.answers.record(), **(s.plan.record() if s.plan is not None else {}), "ceiling": s.ceiling.value,
        "ceiling_runs": s.ceiling.rows.to_dict(orient="records"), "edges": list(s.edges),
        "lines": [line for line in (s.ceiling.line(), *(edge_line(e) for e in s.edges)) if line],
    }}  # fmt: skip


def _tables(s: Summary) -> dict[str, pd.DataFrame]:
    table = s.answers.csv_table()
    if s.plan is not None and not table.empty:  # every row, undecided ones too, carries the run's mark
        table["confirmatory"] = s.plan.confirmatory
    return {ANSWERS_CSV: table}


PLAN = Section("plan", compute=lambda s: plan_mark.mark(s.design, s.store.record))
SECTION = Section("answers", compute=lambda s: answers(s.design, s.store), markdown=_markdown, short=_short,
                  record=_record, tables=_tables)  # fmt: skip


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
            "observed effect, and what each side's runs spent (core-hours; ≈: wall × CPUs, for runs from before they were "
            "measured)."
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
        "level (power 0.8, at the observed effect), and what each side's runs spent (core-hours as the operating system "
        "measured them; ≈: wall × CPUs, for runs from before they were)." + margin
    )


