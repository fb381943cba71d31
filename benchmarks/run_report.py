"""What a long run did, trial by trial: its pace and its census at the start and at the end — and its shipped copy.

    python benchmarks/run_report.py RUN_DIR                      # print the figures
    python benchmarks/run_report.py RUN_DIR --ship docs/results/weekend-appo [--notes notes.md]

Per trial, from its `generations.jsonl` alone (and the plan in study.json): generations done of its budget,
the plan's seconds for it against the sum of its generations' own,
the median seconds per generation over the first and the last 10 % of its
generations (a slowdown shows as last ≫ first), and its shards' resident
memory (summed over shards) and OS threads at its first and last generation.
The run's sessions (fresh start, resumes: each one's start, end, wall time, exit status and plan) and the
run's ETA against its wall time summed over them come from study.json.

`--ship DIR` copies what a reader of the repository needs — summary.md, the CSV
tables, verdicts.json, study.json and the plots — into DIR and writes DIR/run.md:
the figures above and the notes given (the commands, the dry run's ETA, the wall
time, what else ran on the machine). Records and Tune's state stay behind: they
are large, and the summary is rebuilt from them, not from the copy.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from bilevel_tune.core import metrics as M
from bilevel_tune.study_data.run_folder import read_study_file, trial_records

SHIPPED = ("summary.md", "trials.csv", "cells.csv", "grid.csv", "scan.csv", "verdicts.json", "study.json")


def trial_figures(run_dir: Path) -> list[dict]:
    """One row per trial folder with records: the plan's seconds against its generations' own, pace first/last
    10 %, RSS and threads first/last, and RSS after warm-up: the median over the second tenth of its generations
    against the last tenth's (flat after warm-up: within a few % over the last 90 %)."""
    plan = read_study_file(run_dir).get("plan", {})
    timed = plan.get("model", {}).get("calibrated", True)  # by work alone, "seconds" are units of work
    planned = {t["trial"]: t["seconds"] for t in plan.get("trials", [])} if timed else {}
    budgets = {}
    for name, (generations, final) in sorted(trial_records(run_dir).items()):
        if not generations:
            continue
        decile = max(1, len(generations) // 10)
        seconds = [g[M.SEC_PER_GEN] for g in generations]
        rss = [g[M.RSS_MB] for g in generations]
        first, last = generations[0], generations[-1]
        budgets[name] = {
            "trial": name.rsplit("_", 2)[0],
            "generations": len(generations),
            "complete": final is not None,
            "planned_s": planned.get(name.rsplit("_", 2)[0]),
            "generations_s": float(sum(seconds)),
            "s_per_gen_first_10pct": float(np.median(seconds[:decile])),
            "s_per_gen_last_10pct": float(np.median(seconds[-decile:])),
            "rss_mb_first": float(first[M.RSS_MB]),
            "rss_mb_last": float(last[M.RSS_MB]),
            "rss_mb_warm_10_20pct": float(np.median(rss[decile : 2 * decile] or rss[-decile:])),
            "rss_mb_last_10pct": float(np.median(rss[-decile:])),
            "threads_first": int(first[M.THREADS_OS]),
            "threads_last": int(last[M.THREADS_OS]),
            "shards": int(last.get(M.SHARDS, 1)),
        }
    return list(budgets.values())


def markdown(rows: list[dict]) -> str:
    head = (
        "| trial | generations | shards | planned | its generations took | s/gen first 10 % | s/gen last 10 % "
        "| RSS MB first → last | RSS MB after warm-up: 2nd → last 10 % | threads first → last |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        done = f"{r['generations']}{'' if r['complete'] else ' (running)'}"
        planned = clock(r["planned_s"]) if r["planned_s"] is not None else "—"
        drift = 100 * (r["rss_mb_last_10pct"] - r["rss_mb_warm_10_20pct"]) / r["rss_mb_warm_10_20pct"]
        lines.append(
            f"| {r['trial']} | {done} | {r['shards']} | {planned} | {clock(r['generations_s'])} | "
            f"{r['s_per_gen_first_10pct']:.2f} | "
            f"{r['s_per_gen_last_10pct']:.2f} | {r['rss_mb_first']:.0f} → {r['rss_mb_last']:.0f} | "
            f"{r['rss_mb_warm_10_20pct']:.0f} → {r['rss_mb_last_10pct']:.0f} ({drift:+.1f} %) | "
            f"{r['threads_first']} → {r['threads_last']} |"
        )
    return "\n".join(lines)


def clock(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))


def clock_or_dash(seconds: float | None) -> str:
    return "—" if seconds is None else clock(seconds)


def sessions(run_dir: Path) -> list[str]:
    """Provenance, each session (start, end, wall, exit, commit, its plan's ETA), and the run's ETA against the wall
    time summed over its sessions. Older records (no plan or end per session) show what they hold."""
    record = read_study_file(run_dir)
    provenance = record.get("provenance", {})
    runs = record.get("sessions", [])
    lines = [
        f"- commit {provenance.get('git_sha')}, {provenance.get('cores')} cores, {provenance.get('platform')}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in provenance.get("versions", {}).items()),
        "",
        "| session | started (UTC) | ended | wall | exit | finished / errored / interrupted | commit | its plan's ETA |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, s in enumerate(runs, 1):
        ended = "wall_s" in s
        counts = " / ".join(str(s[k]) for k in ("finished", "errored", "interrupted")) if ended else "—"
        lines.append(
            f"| {i}{' (--resume)' if s.get('resume') else ''} | {s['started_utc'][:19]} | "
            f"{s['ended_utc'][:19] if ended else 'not recorded'} | {clock(s['wall_s']) if ended else '—'} | "
            f"{s['exit_code'] if ended else '—'} | {counts} | {(s.get('git_sha') or '—')[:7]} | "
            f"{clock_or_dash(s.get('plan', {}).get('eta_s'))} |"
        )
    eta = record.get("plan", {}).get("eta_s")  # None: a plan by work alone
    walls = [s["wall_s"] for s in runs if "wall_s" in s]
    whole = bool(runs) and "plan" in runs[0]  # older releases overwrote the top-level plan at each resume
    if not whole:
        line = f"- the plan on record is the latest of an older release's sessions (for what was left then): ETA {clock_or_dash(eta)}"
    elif eta is None:
        line = "- the run's plan (its first session's) had no ETA: this machine had no figures for its settings"
    else:
        line = f"- the run's plan (its first session's, for the whole command): ETA {clock(eta)}"
    if walls:
        total = sum(walls)
        line += f"; wall time over {len(walls)} session(s) {clock(total)}"
        if whole and eta is not None:
            line += f" (ETA − wall: {100 * (eta - total) / total:+.0f} % of the wall)"
    if len(walls) < len(runs):
        line += f" ({len(runs) - len(walls)} session(s) recorded no end)"
    return [*lines, "", line]


def ship(run_dir: Path, out: Path, rows: list[dict], notes: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED:
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, out / name)
    for png in sorted((run_dir / "plots").glob("*.png")):
        shutil.copy2(png, out / png.name)
    text = [f"# {run_dir.name}", "", notes.strip(), "", "## Provenance and sessions", "", *sessions(run_dir)]
    text += ["", "## Per trial", "", markdown(rows), ""]
    (out / "run.md").write_text("\n".join(text))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--ship", type=Path, help="copy the summary, tables and plots here and write run.md")
    parser.add_argument("--notes", type=Path, help="markdown for run.md: commands, ETA, wall time, what else ran")
    args = parser.parse_args(argv)
    if not (args.run_dir / "study.json").is_file():
        parser.error(f"{args.run_dir} is not a study run folder (no study.json)")
    rows = trial_figures(args.run_dir)
    print(markdown(rows))
    if args.ship:
        ship(args.run_dir, args.ship, rows, args.notes.read_text() if args.notes else "")
        print(f"shipped to {args.ship}")
    print(json.dumps({"trials": len(rows), "complete": sum(r["complete"] for r in rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
