"""A long run's record — its sessions, stages and pace, trial by trial — and its shipped copy under docs/results/.

    bilevel-summary RUN_DIR --record                                  # print the figures
    bilevel-summary RUN_DIR --ship docs/results/weekend-appo [--notes notes.md]

Per trial, from its `generations.jsonl` alone (and the plan in study.json): generations done of its budget,
the plan's seconds for it against the sum of its generations' own,
the median seconds per generation over the first and the last 10 % of its
generations (a slowdown shows as last ≫ first), and its shards' resident
memory (summed over shards) and OS threads at its first and last generation.
The run's sessions (fresh start, resumes: each one's start, end, wall time, exit status and plan), its stages
(`--until-decided`: each stage's seeds, trials and wall) and the run's ETA against its wall time summed over
its sessions come from study.json.

`--ship DIR` copies what a reader needs into DIR — study.json, summary.md, the tables (the compact
generations.csv.gz among them: the shipped folder reopens in `bilevel-summary` and the notebook) and the
plots — and writes DIR/run.md: the notes given (the commands, what else ran on the machine), the Answers
block of summary.md as "What it answers", the sessions, the stages and the figures above. Records and Tune's
state stay behind: they are large, and history keeps them.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import numpy as np

from bilevel_tune.core import metrics
from bilevel_tune.report.section import Summary
from bilevel_tune.study_data.final_scores import ANYTIME_CSV, FINALS_CSV, RULES
from bilevel_tune.study_data.run_folder import (
    ANSWERS_CSV,
    CEILING_CSV,
    CELLS_CSV,
    GENERATIONS_CSV,
    GRID_CSV,
    HELDOUT_CSV,
    OPTIMIZERS_CSV,
    PILOT_FILE,
    PLOTS_DIR,
    REEVALUATIONS,
    ROBUSTNESS_CSV,
    SCAN,
    SCAN_CSV,
    STUDY_FILE,
    SUMMARY_MARKDOWN,
    TRIALS_CSV,
    VERDICTS_FILE,
)

RUN_MD = "run.md"  # a shipped result's record: how it was run, what it answers
SHIPPED = (
    STUDY_FILE, SUMMARY_MARKDOWN, ANSWERS_CSV, CEILING_CSV, TRIALS_CSV, GENERATIONS_CSV, CELLS_CSV, GRID_CSV, SCAN_CSV,
    VERDICTS_FILE, HELDOUT_CSV, ROBUSTNESS_CSV, OPTIMIZERS_CSV, FINALS_CSV, ANYTIME_CSV, PILOT_FILE,
)  # fmt: skip


def trial_figures(store) -> list[dict]:
    """One row per trial folder with records: the plan's seconds against its generations' own, pace first/last
    10 %, RSS and threads first/last, and RSS after warm-up: the median over the second tenth of its generations
    against the last tenth's (flat after warm-up: within a few % over the last 90 %)."""
    plan = store.record.get("plan", {})
    timed = plan.get("model", {}).get("calibrated", True)  # by work alone, "seconds" are units of work
    planned = {t["trial"]: t["seconds"] for t in plan.get("trials", [])} if timed else {}
    budgets = {}
    for name, trial in store.folders.items():
        generations, final = trial.generations, trial.final
        if not generations:
            continue
        decile = max(1, len(generations) // 10)
        seconds = [g[metrics.SEC_PER_GEN] for g in generations]
        rss = [g[metrics.RSS_MB] for g in generations]
        first, last = generations[0], generations[-1]
        budgets[name] = {
            "trial": name.rsplit("_", 2)[0],
            "generations": len(generations),
            "complete": final is not None,
            "planned_s": planned.get(name.rsplit("_", 2)[0]),
            "generations_s": float(sum(seconds)),
            "s_per_gen_first_10pct": float(np.median(seconds[:decile])),
            "s_per_gen_last_10pct": float(np.median(seconds[-decile:])),
            "rss_mb_first": float(first[metrics.RSS_MB]),
            "rss_mb_last": float(last[metrics.RSS_MB]),
            "rss_mb_warm_10_20pct": float(np.median(rss[decile : 2 * decile] or rss[-decile:])),
            "rss_mb_last_10pct": float(np.median(rss[-decile:])),
            "threads_first": int(first[metrics.THREADS_OS]),
            "threads_last": int(last[metrics.THREADS_OS]),
            "shards": int(last.get(metrics.SHARDS, 1)),
        }
    return list(budgets.values())


def spent(store) -> list[str]:
    """What the run spent, from its records: farm trainings — every evaluation of the search (generations ×
    population) and every final re-evaluation's training (final seeds × the rule sets scored, those at smaller
    budgets too: `[decide] equal_budget`) — and trial time (its generations' seconds and its final re-evaluation's)."""
    evaluations = finals = at_smaller = 0
    seconds = 0.0
    trials = 0
    for trial in store.folders.values():
        generations, final = trial.generations, trial.final
        if not generations or generations[0].get(metrics.TRIAL_KIND) == SCAN:
            continue
        trials += 1
        evaluations += sum(len(g[metrics.CANDIDATES]) for g in generations)
        seconds += sum(g[metrics.SEC_PER_GEN] for g in generations) + ((final or {}).get(metrics.SEC_FINAL) or 0.0)
        final = final or {}
        by_seed = final.get(metrics.FINAL_BY_SEED) or {}  # an older record: its count of final seeds alone
        finals += len(RULES) * len(by_seed.get("seeds", [])) if by_seed else len(RULES) * int(final.get(metrics.FINAL_SEEDS) or 0)
        for scored in (final.get(metrics.FINAL_AT_EVALUATIONS) or {}).values():
            at_smaller += len(RULES) * len(scored.get("best", []))
    if not trials:
        return []
    smaller = f", {at_smaller:,} of them at smaller budgets (equal evaluations)" if at_smaller else ""
    return [
        f"- farm trainings: {evaluations:,} evaluations + {finals + at_smaller:,} final re-evaluation trainings"
        f"{smaller} = {evaluations + finals + at_smaller:,}, over its {trials} search trial(s)",
        f"- trial time: {clock(seconds)}, {seconds / 3600:.1f} trial-hours (each trial's generations and final "
        "re-evaluation)",
        *core_hours(store.costs),
    ]


def core_hours(costs) -> list[str]:
    """The core-hours the run's trials and held-out jobs used: as the operating system measured them, or — for work
    recorded before they were — its wall × its CPUs, said so."""
    lines = []
    for work, rows in costs.groupby("work", sort=False):
        measured = rows["core_s_measured"].all()
        how = "as the operating system measured them" if measured else (
            "priced at wall × CPUs" + ("" if not rows["core_s_measured"].any() else " where not measured"))
        lines.append(f"- core time ({work}s): {rows['core_s'].sum() / 3600:.2f} core-hours over {len(rows)}, {how}")
    return lines


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


def sessions(store) -> list[str]:
    """Provenance, each session (start, end, wall, exit, commit, its plan's ETA), and the run's ETA against the wall
    time summed over its sessions. Older records (no plan or end per session) show what they hold."""
    record = store.record
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


def stages(store) -> list[str]:
    """A run in stages (study.json's stage log): each stage's seeds, trials, when it began and was first decided
    (the elapsed time is the stage's own), and the outcomes its test gave after it (a stage decided again — a newer
    test, a plan extended — its latest with their time, the earlier beside it); then each plan extension; [] for a
    run without stages."""
    record, log = store.record, store.stage_log
    if not log:
        return []
    lines = [
        "| stage | seeds | trials | began (UTC) | decided (UTC) | elapsed | outcomes after it |",
        "|---|---|---|---|---|---|---|",
    ]
    for stage in log:
        earlier_looks = stage.get("superseded", [])
        began, latest = stage.get("started_utc"), stage.get("decided_utc")
        decided = earlier_looks[0].get("decided_utc", latest) if earlier_looks else latest
        elapsed = "—"
        if began and decided:
            elapsed = clock(
                (datetime.datetime.fromisoformat(decided) - datetime.datetime.fromisoformat(began)).total_seconds()
            )
        said = _outcomes(stage) or "not decided yet"
        if earlier_looks:
            said += _at(stage)
        for earlier in reversed(earlier_looks):
            said += f"; before: {_outcomes(earlier)}{_at(earlier)}"
        lines.append(
            f"| {stage['stage']} | {', '.join(map(str, stage['seeds']))} | {len(stage['trials'])} | "
            f"{(began or '—')[:19]} | {(decided or '—')[:19]} | {elapsed} | {said} |"
        )
    decide_settings = record.get("study", {}).get("decide", {})
    planned = decide_settings.get("max_seeds", 0) // max(decide_settings.get("seeds_per_stage", 1), 1)
    last = log[-1].get("decisions") or []
    if last and len(log) < planned and all(d["outcome"] not in ("open", "undecided") for d in last):
        within = sum(bool(d.get("within_margin")) for d in last)
        lines += [
            "",
            f"Every row was decided after stage {len(log)} of {planned}, so the run ended there: its last "
            f"{planned - len(log)} stage(s) were not needed"
            + (f" ({within} row(s) shown within the margin {decide_settings['margin']:g})." if within else "."),
        ]
    for grown in record.get("plan_extensions", []):
        lines += [
            "",
            f"The plan was extended after stage {grown['after_stage']} ({grown['utc'][:19]} UTC), from "
            f"{grown['from_max_seeds']} to {grown['to_max_seeds']} seeds per cell at most, declared before its next "
            "look: every look is decided under the larger plan.",
        ]
    for declared in record.get("margin_declarations", []):
        at = f", at {declared['git_sha'][:7]}" if declared.get("git_sha") else ""
        lines += [
            "",
            f"A margin of {declared['margin']:g} (the smallest difference that matters) was declared before look "
            f"{declared['from_look']} ({declared['utc'][:19]} UTC{at}): it decides from that look on, each row "
            "better, equivalent within it, or both; the looks before keep their answers.",
        ]
    return lines


def _at(entry: dict) -> str:
    """When a stage log entry's decisions were made (a stage decided more than once says each)."""
    return f" at {entry['decided_utc'][:19]}" if entry.get("decided_utc") else ""


def _outcomes(entry: dict) -> str:
    """One stage log entry's decisions counted by outcome, and the test that gave them (AdaStop before it was named)."""
    outcomes: dict[str, int] = {}
    for decision in entry.get("decisions", []):
        outcomes[decision["outcome"]] = outcomes.get(decision["outcome"], 0) + 1
    if not outcomes:
        return ""
    test = {"paired": "paired t", "adastop": "AdaStop"}.get(entry.get("test", "adastop"), entry.get("test"))
    plan = f", {entry['max_seeds']}-seed plan" if "max_seeds" in entry else ""
    return ", ".join(f"{n} {outcome}" for outcome, n in outcomes.items()) + f" ({test}{plan})"


HELD_OUT_HEADING = "## Against held-out learners"
QUOTED = re.compile(r"(<!-- quoted: (?P<name>\w+) -->\n)(?P<body>.*?)(\n<!-- /quoted: (?P=name) -->)", re.S)


def body(summary: Summary, name: str) -> str:
    """A section's markdown as summary.md has it, its heading left out ('' where the run has none)."""
    lines = next((lines for section, lines in summary.markdown() if section == name), [])
    return "\n".join(lines[1:]).strip()


def _quoted(name: str, text: str) -> list[str]:
    """A block run.md quotes, between the markers `requote` finds it by."""
    return [f"<!-- quoted: {name} -->", text, f"<!-- /quoted: {name} -->"]


def held_out_sessions(store) -> list[str]:
    """The held-out step's sessions (study.json's reevaluations): learners, jobs, when, wall, commit; [] without."""
    log = store.record.get(REEVALUATIONS, [])
    if not log:
        return []
    lines = [
        "| session | learners | jobs | scored / failed | started (UTC) | ended | wall | commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, entry in enumerate(log, 1):
        ended = "wall_s" in entry
        counted = ended or entry.get("counted_per_job")  # else a session logged its count only as it ended
        scored = f"{entry['scored']} / {entry['failed']}" if counted else "not recorded"
        lines.append(
            f"| {i} | {', '.join(entry['learners'])} | {entry['jobs']} | {scored} | "
            f"{entry['started_utc'][:19]} | {entry['ended_utc'][:19] if ended else 'not recorded'} | "
            f"{clock(entry['wall_s']) if ended else '—'} | {(entry.get('git_sha') or '—')[:7]} |"
        )
    return lines


def quoted_blocks(store, summary: Summary) -> dict[str, str]:
    """What run.md quotes of the summary, by section: the Answers, the Against its pilot section (its heading
    kept: it names the pilot), and the Robustness section with the held-out step's sessions."""
    blocks = {"answers": body(summary, "answers")}
    if summary.against is not None:
        blocks["against"] = next(lines for name, lines in summary.markdown() if name == "against")[0] + "\n\n" + body(summary, "against")
    if robustness := body(summary, "robustness"):
        blocks["robustness"] = "\n".join([robustness, "", "The held-out step's sessions:", "", *held_out_sessions(store)])
    return blocks


def _sections(store, summary: Summary) -> list[str]:
    """run.md's sections quoting the summary: what it answers, against its pilot, against held-out learners."""
    blocks = quoted_blocks(store, summary)
    text = ["## What it answers", "", f"Quoted from its [summary.md]({SUMMARY_MARKDOWN}), as the tool wrote it:", "",
            *_quoted("answers", blocks["answers"]), ""]  # fmt: skip
    if "against" in blocks:
        text += [f"Quoted from its [summary.md]({SUMMARY_MARKDOWN}), as the tool wrote it ({PILOT_FILE}: the pilot's "
                 "answers):", "", *_quoted("against", blocks["against"]), ""]  # fmt: skip
    if "robustness" in blocks:
        text += _held_out(blocks["robustness"])
    return text


def _held_out(block: str) -> list[str]:
    return [
        HELD_OUT_HEADING, "",
        f"Quoted from its [summary.md]({SUMMARY_MARKDOWN}), as the tool wrote it (`--reevaluate` or `[final] learners`; "
        "each job's scores in [heldout.csv](heldout.csv)):", "", *_quoted("robustness", block), "",
    ]  # fmt: skip


def requote(store, summary: Summary) -> bool:
    """A shipped folder's run.md quotes its summary's sections as they now are: each quoted block (between its
    markers) replaced by the section's text now, a held-out step's section put before the provenance where the run
    has one now and run.md has none yet. Returns whether run.md changed."""
    run_md = store.run_dir / RUN_MD
    if not run_md.is_file():
        return False
    text = run_md.read_text()
    blocks = quoted_blocks(store, summary)
    updated = QUOTED.sub(lambda m: m[1] + blocks.get(m["name"], m["body"]) + m[4], text)
    if "robustness" in blocks and "<!-- quoted: robustness -->" not in updated:
        before, heading, rest = updated.partition("\n## Provenance and sessions")
        section = "\n".join(_held_out(blocks["robustness"]))
        updated = f"{before}\n{section}{heading}{rest}" if heading else updated.rstrip("\n") + "\n\n" + section
    if updated == text:
        return False
    run_md.write_text(updated)
    return True


def ship(store, summary: Summary | None, out: Path, rows: list[dict], notes: str) -> None:
    """Copy what a reader needs into `out` (a folder under docs/results/) and write its run.md (quoting `summary`'s
    sections, where there is one)."""
    run_dir = store.run_dir
    store.ship(out, SHIPPED, run_dir / PLOTS_DIR)
    title = f"# {run_dir.resolve().name}"  # the run's name, wherever it ships
    text = [title, "", untitled(notes, title), "", *(_sections(store, summary) if summary is not None else [])]
    if stages(store):
        text += ["## Stages", "", *stages(store), ""]
    if cost := spent(store):
        text += ["## What it spent", "", *cost, ""]
    text += ["## Provenance and sessions", "", *sessions(store), "", "## Per trial", "", markdown(rows), ""]
    (out / RUN_MD).write_text("\n".join(text))


def untitled(notes: str, title: str) -> str:
    """Notes without the run's title at their head: notes taken from a shipped run.md's head carry it, and a ship
    writes it once."""
    lines = notes.strip().splitlines()
    while lines and lines[0].strip() in ("", title):
        lines.pop(0)
    return "\n".join(lines)


def report(store, summary: Summary, ship_to: Path | None = None, notes: str = "", out=print) -> None:
    """Print the run's per-trial figures (and ship it)."""
    rows = trial_figures(store)
    out(markdown(rows))
    for line in stages(store):
        out(line)
    if ship_to:
        ship(store, summary, ship_to, rows, notes)
        out(f"shipped to {ship_to}")
    out(json.dumps({"trials": len(rows), "complete": sum(r["complete"] for r in rows)}))
