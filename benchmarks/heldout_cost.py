"""What the held-out step costs beside the trials it scores: one quick real-APPO study with held-out learners.

    python benchmarks/heldout_cost.py [--population 2] [--seed 1] [--learners ppo,frozen,analytic]
                                      [--generations G] [--inner-iters K]

The weekend study at its quick budget (or G generations of K train() calls), one mechanism (min_demand_frac), the given population and seed, the
real APPO loop, W&B disabled, 2 CPUs, `[final] learners` set: the trials run, then every finished trial's final
rules and status quo are scored by its own loop and each held-out learner. From the run folder: each trial's wall
seconds and core-seconds (trials.csv's wall_s and core_s: its generations and its final re-evaluation) and each
held-out job's (heldout.csv's job_seconds and job_core_s: one trial under one learner, its final seeds; a job's
first seconds start a Ray worker and build its Algorithm, so at a small K they weigh most). Printed: per learner,
its mean job and the job as a fraction of the mean trial in core-seconds, then the step against the trials it
followed. The last line is one JSON object.

    python benchmarks/heldout_cost.py --run docs/results/weekend-confirm
    python benchmarks/heldout_cost.py --run docs/results/weekend-confirm-packed --against docs/results/weekend-confirm

reads the same figures off a run that has been through its held-out step (a shipped folder, or a run folder with
its summary), at its own budget, without running anything: its sessions' logged wall time beside the jobs'
seconds summed, which is what the step cost where a session ended without logging its wall. `--against` prices
its jobs against another such run's, learner by learner and summed over the learners both have (the JSON line
gains `against`: each learner's ratio and `sum_over_learners`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bilevel_tune.cli.main import main as study_main
from bilevel_tune.study_data.run_store import RunStore, open_store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", default="2")
    parser.add_argument("--seed", default="1")
    parser.add_argument("--learners", default="ppo,frozen,analytic")
    parser.add_argument("--generations", type=int)
    parser.add_argument("--inner-iters", type=int)
    parser.add_argument("--run", type=Path, help="read a run that has been through its held-out step; run nothing")
    parser.add_argument("--against", type=Path, help="with --run: another such run, its jobs' core-seconds the reference")
    args = parser.parse_args()
    if args.against is not None and args.run is None:
        parser.error("--against prices a --run's jobs: give --run too")
    if args.run is not None:
        for run in filter(None, (args.run, args.against)):
            missing = [name for name in ("trials.csv", "heldout.csv", "study.json") if not (run / name).is_file()]
            if missing:
                parser.error(f"{run}: no {', '.join(missing)} in it (a shipped folder, or a run with its summary "
                             "and held-out step)")  # fmt: skip
        report(read(args.run), wall=None, against=read(args.against) if args.against else None)
        return 0
    budget = [*(["--outer-iters", str(args.generations)] if args.generations else []),
              *(["--inner-iters", str(args.inner_iters)] if args.inner_iters else [])]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        code = study_main([
            "weekend", "--quick", "--inner", "appo", "--population", args.population, "--seed", args.seed,
            "--optimize-params", "min_demand_frac", "--learners", args.learners, "--wandb", "disabled",
            "--num-cpus", "2", "--results", tmp, "--name", "run", *budget,
        ])  # fmt: skip
        wall = time.perf_counter() - start
        if code:
            return code
        report(read(Path(tmp, "run")), wall=wall)
    return 0


def read(run: Path) -> RunStore:
    return open_store(run)  # read only: it holds no lock and writes nothing


def job_core_s(store: RunStore) -> dict[str, float]:
    """Each learner's mean held-out job in core-seconds (wall × CPUs, for a run from before the measure)."""
    jobs = store.costs[store.costs["work"] == "held-out job"]
    return {k: float(v) for k, v in jobs.groupby("learner", sort=False)["core_s"].mean().items()}


def against_line(mine: dict[str, float], theirs: dict[str, float], name: str) -> tuple[str, dict]:
    """This run's jobs against another's, learner by learner and summed over the learners both have."""
    both = [learner for learner in mine if learner in theirs]
    ratios = {learner: round(mine[learner] / theirs[learner], 3) for learner in both}
    total = sum(mine[x] for x in both) / sum(theirs[x] for x in both)
    parts = ", ".join(f"{x} {mine[x]:.1f}/{theirs[x]:.1f} = {ratios[x]:.2f}×" for x in both)
    line = (f"against {name} (core-s a job, this run / that one): {parts}; summed over the {len(both)} learners: "
            f"{sum(mine[x] for x in both):.1f}/{sum(theirs[x] for x in both):.1f} = {total:.3f}×")  # fmt: skip
    return line, {**ratios, "sum_over_learners": round(total, 3)}


