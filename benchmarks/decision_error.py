"""How the decision tests err and decide on studies shaped like the weekend: the paired test beside AdaStop, one set
of draws for both.

    python benchmarks/decision_error.py [--studies 2000] [--adastop-studies 500] [--quick]
    python benchmarks/decision_error.py --margin [--studies 2000] [--quick]   # three-way answers

A simulated study is the weekend's grid (population 1 / 16 × 1-D / 2-D, stages of 2 seeds) run as
`--until-decided` runs it: each stage's cells scored, the study's test decides, the open hypotheses' cells get the
next stage's seeds. A run's score is its cell's mean + its seed's level + its own noise; every procedure reads the
same pre-drawn scores (a cell and a seed give one score, whichever test asks). Noise models:

* normal: seed level N(0, 0.010), a run's own N(0, 0.003) (the shipped weekend's: docs/verdicts.md);
* lognormal: the run's own noise a standardised lognormal (σ 1: skewed), the same SDs;
* t3: the run's own noise Student's t with 3 df, scaled to SD 0.003 (heavy tails);
* weekend: the four cells of a seed drawn together from the shipped weekend-appo's covariance over its 6 seeds.

Printed per noise model and plan (6 and 12 seeds per cell at most):

* the family-wise error under the global null (every cell alike): the share of studies that declare any
  hypothesis different, with its Monte Carlo SE;
* at the weekend's observed cell means (2-D +0.006, population 16 +0.007 over the grand mean's contrasts): the
  share of the 4 simple comparisons decided, of the 2 main effects (paired test), and the mean seeds per cell a
  study ran before it stopped;
* the 6 → 12 extension: the null studies run on the 6-seed plan and, where anything was left undecided, extended
  to 12 seeds with every look replayed under the 12-seed plan (what --extend-plan does): the error over both.

`--margin` prints the three-way answers' table instead (`[decide] margin` 0.01, the paired test alone), per
noise model and plan: the direction claims' family-wise error under the global null; the equivalence claims' at
its worst case, a true difference equal to the margin (2-D ahead by it, or population 16: the larger of the two);
the share of rows decided, either way (equivalent in brackets), at true differences 0, margin/2 (2-D) and the
weekend's own; and the mean seeds per cell a study ran with the margin against the same draws decided two-way.
`--declared-before K` declares the margin on the running plan before look K instead (what `--declare-margin`
does): the looks before it decided two-way, the α they could spend taken off the equivalence claims.

Ends with one JSON line. `--quick` runs 200 studies per setting (the shape of the table, not its figures).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bilevel_tune.base.sections import DecideSettings
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.stages import drawn_seeds, extended_plan, next_stage, with_stage
from bilevel_tune.verdicts import decide, family
from bilevel_tune.verdicts.adastop import AdaStopLooks

SEED_SD, RUN_SD = 0.010, 0.003
WEEKEND_APPO = Path(__file__).resolve().parent.parent / "docs" / "results" / "weekend-appo"
MODELS = ("normal", "lognormal", "t3", "weekend")
PLANS = (6, 12)


def weekend(test: str, max_seeds: int, margin: float | None = None):
    """The weekend's grid decided two-way (no margin, whatever its study file declares), or with this margin."""
    study = load_study("weekend")
    settings = {**dataclasses.asdict(study.decide), "test": test, "max_seeds": max_seeds, "margin": margin}
    return dataclasses.replace(study, decide=DecideSettings(**settings))


def shipped_cells() -> tuple[list[tuple], np.ndarray, np.ndarray]:
    """The shipped weekend's groups, its cell means less the grand mean, and the covariance of a seed's four cells."""
    trials = pd.read_csv(WEEKEND_APPO / "trials.csv")
    study = weekend("paired", 12)
    groups = compile_design(study).groups
    table = np.array(
        [
            [float(trials[(trials.population == g[0]) & (trials.optimize_params == ",".join(g[1])) &
                          (trials.seed == s)].final_objective.iloc[0]) for g in groups]
            for s in sorted(set(trials.seed))
        ]
    )  # fmt: skip
    means = table.mean(axis=0)
    return groups, means - means.mean(), np.cov(table - means, rowvar=False)


