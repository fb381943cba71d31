"""A finished run read as a pilot: its decided rows' effects and noise at each score and budget it was scored at
(finals.csv, anytime.csv), its cells' costs, and the designs the planner compares (`planning.pilot_designs`), printed by
`python -m bilevel_tune.study STUDY --dry-run --pilot RUN_DIR`.
"""

from __future__ import annotations

import dataclasses
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from bilevel_tune.planning import pilot_designs
from bilevel_tune.planning.plan import hms
from bilevel_tune.report import pipeline
from bilevel_tune.report.columns import SummaryError
from bilevel_tune.report.noise_split import final_scores_by_group
from bilevel_tune.study_data import final_scores
from bilevel_tune.study_data.run_folder import at_evaluations, trial_name
from bilevel_tune.study_data.run_store import StoreError, open_store
from bilevel_tune.verdicts import decide, family, noise

DECIDED = (decide.A_BETTER, decide.B_BETTER, decide.EQUIVALENT, decide.NO_DIFFERENCE)


class PilotError(ValueError):
    """A folder that cannot serve as a pilot for this study; one line."""


def read_pilot(design, run_dir: Path) -> pipeline.Summary:
    """The pilot's summary; PilotError when it is not a finished run of this study's world with final scores."""
    try:
        found = pipeline.summarise(open_store(run_dir))
    except (SummaryError, StoreError, OSError, ValueError, KeyError) as err:
        raise PilotError(f"--pilot {run_dir}: not a run folder or a shipped result ({str(err).splitlines()[0]})") from None
    mine, theirs = _world(design), _world(found.design)
    if mine != theirs:
        differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        raise PilotError(
            f"--pilot {run_dir}: its world is not this study's ({', '.join(f'{k} {theirs.get(k)!r} ≠ {mine.get(k)!r}' for k in differ)}); "
            "a pilot must run the same world"
        )
    per_trial = found.store.finals.groupby("trial")["final_seed"].nunique() if not found.store.finals.empty else pd.Series()
    if per_trial.empty or per_trial.max() < 2:
        raise PilotError(
            f"--pilot {run_dir}: no final scores seed by seed (finals.csv, or heldout.csv's own rows); give a run whose "
            "trials recorded them, or re-score it first: --reevaluate RUN_DIR --final-seeds 16"
        )
    return found


def _world(design) -> dict:
    return {"world": design.world_kind, **{k: v for k, v in design.settings.items() if k.startswith("world.")}}


def scored_at(summary: pipeline.Summary) -> dict[tuple[str, Fraction], dict]:
    """{(score, budget fraction): {group: {run seed: {final seed: objective}}}}: the whole budget from finals.csv,
    each fraction of it from anytime.csv."""
    design, t = summary.design, summary.store
    scored = {(rules, Fraction(1)): final_scores_by_group(design, t.finals, rules) for rules in final_scores.RULES}
    if not t.anytime.empty:
        for asked, rows in t.anytime.groupby("asked", sort=False):
            if "/" in str(asked):  # a fraction of each trial's budget: a design's budget
                for rules in final_scores.RULES:
                    scored[(rules, Fraction(str(asked)))] = final_scores_by_group(design, rows, rules)
    return scored


def pilot_rows(summary: pipeline.Summary) -> list[pilot_designs.PilotRow]:
    """The pilot's decided rows, each with its components at every (score, budget) it was scored at."""
    design = summary.design
    scored = scored_at(summary)
    out = []
    for answer in summary.answers.rows:
        d = answer.decision
        if d.outcome not in DECIDED:
            continue
        at = {}
        for key, scores in scored.items():
            split = noise.split(answer.hypothesis, scores, design.budget.final_eval_seeds)
            if split is not None and split.run_seeds >= 2:
                at[key] = pilot_designs.Components(split.effect, split.run_var, split.eval_var, split.run_seeds)
        out.append(pilot_designs.PilotRow(answer.hypothesis.key, d.decision, d.level, d.margin_level, at))
    return out


