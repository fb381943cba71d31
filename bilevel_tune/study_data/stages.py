"""Seeds in stages: the seeds a study adds after its grid's, to the cells of the comparisons still undecided.

A study decided in stages (`--until-decided`, docs/verdicts.md) runs its grid
first: stage 1, its own seeds in every cell. The study's test then looks at the final
re-evaluations (`bilevel_tune.verdicts.decide`); every hypothesis it leaves
open gets `[decide] seeds_per_stage` more seeds in both its cells — the same
seeds everywhere, so cells stay matched on the seed — until every comparison
is decided or the cells hold `[decide] max_seeds`. The further seeds are
drawn once from the grid's seeds (the same study draws the same ones), in
order, never a grid seed; a stage takes the next `seeds_per_stage` of them.
Plain data: the decision of which groups a stage serves is the caller's.
"""

from __future__ import annotations

import dataclasses

from bilevel_tune.base import seeds
from bilevel_tune.base.knobs import StudyError
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import Stage

SEED_RANGE = (1, 10_000)  # short enough for a trial name


def drawn_seeds(study) -> tuple[int, ...]:
    """Every seed the study may add after its grid's, in the order stages take them."""
    count = study.decide.max_seeds - study.decide.seeds_per_stage
    rng = seeds.generator(*study.seeds, len(study.seeds))
    drawn: list[int] = []
    while len(drawn) < count:
        seed = int(rng.integers(*SEED_RANGE))
        if seed not in study.seeds and seed not in drawn:
            drawn.append(seed)
    return tuple(drawn)


def check_stageable(study) -> None:
    """A study can add seeds in stages when its grid's seeds are its first stage: as many as each stage adds."""
    n, grid_seeds = study.decide.seeds_per_stage, study.seeds
    if len(grid_seeds) != n:
        raise StudyError(
            f"--until-decided: the grid's {len(grid_seeds)} seed(s) ({', '.join(map(str, grid_seeds))}) are the first "
            f"stage, so [decide] seeds_per_stage={n} must equal their number (--set decide.seeds_per_stage={len(grid_seeds)}, or "
            f"--seed with {n} seeds)"
        )


def next_stage(study, open_groups) -> Stage | None:
    """The stage that serves these groups (`Cell.group`s of undecided comparisons); None when the study holds
    `max_seeds` already or no group is open."""
    stage = len(study.stages) + 2  # the grid is stage 1
    groups = tuple(g for g in compile_design(study).groups if g in set(open_groups))
    if not groups or stage > study.decide.stages:
        return None
    n = study.decide.seeds_per_stage
    return Stage(drawn_seeds(study)[(stage - 2) * n : (stage - 1) * n], groups)


def extended_plan(study, max_seeds: int):
    """The study with a larger decision plan (`--extend-plan`): more seeds per cell at most, the same stages so far.

    A plan that ended with hypotheses undecided is grown only by declaring the whole new plan: every look, the ones
    already taken too, is then decided under its boundaries (docs/verdicts.md). Repeating the recorded maximum
    changes nothing; a smaller one is refused.
    """
    decide = study.decide
    if max_seeds == decide.max_seeds:
        return study
    if max_seeds < decide.max_seeds:
        raise StudyError(
            f"--extend-plan {max_seeds}: the run's plan already allows {decide.max_seeds} seeds per cell; a plan "
            "only grows"
        )
    if max_seeds % decide.seeds_per_stage:
        raise StudyError(
            f"--extend-plan {max_seeds} must be a multiple of the run's seeds_per_stage={decide.seeds_per_stage}"
        )
    return dataclasses.replace(study, decide=dataclasses.replace(decide, max_seeds=max_seeds))


def declared_margin(study, margin: float, looks_taken: int):
    """The study with a margin declared on a resumed run (`--declare-margin`): it decides from the next look on.

    A margin is part of the plan, fixed before the looks it decides at, for a reason outside the data: the looks
    already taken keep the answers they gave without it (docs/verdicts.md). Repeating the recorded margin changes
    nothing; another one, or one after the plan's last look, is refused.
    """
    decide = study.decide
    if decide.margin == margin:
        return study
    if decide.margin is not None:
        raise StudyError(
            f"--declare-margin {margin:g}: the run's plan already declares margin {decide.margin:g}, from look "
            f"{decide.margin_from}; a margin is declared once"
        )
    if looks_taken >= decide.stages:
        raise StudyError(
            f"--declare-margin {margin:g}: the run has taken all {decide.stages} looks of its plan; a margin decides "
            "only at looks not taken yet (--extend-plan declares more)"
        )
    return dataclasses.replace(study, decide=dataclasses.replace(decide, margin=margin, margin_from=looks_taken + 1))


def with_stage(study, stage: Stage):
    """The study with one more stage: its cells are the next trials to run."""
    return dataclasses.replace(study, stages=study.stages + (stage,))


def at_most(study):
    """The study as it would be if every comparison stayed open to the end: every group at `max_seeds` (the dry
    run's plan for the maximum)."""
    while (stage := next_stage(study, compile_design(study).groups)) is not None:
        study = with_stage(study, stage)
    return study
