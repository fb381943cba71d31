"""The summary of a run as one pass: its tables loaded once, each section computed from them, then rendered.

    summary = summarise(open_store(run_dir))   # the store's tables → the sections → Summary

1. **Load**: the trials, generations and scan tables the run's store keeps
   (`study_data.run_store`: from its records, or a shipped folder's CSVs), and its design.
2. **Sections**, each a module of its own reading only those tables: the
   answers (`answers`: the hypotheses decided), the ceiling (`ceiling`), the
   range edges (`edges`), search vs grid (`landscape`), the grids
   (`grids`), the seed-noise verdicts (`seed_noise`), the held-out learners'
   answers (`robustness`), where each row's noise is (`noise_split`), what each row needed (`anytime`).
3. **Render**: summary.md and the files (`outputs`), the plots (`plots`),
   W&B and TensorBoard (`tune_edge.tracking`, `views.curves`), the
   notebook — from the `Summary`, never from the folder again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from bilevel_tune.report import landscape, optimizers
from bilevel_tune.report.against import Against, compare
from bilevel_tune.report.answers import Answers, answers
from bilevel_tune.report.anytime import Needed, needed_section
from bilevel_tune.report.ceiling import Ceiling, ceiling_section, ceiling_verdict
from bilevel_tune.report.columns import BEST, DEFAULT_CEILING, DEFAULT_TOL, FINAL, SEARCH_VS_GRID, finished
from bilevel_tune.report.edges import edge_line, edges
from bilevel_tune.report.grids import cell_table, grid_table
from bilevel_tune.report.noise_split import NoiseSection, noise_section
from bilevel_tune.report.robustness import Robustness, robustness
from bilevel_tune.report.seed_noise import effect_verdicts
from bilevel_tune.study_data.design import Design
from bilevel_tune.study_data.run_store import RunStore
from bilevel_tune.verdicts import family, plan_mark
from bilevel_tune.verdicts.plan_mark import PlanMark


@dataclass(frozen=True)
class Summary:
    design: Design
    trials: pd.DataFrame
    cells: pd.DataFrame
    grid: pd.DataFrame
    verdicts_best: dict[str, dict]
    verdicts_final: dict[str, dict] | None
    budget_note: str | None  # why these verdicts may not speak for the study (a smoke or shorter run)
    scans: pd.DataFrame  # the rules scan, one row per grid point (empty without a scan)
    scan_bests: pd.DataFrame  # each scan's best point
    generations: pd.DataFrame  # one row per ES trial and generation (`run_tables.generation_table`)
    answers: Answers  # the hypotheses decided
    ceiling: Ceiling  # the ceiling looked for and the runs at it
    edges: tuple[dict[str, Any], ...]  # the searched rules' range edges the runs end at
    store: RunStore  # what it was read from: a run's records, or a shipped folder's tables
    robustness: Robustness | None = None  # the held-out learners' answers (None: no held-out step ran)
    optimizers: pd.DataFrame | None = None  # the optimisers at equal evaluations (None: the study compares none)
    noise: NoiseSection | None = None  # where each row's noise is (None: no final scores seed by seed)
    needed: Needed | None = None  # each row at earlier budgets (None: no anytime scores)
    plan: PlanMark | None = None  # confirmatory or exploratory: was the decision plan kept since look 1?
    against: Against | None = None  # each row beside its pilot's decision (None: no pilot.json)

    @property
    def verdicts(self) -> dict[str, dict]:
        """The verdicts that count: effects on the final re-evaluation when there is one, the ceiling on the best."""
        primary = self.verdicts_final or self.verdicts_best
        return {k: (primary[k] if is_effect(k) else v) for k, v in self.verdicts_best.items()}

    @property
    def search_vs_grid(self) -> dict[str, Any] | None:
        return self.verdicts_best.get(SEARCH_VS_GRID)

    def findings(self) -> list[str]:
        """The Answers' one-line findings under their table: the ceiling, the range edges, search vs grid."""
        lines = [line for line in (self.ceiling.line(), *(edge_line(e) for e in self.edges)) if line]
        return lines + ([self.search_vs_grid["sentence"]] if self.search_vs_grid else [])

    def answers_record(self) -> dict[str, Any]:
        """verdicts.json's `answers`: the decided hypotheses, the ceiling's runs, the edges and the findings."""
        return {
            **self.answers.record(),
            **(self.plan.record() if self.plan is not None else {}),
            "ceiling": self.ceiling.value,
            "ceiling_runs": self.ceiling.rows.to_dict(orient="records"),
            "edges": list(self.edges),
            "lines": [line for line in (self.ceiling.line(), *(edge_line(e) for e in self.edges)) if line],
        }


