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

    python benchmarks/heldout_cost.py --run docs/results/weekend-confirm

reads the same figures off a run that has been through its held-out step (a shipped folder, or a run folder with
its summary), at its own budget, without running anything: its sessions' logged wall time beside the jobs'
seconds summed, which is what the step cost where a session ended without logging its wall.
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
    parser.add_argument("--run", type=Path, help="read a run that has been through its held-out step; run nothing")
    args = parser.parse_args()
    if args.run is not None:
        missing = [name for name in ("trials.csv", "heldout.csv", "study.json") if not (args.run / name).is_file()]
        if missing:
            parser.error(f"--run {args.run}: no {', '.join(missing)} in it (a shipped folder, or a run with its summary "
                         "and held-out step)")  # fmt: skip
        report(*read(args.run), wall=None)
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
        tables = read(Path(tmp, "run"))
    report(*tables, wall=wall)
    return 0


def read(run: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    return pd.read_csv(run / "trials.csv"), pd.read_csv(run / "heldout.csv"), json.loads((run / "study.json").read_text())


def report(trials: pd.DataFrame, heldout: pd.DataFrame, record: dict, wall: float | None) -> None:
    jobs = heldout.drop_duplicates(["trial", "learner"])
    per_job = jobs.groupby("learner", sort=False)["job_seconds"].mean()
    cell = trials["trial"].str.rsplit("_", n=2).str[0]  # Tune's name less its trial id ("_7837d_00000"): the cell's
    trials = trials[cell.isin(jobs["trial"])]  # the finished trials the step scored (no scan, no failed trial)
    trial_s = float(trials["wall_s"].mean())
    sessions = [r for r in record.get("reevaluations", []) if "rescoring" not in r]
    step_s = float(sum(r.get("wall_s", 0.0) for r in sessions))
    unlogged = sum("wall_s" not in r for r in sessions)
    cpus = max([r.get("cpus", 2) for r in sessions] or [2])
    budget = record["study"]["budget"]
    generations = int(trials["generations"].max())
    whole = f"; the whole command {wall:.0f} s" if wall is not None else ""
    print(f"{len(trials)} trial(s), {generations} generations of K = {budget['inner_iters']}, "
          f"{budget['final_eval_seeds']} final seeds, mean {trial_s:.1f} s a trial (generations + final "
          f"re-evaluation){whole}")  # fmt: skip
    print(f"{'learner':<22} {'jobs':>5} {'s a job':>8} {'job / trial':>12}")
    for learner, seconds in per_job.items():
        print(f"{learner:<22} {int((jobs['learner'] == learner).sum()):5d} {seconds:8.1f} {seconds / trial_s:12.2f}")
    trials_s = float(trials["wall_s"].sum())
    jobs_s = float(jobs["job_seconds"].sum())
    print(f"the held-out step: {len(jobs)} job(s), their seconds summed {jobs_s:.0f} s = {jobs_s / trials_s:.2f}× the "
          f"trials' {trials_s:.0f} s; {len(sessions)} session(s) logged {step_s:.0f} s of wall ({cpus} CPUs: jobs "
          f"{cpus} at a time)" + (f", {unlogged} of them ended without logging theirs" if unlogged else ""))  # fmt: skip
    print(json.dumps({
        "trials": len(trials), "generations": generations, "inner_iters": budget["inner_iters"],
        "trial_s": round(trial_s, 2), "step_s": round(step_s, 2), "jobs_s": round(jobs_s, 2),
        "sessions_unlogged": unlogged,
        "job_s": {k: round(float(v), 2) for k, v in per_job.items()},
        "job_over_trial": {k: round(float(v) / trial_s, 3) for k, v in per_job.items()},
    }))  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