def planned_rows(design, pilot: pipeline.Summary) -> list[pilot_designs.PilotRow]:
    """The rows a design is planned for: each row of this study's family the pilot decided, and each main effect the
    study plans at equal evaluations (`[decide] equal_budget`), at every (score, budget) the pilot was scored at.

    Each carries, per (score, budget), the answer planned — the pilot's; for a row at equal evaluations, which the
    pilot did not decide, the one its effect there points to: equivalent where it is under half the margin, else the
    side it favours — and the level that claim is tested at in this study's family, once the other planned claims
    before it in the family's order are shown (`planned_levels`). A row at equal evaluations at a budget fraction b
    reads the larger population's incumbent at b × the smaller one's evaluations (anytime.csv's rows at that count:
    `--reevaluate PILOT --at-evaluations` them first)."""
    base = pilot.design
    fam = family.family(dataclasses.replace(design, budget=base.budget))  # the family as the pilot's budgets make it
    decided = {r.hypothesis.key: r.decision.decision for r in pilot.answers.rows if r.decision.outcome in DECIDED}
    planned = [h for h in fam.hypotheses if (h.key in decided) or (getattr(h, "at", None) and h.kind == family.MAIN)]
    k, margin = base.budget.final_eval_seeds, design.decide.margin
    at: dict[int, dict] = {fam.index(h): {} for h in planned}
    for (score, budget), scores in scored_at(pilot).items():
        claims = {}
        for h in planned:
            row, read = h, scores
            if getattr(h, "at", None):
                evaluations = max(1, round(budget * h.at))
                row, read = family.read_at(h, evaluations), {**scores, **_incumbents_at(pilot, score, evaluations)}
            split = noise.split(row, read, k)
            if split is None or split.run_seeds < 2:
                continue
            j = fam.index(h)
            claims[j] = decided.get(h.key) or _pointed_to(split.effect, margin)
            at[j][(score, budget)] = pilot_designs.Components(split.effect, split.run_var, split.eval_var, split.run_seeds,
                                                              claims[j])  # fmt: skip
        levels = planned_levels(fam, claims, design.decide.alpha, margin)
        for j, level in levels.items():
            at[j][(score, budget)] = dataclasses.replace(at[j][(score, budget)], level=level)
    return [
        pilot_designs.PilotRow(_planned_key(h), decided.get(h.key, "at equal evaluations"), 0.0, 0.0, at[fam.index(h)])
        for h in planned if at[fam.index(h)]
    ]  # fmt: skip


def _planned_key(h) -> str:
    return h.key.split(family.equal_label(h.at))[0] + ", at equal evaluations" if getattr(h, "at", None) else h.key


def _pointed_to(effect: float, margin: float | None) -> str:
    if margin is not None and abs(effect) < margin / 2:
        return decide.EQUIVALENT
    return decide.B_BETTER if effect > 0 else decide.A_BETTER


def _incumbents_at(pilot: pipeline.Summary, score: str, evaluations: int) -> dict:
    """The pilot's runs' incumbents at this many evaluations (anytime.csv), for the groups whose runs spent more: by
    `at_evaluations` group, run seed and final seed."""
    anytime = pilot.store.anytime
    if anytime.empty:
        return {}
    rows = anytime[anytime["evaluations"].astype(int) == evaluations]
    found = final_scores_by_group(pilot.design, rows, score)
    return {at_evaluations(g, evaluations): v for g, v in found.items() if pilot.design.evaluations_of(g[0]) > evaluations}


def planned_levels(fam: family.Family, claims: dict[int, str], alpha: float, margin: float | None) -> dict[int, float]:
    """Each planned claim's test level in the family's graph: the claims shown in the family's order (differs
    before equivalent), each at its share when the ones before it have passed theirs on, as the run's own
    procedure shows them (`decide`); an equivalence claim's level doubled (its two one-sided tests). A claim that
    never receives a share has level 0."""
    m = len(fam.hypotheses)
    graph = fam.graph.with_equivalence() if margin is not None else fam.graph
    nodes = {j: (m + j if d == decide.EQUIVALENT and margin is not None else j) for j, d in claims.items()}
    levels: dict[int, float] = {}
    while True:
        waiting = sorted((node, j) for j, node in nodes.items() if j not in levels and graph.level(node, alpha) > 0)
        if not waiting:
            break
        node, j = waiting[0]
        levels[j] = graph.level(node, alpha) * (2 if node >= m else 1)
        graph = graph.reject(node)
    return {j: levels.get(j, 0.0) for j in claims}


