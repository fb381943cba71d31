"""What the held-out step costs beside the trials it scores: one quick real-APPO study with held-out learners.

    python benchmarks/heldout_cost.py [--population 2] [--seed 1] [--learners ppo,frozen,analytic]
                                      [--generations G] [--inner-iters K]

The weekend study at its quick budget (or G generations of K train() calls), one mechanism (min_demand_frac), the given population and seed, the
real APPO loop, W&B disabled, 2 CPUs, `[final] learners` set: the trials run, then every finished trial's final
rules and status quo are scored by its own loop and each held-out learner. From the run folder: each trial's wall
seconds (trials.csv's wall_s: its generations and its final re-evaluation) and each held-out job's (heldout.csv's
job_seconds: one trial under one learner, its final seeds; a job's first seconds start a Ray worker and build
its Algorithm, so at a small K they weigh most). Printed: per learner, its mean job and the job as a
fraction of the mean trial, then the step against the trials it followed. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd

from bilevel_tune.cli.main import main as study_main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", default="2")
    parser.add_argument("--seed", default="1")
    parser.add_argument("--learners", default="ppo,frozen,analytic")
    parser.add_argument("--generations", type=int)
    parser.add_argument("--inner-iters", type=int)
    args = parser.parse_args()
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
        run = Path(tmp, "run")
        trials = pd.read_csv(run / "trials.csv")
        heldout = pd.read_csv(run / "heldout.csv")
        record = json.loads((run / "study.json").read_text())
    jobs = heldout.drop_duplicates(["trial", "learner"])
    per_job = jobs.groupby("learner", sort=False)["job_seconds"].mean()
    trial_s = float(trials["wall_s"].mean())
    step_s = float(sum(r["wall_s"] for r in record.get("reevaluations", [])))
    budget = record["study"]["budget"]
    generations = int(trials["generations"].max())
    print(f"{len(trials)} trial(s), {generations} generations of K = {budget['inner_iters']}, mean "
          f"{trial_s:.1f} s a trial (generations + final re-evaluation); the whole command {wall:.0f} s")
    print(f"{'learner':<22} {'s a job':>8} {'job / trial':>12}")
    for learner, seconds in per_job.items():
        print(f"{learner:<22} {seconds:8.1f} {seconds / trial_s:12.2f}")
    trials_s = float(trials["wall_s"].sum())
    print(f"the held-out step: {step_s:.1f} s for {len(jobs)} job(s), {step_s / trials_s:.2f}× the trials' "
          f"{trials_s:.1f} s (2 CPUs: trials and jobs two at a time)")
    print(json.dumps({
        "trials": len(trials), "generations": generations, "inner_iters": budget["inner_iters"],
        "trial_s": round(trial_s, 2), "step_s": round(step_s, 2),
        "job_s": {k: round(float(v), 2) for k, v in per_job.items()},
        "job_over_trial": {k: round(float(v) / trial_s, 3) for k, v in per_job.items()},
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