def draw_scores(model: str, groups, means, covariance, rng, seeds) -> dict[tuple, dict[int, float]]:
    """Every cell's score at every seed a study may run."""
    out: dict[tuple, dict[int, float]] = {g: {} for g in groups}
    for seed in seeds:
        if model == "weekend":
            row = rng.multivariate_normal(means, covariance)
        else:
            level = rng.normal(0, SEED_SD)
            if model == "normal":
                own = rng.normal(0, RUN_SD, len(groups))
            elif model == "lognormal":
                z = rng.lognormal(0, 1, len(groups))
                own = RUN_SD * (z - np.exp(0.5)) / np.sqrt((np.e - 1) * np.e)
            else:
                own = RUN_SD * rng.standard_t(3, len(groups)) / np.sqrt(3)
            row = means + level + own
        for g, value in zip(groups, row):
            out[g][seed] = 0.4 + float(value)
    return out


def run_staged(study, scores) -> tuple[decide.Decisions, object]:
    """The study in stages over pre-drawn scores, to its last decision; (decisions, the study as it ended). AdaStop
    keeps its comparator from stage to stage (`AdaStopLooks`: the replay's decisions, one look a stage)."""
    looks = AdaStopLooks(compile_design(study)) if study.decide.test == decide.ADASTOP else None
    while True:
        finals = {c.key: scores[c.group][c.seed] for c in compile_design(study).cells}
        if looks is None:
            decisions = decide.decide(compile_design(study), finals)
        else:
            looks.look(compile_design(study), finals)
            decisions = looks.decisions()
        stage = next_stage(study, decisions.open_groups)
        if stage is None:
            return decisions, study
        study = with_stage(study, stage)


def rejected(decisions) -> list:
    return [d for d in decisions.decisions if d.outcome in (decide.A_BETTER, decide.B_BETTER)]


def simulate(model: str, plan: int, studies: int, null: bool, base_seed: int, adastop_studies: int) -> dict:
    """Both tests on one set of draws; AdaStop on the first `adastop_studies` of them."""
    groups, means, covariance = shipped_cells()
    cell_means = np.zeros(len(groups)) if null else means
    covariance = covariance if model == "weekend" else None
    rng = np.random.default_rng([base_seed, MODELS.index(model), plan, int(null)])
    tests = {test: weekend(test, plan) for test in decide.TESTS}
    seeds = tests["paired"].seeds + drawn_seeds(tests["paired"])
    counts = {decide.PAIRED: studies, decide.ADASTOP: min(adastop_studies, studies)}
    out = {test: {"any": 0, "simple": 0, "main": 0, "seeds": 0.0} for test in tests}
    for i in range(studies):
        scores = draw_scores(model, groups, cell_means, covariance, rng, seeds)
        for test, study in tests.items():
            if i >= counts[test]:
                continue
            decisions, ended = run_staged(study, scores)
            shown = rejected(decisions)
            out[test]["any"] += bool(shown)
            out[test]["simple"] += sum(d.hypothesis.kind == family.SIMPLE for d in shown)
            out[test]["main"] += sum(d.hypothesis.kind == family.MAIN for d in shown)
            out[test]["seeds"] += len(compile_design(ended).all_seeds)
    for test in out:
        n = counts[test]
        if n == 0:  # not run (--adastop-studies 0)
            out[test] = {"studies": 0, "error" if null else "any_decided": float("nan"), "simple_decided": float("nan"),
                         "main_decided": float("nan"), "mean_seeds": float("nan")}  # fmt: skip
            continue
        out[test] = {
            "studies": n,
            "error" if null else "any_decided": out[test]["any"] / n,
            "simple_decided": out[test]["simple"] / (4 * n),
            "main_decided": out[test]["main"] / (2 * n),
            "mean_seeds": out[test]["seeds"] / n,
        }
    return out


def extension_error(model: str, studies: int, base_seed: int) -> float:
    """The null's error when a 6-seed plan that ended with anything undecided is extended to 12 (paired test)."""
    groups, _, covariance = shipped_cells()
    rng = np.random.default_rng([base_seed, MODELS.index(model), 99])
    study6 = weekend("paired", 6)
    seeds = study6.seeds + drawn_seeds(weekend("paired", 12))
    wrong = 0
    for _ in range(studies):
        scores = draw_scores(model, groups, np.zeros(len(groups)), covariance if model == "weekend" else None, rng,
                             seeds)  # fmt: skip
        decisions, ended = run_staged(study6, scores)
        if any(d.outcome == decide.UNDECIDED for d in decisions.decisions):  # the plan ended undecided: extended
            decisions, _ = run_staged(extended_plan(ended, 12), scores)
        wrong += bool(rejected(decisions))  # the answers as they stand at the end
    return wrong / studies


