"""The summary's head — the study, the code that wrote it, the world's regime, what the command line changed, a
short run's label — and its tail: the settings as run, with what was added after the run apart.
"""

from __future__ import annotations

from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data.run_folder import git_sha
from bilevel_tune.study_data.settings import describe as describe_settings

WRITTEN_AT = "Written at tool commit"  # summary.md's line naming the code that wrote it (a rebuild's only changed line)


def budget_note(design) -> str | None:
    """A label for verdicts from a run shorter than its study's budget (a named smoke budget, or overrides)."""
    short = [c for c in design.cells if design.short_of_full(c)]
    if not design.smoke and not short:
        return None
    ran = sorted({c.generations for c in design.cells})
    planned = sorted({g for c in design.cells if (g := design.full_generations_for(c.population)) is not None})
    of = f" of {'/'.join(map(str, planned))}" if planned else ""
    return (
        f"SHORT RUN (budget {design.budget_label}): cells ran {'/'.join(map(str, ran))} generations{of}, "
        f"K = {design.budget.inner_iters} of {design.full_budget.inner_iters} — these verdicts describe this run, "
        "not the science"
    )


def _commits(s: Summary) -> tuple[str | None, str | None]:
    """(the tool's commit writing this summary, with + where its code differs from it; the run's commit)."""
    return git_sha(marked=True), s.store.record.get("provenance", {}).get("git_sha")


def _head(s: Summary) -> list[str]:
    design = s.design
    tool, run = _commits(s)
    tool = (tool[:12] + "+" * tool.endswith("+")) if tool else "unknown"
    lines = [f"# Study {design.name} (budget {design.budget_label}, inner loop {design.inner})", "",
             f"{WRITTEN_AT} {tool} (run commit {(run or 'unknown')[:12]}).", ""]  # fmt: skip
    if design.description:
        lines += [f"{design.description}.", ""]
    if design.regime:
        lines += [f"World: {design.regime}.", ""]
    if design.overrides_label:
        lines += [f"Command-line changes to the study: {design.overrides_label}.", ""]
    if s.budget_note:
        lines += [f"**{s.budget_note}.**", ""]
    return lines


def _settings(s: Summary) -> list[str]:
    design, added = s.design, s.store.learners_added
    ran = {**design.settings, "final.learners": tuple(x for x in design.final.learners if x not in added)}
    lines = ["", "## Settings (as run; a further axis's values are in the trials' columns)", ""]
    lines += [line.strip() for line in describe_settings(ran, design.inner.startswith("appo"), design.table, design.optimizers)]
    if added:
        lines += ["", f"Added after the run, for its held-out step (`--reevaluate RUN --learners`): [final] learners "
                      f"{', '.join(added)}."]  # fmt: skip
    return lines


BUDGET_NOTE = Section("budget_note", compute=lambda s: budget_note(s.design))
HEAD = Section(
    "head", markdown=_head,
    record=lambda s: {**dict(zip(("tool_commit", "run_commit"), _commits(s))), "budget_note": s.budget_note},
)  # fmt: skip
SETTINGS = Section("settings", markdown=_settings)
