"""Does the planner's power hold? Its designs assume a row's contrast is normal with the pilot's two variance
components; here the pilot itself is resampled instead, and the run's own group-sequential test is applied.

    python benchmarks/pilot_power.py [docs/results/weekend-appo] [--study weekend] [--designs 3] [--runs 2000]

For each of the cheapest designs that decide (and the study's own), per row: a simulated run draws its run seeds
with replacement from the pilot's, and for each the k final seeds with replacement from that run seed's final
scores at the design's score and budget (two-stage bootstrap: what the runs found and what their re-evaluation
adds, both as the pilot measured them); the contrast's mean over its k final seeds is one pair. The looks are the
design's stages, each row tested at its level by the paired t's own boundaries (`verdicts.sequential`). Printed:
the planner's power beside the resampled one, and — the same resampling with each row's contrast centred on 0 —
the error rate beside the row's level.
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

import numpy as np

from bilevel_tune.cli.pilot_plan import pilot_cells, pilot_rows, read_pilot, scored_at
from bilevel_tune.planning import pilot_designs
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.verdicts import decide, sequential
from bilevel_tune.verdicts.noise import contrasts


def resampled(per_seed: dict[int, np.ndarray], design: pilot_designs.Design, row: pilot_designs.PilotRow, margin, runs: int, rng,
              centre: bool = False) -> float:  # fmt: skip
    """The share of bootstrap runs that decide the row as the pilot did, by the design's last look."""
    seeds = list(per_seed)
    shift = np.mean([v.mean() for v in per_seed.values()]) if centre else 0.0
    n, looks = design.seeds_per_stage, design.max_seeds // design.seeds_per_stage
    equivalent = row.decided == "equivalent"
    levels = sequential.t_levels(n, looks, 2 * row.margin_level if equivalent else row.level)
    hits = 0
    for _ in range(runs):
        drawn = rng.choice(len(seeds), size=design.max_seeds)
        pairs = np.array([
            rng.choice(per_seed[seeds[i]], size=design.final_seeds).mean() - shift for i in drawn
        ])  # fmt: skip
        for look in range(1, looks + 1):
            d = pairs[: n * look]
            if (levels.within(d, look, margin) if equivalent else levels.crosses(d, look)):
                hits += 1
                break
    return hits / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pilot", nargs="?", default="docs/results/weekend-appo", type=Path)
    parser.add_argument("--study", default="weekend")
    parser.add_argument("--designs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    study = load_study(args.study)
    pilot = read_pilot(study, args.pilot)
    rows = [r for r in pilot_rows(pilot) if r.key in {h.key for h in decide.hypotheses_of(compile_design(study))}]
    hypotheses = {a.hypothesis.key: a.hypothesis for a in pilot.answers.rows}
    scored = scored_at(pilot)
    margin = study.decide.margin
    found = [d for d in pilot_designs.designs(rows, pilot_cells(pilot), margin) if d.decides][: args.designs]
    own = pilot_designs.evaluate(rows, pilot_cells(pilot), study.decide.score, Fraction(1), study.budget.final_eval_seeds,
                     study.decide.seeds_per_stage, study.decide.max_seeds, margin)  # fmt: skip
    rng = np.random.default_rng(20261206)
    print(f"pilot {args.pilot}: {len(rows)} rows; {args.runs} bootstrap runs per design and row")
    for label, design in [*((f"cheapest #{i + 1}", d) for i, d in enumerate(found)), ("the study's own", own)]:
        print(
            f"{label}: score {design.score}, budget {design.budget}, {design.final_seeds} final seeds, "
            f"{design.seeds_per_stage} a stage, {design.max_seeds} at most; {design.expected_trainings:,.0f} trainings expected"
        )
        for row, planned in zip(rows, design.power):
            per_seed = contrasts(hypotheses[row.key], scored[(design.score, design.budget)])
            power = resampled(per_seed, design, row, margin, args.runs, rng)
            level = 2 * row.margin_level if row.decided == "equivalent" else row.level
            null = resampled(per_seed, design, row, margin, args.runs, rng, centre=True) if row.decided != "equivalent" else float("nan")
            print(
                f"  {row.key:<48} planned {planned:.2f}  resampled {power:.2f}   error under 0: {null:.3f} "
                f"(level {level:.4f})"
            )


if __name__ == "__main__":
    main()