def pilot_cells(summary: pipeline.Summary, planned=None) -> list[pilot_designs.Cell]:
    """One per group of the grid: its evaluations at the whole budget, the core-seconds a run of it spent here on
    its search and per final seed (its core-seconds split as its wall was: the search's until its last generation,
    the rest its final re-evaluation's; a pilot from before they were measured at wall × CPUs, `RunStore.costs`),
    and the smaller budgets the `planned` study re-scores its runs at."""
    design, trials, gens = summary.design, summary.trials, summary.store.generations_table
    elapsed = gens.groupby("trial")["elapsed_s"].max() if not gens.empty else pd.Series(dtype=float)
    costs = summary.store.costs.query("work == 'trial'").set_index("trial")["core_s"]
    names = trials["trial"].map(lambda n: final_scores.trial_of_folder(n) if isinstance(n, str) else None)
    k = max(design.budget.final_eval_seeds, 1)
    out = []
    for group in dict.fromkeys(c.group for c in design.cells):
        cells = [c for c in design.cells if c.group == group]
        mine = names[names.isin({trial_name(design, c) for c in cells})]
        wall = trials.loc[mine.index, "wall_s"].to_numpy(float)
        core = np.array([costs.get(name, np.nan) for name in mine], float)
        search = core * np.array([elapsed.get(name, np.nan) for name in mine], float) / wall  # the search's share
        rescorings = len(planned.equal_evaluations(group[0])) if planned is not None else 0
        out.append(pilot_designs.Cell(cells[0].generations * cells[0].population, float(np.nanmean(search)),
                                      float(np.nanmean(core - search)) / k, rescorings))  # fmt: skip
    return out


def pilot_spend(summary: pipeline.Summary) -> tuple[int, int, float]:
    """(evaluations, final retrainings, core-seconds) the pilot's finished ES trials spent."""
    done = summary.trials[summary.trials["status"].isin(("complete", "stopped"))]
    evaluations = int(done["evaluations"].sum())
    finals = len(done) * summary.design.budget.final_eval_seeds * pilot_designs.RULES_SCORED
    return evaluations, finals, float(summary.store.costs.query("work == 'trial'")["core_s"].sum())


