"""A stage run packed against the same stage as shipped: its cost, and whether its finals are the same, trial by trial.

    python benchmarks/packed_stage.py PACKED_RUN SHIPPED_RUN [--alone RUN ...] [--price RUN ...]
                                      [--margin 0.01] [--alpha 0.05]

PACKED_RUN ran some of SHIPPED_RUN's trials again (the same cells, seeds and budget) with `[runtime] pack = auto`
(docs/results/weekend-confirm-packed/recipe.sh: weekend-confirm's stage 1). Read through each run's store:

* cost — each trial's core-seconds (`RunStore.costs`: what the operating system measured, or, for a run from before
  that measure, wall × CPUs, marked ≈), summed by population; beside it, the same trials priced unpacked from the
  `--alone` runs (one trial of a population each, `--set runtime.pack=off`, on a quiet machine: like with like,
  where the shipped stage's wall was measured while its cores were shared), and the shipped trials as they ran;
* the whole shipped run (and each `--price` run: the campaign's) as it ran, and at the core-seconds an evaluation
  each population cost packed and alone here;
* finals — each trial's final (the mean of its final seeds' scores of its best-so-far rules) packed minus shipped,
  beside its core-seconds and shards each way, then TOST on those paired differences: equivalent within ±margin when both one-sided t-tests reject at α.

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from bilevel_tune.report.pipeline import summarise
from bilevel_tune.report.robustness import robustness
from bilevel_tune.study_data.run_store import open_store


def trial_costs(run: Path) -> pd.DataFrame:
    """Per trial: its population, final, shards, core-seconds and whether they were measured."""
    store = open_store(run)
    costs = store.costs
    costs = costs[costs["work"] == "trial"].set_index("trial")
    trials = pd.read_csv(run / "trials.csv")
    trials["name"] = trials["trial"].str.replace(r"_[0-9a-f]{5}_\d{5}$", "", regex=True)  # less Tune's ids
    trials = trials.set_index("name")
    out = trials[["population", "dims", "seed", "final_objective", "evaluations", "shards"]].copy()
    out["core_s"] = costs["core_s"].reindex(out.index)
    out["measured"] = costs["core_s_measured"].reindex(out.index)
    return out


def price(run: Path, by_population: dict) -> dict:
    """A whole run's trials as they ran (≈: wall × CPUs for a run from before the measure), and priced at the
    packed stage's and the alone runs' core-seconds an evaluation, population by population (their final
    re-evaluations included, at the stage's final seeds)."""
    trials = trial_costs(run)
    known = trials[trials.population.isin(list(by_population))]
    evaluations = known.groupby("population").evaluations.sum()
    priced = {way: float(sum(n * by_population[int(p)][f"{way}_core_s_an_evaluation"] for p, n in evaluations.items()))
              for way in ("packed", "alone")}  # fmt: skip
    as_run = float(trials.core_s.sum())
    mark = "" if trials.measured.all() else " ≈"
    print(f"{run.name} ({len(trials)} trials, {int(trials.evaluations.sum()):,} evaluations): {as_run:,.0f} core-s as it "
          f"ran{mark}; at the measured prices {priced['alone']:,.0f} alone, {priced['packed']:,.0f} packed")  # fmt: skip
    return {"trials": len(trials), "as_run_core_s": round(as_run, 1), "as_run_measured": bool(trials.measured.all()),
            "alone_core_s": round(priced["alone"], 1), "packed_core_s": round(priced["packed"], 1)}  # fmt: skip


def tost(d: np.ndarray, margin: float) -> float:
    """The TOST p-value of paired differences within ±margin: the larger of the two one-sided t-tests'."""
    lower = stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(d, margin, alternative="less").pvalue
    return float(max(lower, upper))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packed", type=Path)
    parser.add_argument("shipped", type=Path)
    parser.add_argument("--alone", type=Path, nargs="*", default=[], help="runs of single trials, packing off")
    parser.add_argument("--price", type=Path, nargs="*", default=[], help="more runs to price (the campaign's)")
    parser.add_argument("--margin", type=float, default=0.01)
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args()
    packed, shipped = trial_costs(args.packed), trial_costs(args.shipped)
    same = shipped.loc[packed.index]
    mark = lambda measured: "" if measured.all() else " ≈"  # noqa: E731 - wall × CPUs, not measured
    print(f"{len(packed)} trials packed ({args.packed}) against the same {len(same)} as shipped ({args.shipped})")
    print(f"{'population':>10} {'trials':>6} {'packed core-s':>14} {'shipped core-s':>15} {'alone core-s':>13} "
          f"{'packed / alone':>15}")  # fmt: skip
    alone = pd.concat([trial_costs(run) for run in args.alone]) if args.alone else None
    out: dict = {"trials": len(packed), "populations": {}}
    packed_total = alone_total = 0.0
    for population, group in packed.groupby("population"):
        n = len(group)
        one = float(alone[alone.population == population].core_s.mean()) if alone is not None else float("nan")
        scaled = one * n
        packed_total += group.core_s.sum()
        alone_total += scaled
        print(f"{population:>10} {n:>6} {group.core_s.sum():14.0f} {same[same.population == population].core_s.sum():13.0f}"
              f"{mark(same.measured)} {scaled:13.0f} {group.core_s.sum() / scaled:15.3f}")  # fmt: skip
        out["populations"][int(population)] = {
            "trials": n, "packed_core_s": round(float(group.core_s.sum()), 1),
            "shipped_core_s": round(float(same[same.population == population].core_s.sum()), 1),
            "alone_core_s_a_trial": round(one, 1), "packed_core_s_a_trial": round(float(group.core_s.mean()), 1),
            "alone_core_s_an_evaluation": one / float(group.evaluations.mean()),
            "packed_core_s_an_evaluation": float(group.core_s.sum() / group.evaluations.sum()),
        }  # fmt: skip
    out["packed_over_alone"] = round(packed_total / alone_total, 3) if alone_total else None
    print(f"the stage packed over the same trials alone: {out['packed_over_alone']}")
    for run in [args.shipped, *args.price]:
        out.setdefault("runs", {})[run.name] = price(run, out["populations"])
    d = (packed.final_objective - same.final_objective).to_numpy()
    for name, value in zip(packed.index, d):
        mine, theirs = packed.loc[name], same.loc[name]
        print(f"  {name:<40} final packed − shipped {value:+.4f}; core-s packed {mine.core_s:.0f} "
              f"({mine.shards:g} shard(s)), shipped {theirs.core_s:.0f}{mark(same.measured)} ({theirs.shards:g})")  # fmt: skip
    p = tost(d, args.margin)
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(1 - 2 * args.alpha)
    out.update(mean_difference=round(float(d.mean()), 5), ci90=[round(float(ci.low), 5), round(float(ci.high), 5)],
               tost_p=p, margin=args.margin, alpha=args.alpha, equivalent=bool(p < args.alpha))  # fmt: skip
    said = "equivalent" if p < args.alpha else "not shown equivalent"
    print(f"finals packed − shipped: mean {d.mean():+.4f}, {100 * (1 - 2 * args.alpha):.0f} % CI [{ci.low:+.4f}, "
          f"{ci.high:+.4f}]; TOST within ±{args.margin:g}: p {p:.2g} — {said} at α {args.alpha:g}")  # fmt: skip
    out["robustness"] = same_trials_robustness(args.packed, args.shipped, packed.index)
    print(json.dumps(out))
    return 0


def same_trials_robustness(packed_run: Path, shipped_run: Path, trials) -> dict:
    """Robustness of the packed run against the shipped run's held-out scores of the same trials, decided alike: the
    packed run's design and Answers, each side's heldout.csv rows of these trials (`report.robustness`)."""
    summary = summarise(open_store(packed_run))
    heldout = open_store(shipped_run).heldout
    theirs = robustness(summary.design, heldout[heldout["trial"].isin(trials)], summary.answers)
    mine = summary.robustness
    if mine is None or theirs is None:
        print("robustness: no held-out scores on one side")
        return {}
    theirs_by = {(r.question, r.where, r.learner): r for r in theirs.rows}
    print(f"robustness of the same {len(trials)} trials (the packed run's design and Answers; Holm at α {mine.alpha:g} "
          "over each side's rows):")  # fmt: skip
    print(f"  {'cell or comparison':<34} {'learner':<16} {'packed':<28} {'shipped':<28} same")
    agree = compared = 0
    for row in mine.rows:
        other = theirs_by.get((row.question, row.where, row.learner))
        if other is None:
            print(f"  {row.where:<34} {row.learner:<16} {row.answer + ' ' + f'{row.effect.mean:+.4f}':<28} {'—':<28} —")
            continue
        compared += 1
        agree += row.answer == other.answer
        print(f"  {row.where:<34} {row.learner:<16} {row.answer + ' ' + f'{row.effect.mean:+.4f}':<28} "
              f"{other.answer + ' ' + f'{other.effect.mean:+.4f}':<28} {'yes' if row.answer == other.answer else 'no'}")  # fmt: skip
    print(f"robustness answers alike in {agree} of {compared} rows both runs have")
    return {"rows_compared": compared, "rows_alike": agree}


if __name__ == "__main__":
    raise SystemExit(main())
