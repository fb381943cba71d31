"""What a plan can decide, before it runs: the smallest effect each hypothesis is decided at with power 0.8.

For the paired test (`sequential`), the power at a standardised effect
δ = mean / SD of the within-seed contrast depends on δ and the plan alone;
`sequential.detectable` solves it for each look. In the study's units it is
δ × the contrast's SD, read from an earlier run of the same grid (a shipped
result or a run folder) when one is at hand; without one the dry run says
it in SDs. A hypothesis is counted at the level it holds at the start, or —
a simple effect behind its main effect — at the share it receives once its
main effect is shown.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from bilevel_tune.verdicts import decide, family, sequential

POWER = 0.8


def starting_level(fam: family.Family, j: int, alpha: float) -> float:
    """The level hypothesis j is tested at first: its share, or the share its gate passes it once open."""
    level = fam.graph.level(j, alpha)
    if level > 0:
        return level
    h = fam.hypotheses[j]
    parents = [i for i, p in enumerate(fam.hypotheses) if p.kind == family.MAIN and family._parent(p, h)]
    return max((fam.graph.reject(i).level(j, alpha) for i in parents), default=0.0)


def contrast_sd(hypothesis, scores: Mapping[tuple, Mapping[int, float]]) -> tuple[float, int]:
    """The SD (ddof 1) of the hypothesis's within-seed contrast in an earlier run's scores, and its seeds; NaN
    when that run lacks one of its groups or has fewer than two shared seeds."""
    if not all(g in scores for g in family.groups(hypothesis)):
        return float("nan"), 0
    values = decide.within_seed(scores, hypothesis)
    if len(values) < 2:
        return float("nan"), len(values)
    return float(np.std(list(values.values()), ddof=1)), len(values)


def plan_lines(design, scores: Mapping[tuple, Mapping[int, float]] | None = None, source: str = "") -> list[str]:
    """The dry run's lines: per hypothesis, the smallest effect decided with power 0.8 by each stage of the plan."""
    if design.decide.test != decide.PAIRED:
        return []
    fam = family.family(design)
    if not fam.hypotheses:
        return []
    n, looks = decide.plan_of(design)
    seeds = " / ".join(str(n * k) for k in range(1, looks + 1))
    units = f"in the study's units at the paired SD of {source}" if scores else "in SDs of the within-seed contrast"
    lines = [
        f"smallest effect decided with power {POWER:g} by stage {' / '.join(map(str, range(1, looks + 1)))} "
        f"({seeds} seeds per cell), {units}" + ("" if scores else " (no earlier run of this grid to read an SD from)")
    ]
    margin = design.decide.margin
    if margin is not None:
        lines.append(
            f"  with margin {margin:g}: each row's 'differs' holds half its share, and after the effects the stage by "
            f"which its repeated interval lies inside ±{margin:g} with power {POWER:g} when there is no difference"
        )
    for j, h in enumerate(fam.hypotheses):
        share = starting_level(fam, j, design.decide.alpha)
        level = share / 2 if margin is not None else share
        plan = sequential.t_levels(n, looks, level)
        sizes = [sequential.detectable(plan, POWER, by_look=k) for k in range(1, looks + 1)]
        sd, ran = contrast_sd(h, scores) if scores else (float("nan"), 0)
        if scores and np.isfinite(sd):
            shown = " / ".join(_figure(size * sd) for size in sizes)
            line = f"  {h.key} (α {level:.3g}; SD {sd:.4f} over {ran} seeds): {shown}"
        else:
            shown = " / ".join(_figure(size, " SD") for size in sizes)
            line = f"  {h.key} (α {level:.3g}): {shown}"
        if margin is not None:
            line += "; " + _equivalence_stage(sequential.t_levels(n, looks, share), margin, sd)
        lines.append(line)
    return lines


def _equivalence_stage(plan, margin: float, sd: float) -> str:
    """The first stage by which the equivalence claim (its plan at twice its share) is shown with power 0.8 at no
    difference, at this contrast SD."""
    if not np.isfinite(sd) or sd <= 0:
        return "equivalence: no SD to plan from"
    for k in range(1, plan.looks + 1):
        if sequential.equivalence_power(plan, margin / sd, by_look=k) >= POWER:
            return f"equivalent by stage {k} ({plan.pairs(k)} seeds)"
    return f"equivalence not within the plan's {plan.pairs(plan.looks)} seeds"


def _figure(value: float, unit: str = "") -> str:
    return "–" if not np.isfinite(value) else f"{value:.3g}{unit}"