# -- a declared margin: three-way answers -------------------------------------------------------------------------------
MARGIN = 0.01  # fresh water's: the user's account calls 0.01–0.02 gaps findings and the seed spread about 0.01


def margin_settings(groups, means) -> dict[str, np.ndarray]:
    """The true cell means each margin setting draws around: no difference, 2-D ahead by half the margin, 2-D or
    population 16 ahead by exactly the margin (the equivalence claim's worst case), and the shipped weekend's."""
    dims = np.array([len(g[1]) == 2 for g in groups], float)
    sixteen = np.array([g[0] == 16 for g in groups], float)
    return {
        "0": np.zeros(len(groups)),
        "margin/2": MARGIN / 2 * dims,
        "margin, 2-D": MARGIN * dims,
        "margin, population": MARGIN * sixteen,
        "weekend": means,
    }


def simulate_margin(model: str, plan: int, studies: int, setting: str, base_seed: int, declared_before: int = 1) -> dict:
    """The paired test with the margin beside it without one, on one set of draws around one setting's means: the
    wrong claims of each kind, the rows decided and the seeds each spent."""
    groups, means, covariance = shipped_cells()
    cell_means = margin_settings(groups, means)[setting]
    two_way, three_way = weekend("paired", plan), weekend("paired", plan, MARGIN)
    three_way = dataclasses.replace(three_way, decide=dataclasses.replace(three_way.decide, margin_from=declared_before))
    truth = {h.key: sum(w * cell_means[groups.index(g)] for g, w in h.contrast) for h in family.family(compile_design(two_way)).hypotheses}
    rng = np.random.default_rng([base_seed, MODELS.index(model), plan, list(margin_settings(groups, means)).index(setting)])
    seeds = two_way.seeds + drawn_seeds(two_way)
    out = {"direction_error": 0, "equivalence_error": 0, "decided": 0, "equivalent": 0, "seeds": 0.0,
           "two_way_decided": 0, "two_way_seeds": 0.0}  # fmt: skip
    for _ in range(studies):
        scores = draw_scores(model, groups, cell_means, covariance if model == "weekend" else None, rng, seeds)
        decisions, ended = run_staged(three_way, scores)
        rows = [(d, truth[d.hypothesis.key]) for d in decisions.decisions]
        out["direction_error"] += any(
            (d.outcome == decide.B_BETTER and t <= 1e-12) or (d.outcome == decide.A_BETTER and t >= -1e-12)
            for d, t in rows
        )
        out["equivalence_error"] += any(d.within_margin and abs(t) >= MARGIN - 1e-12 for d, t in rows)
        out["decided"] += sum(d.outcome not in (decide.UNDECIDED, decide.OPEN) for d, _ in rows)
        out["equivalent"] += sum(d.within_margin for d, _ in rows)
        out["seeds"] += len(compile_design(ended).all_seeds)
        plain, plain_ended = run_staged(two_way, scores)
        out["two_way_decided"] += len(rejected(plain))
        out["two_way_seeds"] += len(compile_design(plain_ended).all_seeds)
    hypotheses = len(truth)
    return {
        "studies": studies,
        "direction_error": out["direction_error"] / studies,
        "equivalence_error": out["equivalence_error"] / studies,
        "decided": out["decided"] / (hypotheses * studies),
        "equivalent": out["equivalent"] / (hypotheses * studies),
        "mean_seeds": out["seeds"] / studies,
        "two_way_decided": out["two_way_decided"] / (hypotheses * studies),
        "two_way_mean_seeds": out["two_way_seeds"] / studies,
    }