def report(store: RunStore, wall: float | None, against: RunStore | None = None) -> None:
    """Each learner's mean job beside the mean trial, in wall seconds and in the core-seconds the operating system
    measured (the store's cost table: a record from before the measure is priced at wall × CPUs, and said so)."""
    costs = store.costs
    trial_costs = costs[costs["work"] == "trial"]
    jobs = costs[costs["work"] == "held-out job"]
    trial_costs = trial_costs[trial_costs["trial"].isin(jobs["trial"])]  # the trials the step scored (no scan)
    trial_s, trial_core = float(trial_costs["wall_s"].mean()), float(trial_costs["core_s"].mean())
    per_job = jobs.groupby("learner", sort=False)[["wall_s", "core_s"]].mean()
    sessions = [r for r in store.record.get("reevaluations", []) if "rescoring" not in r]
    step_s = float(sum(r.get("wall_s", 0.0) for r in sessions))
    unlogged = sum("wall_s" not in r for r in sessions)
    cpus = max([r.get("cpus", 2) for r in sessions] or [2])
    budget = store.record["study"]["budget"]
    generations = int(store.trials_table["generations"].max())
    priced = [] if costs["core_s_measured"].all() else ["≈: core-seconds priced at wall × CPUs, the run predates the measure"]
    whole = f"; the whole command {wall:.0f} s" if wall is not None else ""
    print(f"{len(trial_costs)} trial(s), {generations} generations of K = {budget['inner_iters']}, "
          f"{budget['final_eval_seeds']} final seeds, mean {trial_s:.1f} s and {trial_core:.1f} core-s a trial "
          f"(generations + final re-evaluation){whole}")  # fmt: skip
    print(f"{'learner':<22} {'jobs':>5} {'s a job':>8} {'core-s a job':>13} {'job / trial (core-s)':>21}")
    for learner, job in per_job.iterrows():
        print(f"{learner:<22} {int((jobs['learner'] == learner).sum()):5d} {job.wall_s:8.1f} {job.core_s:13.1f} "
              f"{job.core_s / trial_core:21.2f}")  # fmt: skip
    trials_s, trials_core = float(trial_costs["wall_s"].sum()), float(trial_costs["core_s"].sum())
    jobs_s, jobs_core = float(jobs["wall_s"].sum()), float(jobs["core_s"].sum())
    print(f"the held-out step: {len(jobs)} job(s), {jobs_core:.0f} core-s = {jobs_core / trials_core:.2f}× the trials' "
          f"{trials_core:.0f} core-s (wall summed: {jobs_s:.0f} s = {jobs_s / trials_s:.2f}× {trials_s:.0f} s); "
          f"{len(sessions)} session(s) logged {step_s:.0f} s of wall ({cpus} CPUs: jobs {cpus} at a time)"
          + (f", {unlogged} of them ended without logging theirs" if unlogged else ""))  # fmt: skip
    for line in priced:
        print(line)
    compared = {}
    if against is not None:
        line, compared = against_line(job_core_s(store), job_core_s(against), against.run_dir.name)
        print(line)
    print(json.dumps({
        "trials": len(trial_costs), "generations": generations, "inner_iters": budget["inner_iters"],
        "trial_s": round(trial_s, 2), "trial_core_s": round(trial_core, 2), "step_s": round(step_s, 2),
        "jobs_s": round(jobs_s, 2), "jobs_core_s": round(jobs_core, 2), "sessions_unlogged": unlogged,
        "core_s_measured": bool(costs["core_s_measured"].all()),
        "job_s": {k: round(float(v), 2) for k, v in per_job["wall_s"].items()},
        "job_core_s": {k: round(float(v), 2) for k, v in per_job["core_s"].items()},
        "job_over_trial": {k: round(float(v) / trial_core, 3) for k, v in per_job["core_s"].items()},
        **({"against": compared} if against is not None else {}),
    }))  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