def summarise(store: RunStore) -> Summary:
    """Every table, verdict and answer of a run folder, or of a shipped result's folder: the tables its store keeps,
    each section computed from them and the run's design."""
    design, table, scans, generations = store.design, store.trials_table, store.scan_table, store.generations_table
    bests = store.scan_bests
    done = finished(table)
    found = answers(design, store)
    has_final = FINAL in done and done[FINAL].notna().any()
    return Summary(
        design=design,
        trials=table,
        cells=cell_table(table),
        grid=grid_table(table),
        verdicts_best=verdicts(done, design.ceiling, design.summary.tol, BEST, bests),
        verdicts_final=verdicts(done, design.ceiling, design.summary.tol, FINAL) if has_final else None,
        budget_note=budget_note(design),
        scans=scans,
        scan_bests=bests,
        generations=generations,
        answers=found,
        ceiling=ceiling_section(design, table, generations, bests),
        edges=tuple(edges(design, table, bests)),
        store=store,
        robustness=robustness(design, store.heldout, found),
        optimizers=optimizer_section(design, table, generations, scans),
        noise=noise_section(design, found, store.finals),
        needed=needed_section(design, store, found),
        plan=plan_mark.mark(design, store.record),
        against=compare(found.rows, design.decide.margin, store.pilot) if store.pilot and found.rows else None,
    )


def optimizer_section(design: Design, table: pd.DataFrame, generations: pd.DataFrame, scans: pd.DataFrame):
    """optimizers.csv's table, for a study that compares optimisers and scans its rules; None otherwise."""
    if not optimizers.shown_here(design):
        return None
    incumbents = optimizers.incumbent_table(generations, scans)
    return optimizers.optimizer_table(table, incumbents, optimizers.epsilon(design, scans))


def verdicts(
    table: pd.DataFrame,
    ceiling: float | None = DEFAULT_CEILING,
    tol: float = DEFAULT_TOL,
    value: str = BEST,
    bests: pd.DataFrame | None = None,
) -> dict[str, dict]:
    """{population_effect, dims_effect, <axis>_effect per further axis, ceiling}, each {verdict, gap, spread,
    n_seeds, cells, sentence}; with a rules scan (`bests`), also search_vs_grid."""
    out = effect_verdicts(table, value)
    if ceiling is not None:  # a world without a ceiling gets no ceiling verdict
        out["ceiling"] = ceiling_verdict(table, ceiling, tol, bests)
    grid = landscape.search_vs_grid(table, bests) if bests is not None else None
    if grid:
        out[SEARCH_VS_GRID] = grid
    return out


def is_effect(key: str) -> bool:
    return key.endswith("_effect")


def budget_note(design: Design) -> str | None:
    """A label for verdicts from a run shorter than its study's budget (a named smoke budget, or overrides)."""
    short = [c for c in design.cells if design.short_of_full(c)]
    if not design.smoke and not short:
        return None
    full = design.full_budget
    ran = sorted({c.generations for c in design.cells})
    planned = sorted({g for c in design.cells if (g := design.full_generations_for(c.population)) is not None})
    of = f" of {'/'.join(map(str, planned))}" if planned else ""
    return (
        f"SHORT RUN (budget {design.budget_label}): cells ran {'/'.join(map(str, ran))} generations{of}, "
        f"K = {design.budget.inner_iters} of {full.inner_iters} — these verdicts describe this run, not the science"
    )


def decided_in_answers(s: Summary, key: str) -> str:
    """Where the Answers decide the factor of a descriptive verdict (`population_effect`): ' Decided in the Answers:
    <row>: <answer>.' for its main effect, else its simple effects — the one verdict per comparison; '' where the
    Answers decide none of it."""
    factor = {"dims": family.MECHANISM, "mechanism": family.MECHANISM}.get(key[: -len("_effect")], key[: -len("_effect")])
    rows = [r for r in s.answers.rows if r.hypothesis.kind != family.INTERACTION and r.hypothesis.factor == factor
            and getattr(r.hypothesis, "at", None) is None]  # fmt: skip
    rows = [r for r in rows if r.hypothesis.kind == family.MAIN] or rows
    if not rows or s.answers.decisions is None:
        return ""
    texts = s.answers.by_key()
    said = "; ".join(f"{r.hypothesis.key}: {texts[r.hypothesis.key].text(s.answers.decisions).split(';')[0]}" for r in rows)
    return f" Decided in the Answers: {said}."


def verdict_lines(s: Summary, effects_only: bool = False) -> list[str]:
    """The verdicts as the summary states them, one sentence each (selection-bias notes included); `effects_only`:
    without the ceiling and search-vs-grid sentences, which the Answers carry."""
    lines = [v["sentence"] + (decided_in_answers(s, k) if is_effect(k) else "")
             for k, v in s.verdicts.items() if is_effect(k) or not effects_only]  # fmt: skip
    if s.verdicts_final:
        for k in (k for k in s.verdicts_final if is_effect(k)):
            final, best = s.verdicts_final[k]["verdict"], s.verdicts_best[k]["verdict"]
            if final != best:
                lines.append(
                    f"selection bias: the {k.replace('_', ' ')} is '{best}' on the best objective but '{final}' "
                    "on the final re-evaluation; trust the re-evaluation."
                )
    return lines
