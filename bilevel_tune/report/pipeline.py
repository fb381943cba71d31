"""The summary of a run: the list of its sections, each computed from the run's design and store.

    summary = summarise(open_store(run_dir))
    render(summary)            summary.md: each section's markdown, in the list's order
    summary.record()           verdicts.json: each section's part
    summary.tables()           the CSV files beside them, by name
    summary.short("answers")   a quotable section, short (the README's quotes)

summary.md, verdicts.json, the quotes, run.md, TensorBoard's text and W&B's summary all iterate this list; none
parses summary.md back. A new section is a module with its `Section` (`report.section`) and one line below.
"""

from __future__ import annotations

from bilevel_tune.report import (
    against,
    answers,
    anytime,
    ceiling,
    edges,
    grids,
    heading,
    noise_split,
    optimizers,
    robustness,
    seed_noise,
)
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.report.seed_noise import is_effect, verdicts  # noqa: F401 - the summary's verdicts, by their old path
from bilevel_tune.study_data.run_store import RunStore

SECTIONS: tuple[Section, ...] = (
    heading.HEAD,  # the study, the tool's commit, the world's regime, a short run's label
    answers.SECTION,  # the comparisons decided, and the findings under them
    against.SECTION,  # each answer beside its pilot's
    robustness.SECTION,  # the held-out learners' answers
    anytime.SECTION,  # what the answers needed: the same test at earlier budgets
    noise_split.SECTION,  # where each row's noise is
    optimizers.SECTION,  # the outer optimisers at equal evaluations
    grids.PER_CELL,  # the final and best objectives per cell
    ceiling.SECTION,  # the runs at the ceiling, and why
    grids.GRID,  # the campaign's grid
    grids.TRIALS,
    grids.CELLS,
    grids.SCAN,
    grids.INCOMPLETE,
    seed_noise.SECTION,  # the design's descriptive rule, each line naming the Answers' decision
    heading.SETTINGS,
    # computed for the others, rendered by none of their own
    heading.BUDGET_NOTE,
    answers.PLAN,
    edges.SECTION,
    seed_noise.VERDICTS_BEST,
    seed_noise.VERDICTS_FINAL,
)


def summarise(store: RunStore) -> Summary:
    """A run folder's summary — a run's or a shipped one's — read through its store: each section computed on
    first use, once."""
    return Summary(store, SECTIONS)


def render(summary: Summary) -> str:
    """summary.md: every section's markdown, in the list's order."""
    return "\n".join(line for _, lines in summary.markdown() for line in lines)