def margin_table(models, studies: int, plans=PLANS, declared_before: int = 1) -> dict:
    """Prints the margin's table: per noise model and plan, both errors and what the margin decides and saves."""
    se = lambda p, n: np.sqrt(max(p, 1 / n) * (1 - p) / n)  # noqa: E731 - a share's Monte Carlo SE
    late = f", declared before look {declared_before} (the looks before it two-way)" if declared_before > 1 else ""
    print(
        f"margin {MARGIN:g}{late}: {studies} simulated weekend studies per setting, stages of 2 seeds, family-wise "
        "α 0.05 over both kinds of claim"
    )
    print(
        f"{'noise':10} {'plan':>4} | {'direction error, Δ = 0':>22} | {'equivalence error, Δ = margin':>29} | "
        "rows decided (equivalent) at Δ = 0 / margin/2 / weekend | mean seeds per cell, margin vs two-way, at Δ = 0 "
        "/ margin/2 / weekend"
    )
    results = {}
    for model in models:
        for plan in plans:
            runs = {
                setting: simulate_margin(model, plan, studies, setting, 20261207, declared_before)
                for setting in ("0", "margin/2", "margin, 2-D", "margin, population", "weekend")
            }
            d = runs["0"]["direction_error"]
            e = max(runs["margin, 2-D"]["equivalence_error"], runs["margin, population"]["equivalence_error"])
            shown = ("0", "margin/2", "weekend")
            decided = " / ".join(f"{runs[k]['decided']:.2f} ({runs[k]['equivalent']:.2f})" for k in shown)
            seeds = " / ".join(f"{runs[k]['mean_seeds']:.1f} vs {runs[k]['two_way_mean_seeds']:.1f}" for k in shown)
            print(
                f"{model:10} {plan:>4} | {d:>14.3f} ± {se(d, studies):.3f} | {e:>21.3f} ± {se(e, studies):.3f} | "
                f"{decided} | {seeds}",
                flush=True,
            )
            results[f"{model}_{plan}"] = runs
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="200 studies per setting")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument(
        "--adastop-studies", type=int, default=500,
        help="AdaStop at the 12-seed plan on the first N of the draws (its permutations: ~1 s a study; default 500)",
    )  # fmt: skip
    parser.add_argument("--plans", default=",".join(map(str, PLANS)), help="seeds per cell at most, e.g. 6,12")
    parser.add_argument(
        "--declared-before", type=int, default=1, metavar="K",
        help="with --margin: the margin declared on a running plan before look K (--declare-margin), not from look 1",
    )  # fmt: skip
    parser.add_argument(
        "--margin", action="store_true",
        help=f"the three-way answers' table instead: margin {MARGIN:g}, both kinds of error, rows decided, seeds saved",
    )  # fmt: skip
    args = parser.parse_args()
    studies = 200 if args.quick else args.studies
    models = [m for m in args.models.split(",") if m]
    start = time.time()
    if args.margin:
        plans = [int(p) for p in args.plans.split(",") if p]
        results = {"studies": studies, "margin": MARGIN, "declared_before": args.declared_before,
                   **margin_table(models, studies, plans, args.declared_before)}  # fmt: skip
        print(f"({time.time() - start:.0f} s)")
        print(json.dumps(results))
        return
    results: dict = {"studies": studies}
    se = lambda p, n: np.sqrt(max(p, 1 / n) * (1 - p) / n)  # noqa: E731 - a share's Monte Carlo SE
    print(
        f"{studies} simulated weekend studies per setting (AdaStop at the 12-seed plan: the first "
        f"{min(args.adastop_studies, studies)} of them), stages of 2 seeds, family-wise α 0.05"
    )
    print(f"{'noise':10} {'plan':>4} | {'FWER paired':>17} {'FWER AdaStop':>17} | decided at the weekend's effects:"
          f" simple paired / AdaStop, main paired | mean seeds paired / AdaStop")  # fmt: skip
    for model in models:
        for plan in PLANS:
            adastop_studies = studies if plan == 6 else args.adastop_studies
            null = simulate(model, plan, studies, True, 20261204, adastop_studies)
            alt = simulate(model, plan, studies, False, 20261205, adastop_studies)
            p, a = null["paired"]["error"], null["adastop"]["error"]
            n_p, n_a = null["paired"]["studies"], null["adastop"]["studies"]
            print(
                f"{model:10} {plan:>4} | {p:.3f} ± {se(p, n_p):.3f} {a:>11.3f} ± {se(a, n_a):.3f} | "
                f"{alt['paired']['simple_decided']:.2f} / {alt['adastop']['simple_decided']:.2f}, "
                f"{alt['paired']['main_decided']:.2f} | "
                f"{alt['paired']['mean_seeds']:.1f} / {alt['adastop']['mean_seeds']:.1f}",
                flush=True,
            )
            results[f"{model}_{plan}"] = {"null": null, "effects": alt}
        results[f"{model}_extension_6_to_12"] = extension_error(model, studies, 20261206)
        print(f"{model:10} 6→12 | extension's FWER (paired): {results[f'{model}_extension_6_to_12']:.3f}", flush=True)
    print(f"({time.time() - start:.0f} s)")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