def plan_lines(design, run_dir: Path) -> list[str]:
    """The planner's report: the pilot's rows, its spend, the designs that decide (cheapest first), the study's
    own design beside them, and the cheapest as study-file lines."""
    pilot = read_pilot(design, run_dir)
    rows = planned_rows(design, pilot)
    if not rows:
        raise PilotError(f"--pilot {run_dir}: it decided none of this study's rows; nothing to plan for")
    cells = pilot_cells(pilot, design)
    evaluations, finals, core = pilot_spend(pilot)
    margin = design.decide.margin
    found = pilot_designs.designs(rows, cells, margin)
    lines = [
        f"pilot {run_dir}: {len(rows)} decided row(s) to plan for; it spent {evaluations:,} evaluations + {finals:,} "
        f"final retrainings = {evaluations + finals:,} farm trainings, {core / 3600:.1f} core-hours "
        f"({'as measured' if pilot.store.costs['core_s_measured'].all() else 'priced at wall × CPUs'})",
        "  each row at its pilot's effect (score, budget → B − A, SD between runs, SD of one re-evaluation, run seeds; "
        "the answer planned for, at its level in this study's family):",
    ]
    for r in rows:
        lines.append(f"    {r.key}:")
        for (score, budget), c in sorted(r.at.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            planned = r.planned(c)
            lines.append(
                f"      {score}, {budget} of the budget: {c.effect:+.4f}, {np.sqrt(c.run_var):.4f}, "
                f"{np.sqrt(c.eval_var):.4f} ({c.run_seeds}) → {planned.decided}, α {planned.level:.3g}"
            )
    own = _own_design(design, pilot.design, rows, cells, margin)
    deciding = [d for d in found if d.decides]
    lines += [
        f"designs reaching power {pilot_designs.TARGET:g} at the pilot's effects on every row: {len(deciding)} of {len(found)} "
        f"compared (score × budget × final seeds {list(pilot_designs.FINAL_SEEDS)} × seeds per stage {list(pilot_designs.SEEDS_PER_STAGE)} "
        f"and at most ≤ {pilot_designs.MOST_SEEDS}); the 10 cheapest, by expected core-hours:",
        *_design_table(deciding[:10], evaluations + finals, core),
        "the study's own design, on the pilot's noise:",
        *_design_table([own] if own else [], evaluations + finals, core),
    ]
    best, cpus = pilot_designs.cheapest(found), os.cpu_count() or 1
    if best is None:
        lines.append("no design compared reaches the target power on every row: the pilot's effects need more seeds")
        return lines
    lines += [
        f"cheapest: {_describe(best)}: {best.expected_core_s / 3600:.1f} core-hours expected "
        f"({best.expected_core_s / core:.0%} of the pilot's {core / 3600:.1f}), {best.expected_trainings:,.0f} farm "
        f"trainings ({best.expected_trainings / (evaluations + finals):.0%} of its {evaluations + finals:,}), "
        f"{best.most_trainings:,.0f} at most; ~{hms(best.expected_core_s / cpus)} of wall on this machine's {cpus} CPUs",
        "as study-file lines:",
        *[f"  {line}" for line in study_lines(pilot.design, best)],
    ]
    return lines


def _own_design(design, pilot_study, rows, cells, margin) -> pilot_designs.Design | None:
    """The study's own design on the pilot's noise; None where its budget is no one fraction of the pilot's that
    the pilot was scored at."""
    fractions = {Fraction(design.evaluations_of(p), pilot_study.evaluations_of(p)) for p in design.populations}
    if len(fractions) != 1:
        return None
    d = design.decide
    return pilot_designs.evaluate(rows, cells, d.score, fractions.pop(), design.budget.final_eval_seeds,
                                  d.seeds_per_stage, d.max_seeds, margin)  # fmt: skip


def _describe(d: pilot_designs.Design) -> str:
    return (
        f"score {d.score}, budget {d.budget} of the pilot's, {d.final_seeds} final seeds, {d.seeds_per_stage} seeds "
        f"a stage, {d.max_seeds} at most"
    )


def _design_table(found, pilot_trainings: int, pilot_core_s: float) -> list[str]:
    if not found:
        return ["    (none)"]
    head = (
        "    score        budget  final  stage/most  power (least row)  at the margin  seeds (expected)  "
        "trainings expected  share of pilot  at most  core-hours (share of pilot)"
    )
    out = [head]
    for d in found:
        margin = np.nanmin(d.power_at_margin) if np.isfinite(d.power_at_margin).any() else float("nan")
        out.append(
            f"    {d.score:<12} {str(d.budget):>6}  {d.final_seeds:>5}  {d.seeds_per_stage:>4}/{d.max_seeds:<5}  "
            f"{min(d.power):>17.2f}  {margin:>13.2f}  {d.expected_seeds:>16.1f}  {d.expected_trainings:>18,.0f}  "
            f"{d.expected_trainings / pilot_trainings:>14.0%}  {d.most_trainings:>7,.0f}  "
            f"{d.expected_core_s / 3600:>10.1f} ({d.expected_core_s / pilot_core_s:.0%})"
        )
    return out


def study_lines(design, d: pilot_designs.Design) -> list[str]:
    """The design as lines to paste into the study file (`study`: the pilot's, whose budget the design's is a
    fraction of)."""
    generations = {str(c.population): int(c.generations * d.budget) for c in design.cells}
    table = ", ".join(f'"{p}" = {g}' for p, g in sorted(generations.items(), key=lambda kv: int(kv[0])))
    return [
        "[budget]",
        f"generations = {{ {table} }}   # {d.budget} of the pilot's budget",
        f"final_eval_seeds = {d.final_seeds}",
        "[decide]",
        f'score = "{d.score}"',
        f"seeds_per_stage = {d.seeds_per_stage}   # the grid's seeds: as many",
        f"max_seeds = {d.max_seeds}",
    ]
