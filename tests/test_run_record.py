"""study.json as a run's record across sessions: the whole command's plan kept, each session's own plan, start
and end — and the run's record (`cli.run_record`, `bilevel-summary --record`) reading the ETA against the wall
time summed over them."""

import json
from pathlib import Path

import pytest

from bilevel_tune.cli import run_record, session_log
from bilevel_tune.cli.options import RunOptions
from bilevel_tune.core import metrics
from bilevel_tune.planning.plan import CostModel, make_plan
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import GENERATIONS_FILE, STUDY_FILE, read_study_file
from bilevel_tune.study_data.run_store import RunStore

from .study_helpers import held_store
from .test_plan import MODEL  # the plan tests' cost model: the weekend's figures, rounded

ROOT = Path(__file__).resolve().parent.parent


def run_report():
    return run_record


def plan_of(study, cells):
    return make_plan(cells, study.budget, 2, MODEL)


@pytest.fixture
def two_sessions(tmp_path):
    """A fresh session stopped with 4 of the 8 trials finished, then a resume that plans the 4 left and finishes them."""
    study = load_study("weekend")
    cells = compile_design(study).cells
    run_dir = tmp_path / "run"
    with held_store(run_dir, fresh=True) as store:
        first = session_log.record_start(study, store, plan_of(study, cells), RunOptions(study="weekend"), "disabled")
        session_log.record_end(store, first, 3600.0, 130, (4, 0, 4))
    options = RunOptions(study="weekend", resume=True)
    with held_store(run_dir) as store:
        second = session_log.record_start(study, store, plan_of(study, cells[4:]), options, "disabled")
        session_log.record_end(store, second, 5400.0, 0, (8, 0, 0))
    return run_dir, plan_of(study, cells), plan_of(study, cells[4:])


def test_a_resume_keeps_the_commands_plan_and_records_its_own(two_sessions):
    run_dir, whole, rest = two_sessions
    record = read_study_file(run_dir)
    assert record["plan"]["eta_s"] == round(whole.eta_s, 1), "the top-level plan stays the first session's"
    assert len(record["plan"]["trials"]) == 8
    first, second = record["sessions"]
    assert first["plan"] == record["plan"]
    assert second["resume"] and second["plan"]["eta_s"] == round(rest.eta_s, 1) < first["plan"]["eta_s"]
    assert len(second["plan"]["trials"]) == 4
    assert first["git_sha"] == second["git_sha"] == record["provenance"]["git_sha"] == session_log.git_sha()


def test_each_session_records_its_end_wall_time_and_exit(two_sessions):
    run_dir, _, _ = two_sessions
    first, second = read_study_file(run_dir)["sessions"]
    assert (first["wall_s"], first["exit_code"], first["finished"], first["interrupted"]) == (3600.0, 130, 4, 4)
    assert (second["wall_s"], second["exit_code"], second["finished"], second["errored"]) == (5400.0, 0, 8, 0)
    assert first["started_utc"] < first["ended_utc"] <= second["started_utc"] < second["ended_utc"]


def test_run_report_sets_the_commands_eta_against_the_wall_summed_over_sessions(two_sessions):
    run_dir, whole, _ = two_sessions
    lines = run_report().sessions(RunStore(run_dir))
    table = [line for line in lines if line.startswith("| 1 ") or line.startswith("| 2 (--resume)")]
    assert len(table) == 2 and "| 1:00:00 | 130 | 4 / 0 / 4 |" in table[0] and "| 1:30:00 | 0 | 8 / 0 / 0 |" in table[1]
    eta = round(whole.eta_s, 1)
    share = f"{100 * (eta - 9000) / 9000:+.0f} %"
    assert lines[-1] == (
        f"- the run's plan (its first session's, for the whole command): ETA {run_report().clock(eta)}; "
        f"wall time over 2 session(s) 2:30:00 (ETA − wall: {share} of the wall)"
    )


def test_run_report_says_so_when_a_session_recorded_no_end(two_sessions):
    run_dir, _, _ = two_sessions
    record = read_study_file(run_dir)
    for key in ("ended_utc", "wall_s", "exit_code", "finished", "errored", "interrupted"):
        del record["sessions"][1][key]  # a session killed outright (SIGKILL, the machine lost) writes no end
    (run_dir / STUDY_FILE).write_text(json.dumps(record))
    lines = run_report().sessions(RunStore(run_dir))
    assert any(line.startswith("| 2 (--resume) ") and "| not recorded | — |" in line for line in lines)
    assert lines[-1].endswith("wall time over 1 session(s) 1:00:00 (ETA − wall: "
                              f"{100 * (record['plan']['eta_s'] - 3600) / 3600:+.0f} % of the wall) "
                              "(1 session(s) recorded no end)")  # fmt: skip


def test_run_report_reads_an_older_record_whose_plan_is_the_latest_sessions(two_sessions):
    run_dir, _, rest = two_sessions
    record = read_study_file(run_dir)
    record["plan"] = record["sessions"][1]["plan"]  # an older record: a resume overwrote it, sessions kept no plan
    for session in record["sessions"]:
        for key in ("plan", "git_sha", "ended_utc", "wall_s", "exit_code", "finished", "errored", "interrupted"):
            session.pop(key)
    (run_dir / STUDY_FILE).write_text(json.dumps(record))
    lines = run_report().sessions(RunStore(run_dir))
    eta = run_report().clock(round(rest.eta_s, 1))
    assert lines[-1] == (
        f"- the plan on record is the latest of an older release's sessions (for what was left then): ETA {eta} "
        "(2 session(s) recorded no end)"
    )
    assert sum(line.endswith("| not recorded | — | — | — | — | — |") for line in lines) == 2


def test_a_plan_by_work_alone_has_no_eta_on_record(two_sessions, tmp_path):
    study = load_study("weekend")
    plan = make_plan(compile_design(study).cells, study.budget, 2, CostModel.by_work("no figures"))
    run_dir = tmp_path / "by-work"
    with held_store(run_dir, fresh=True) as store:
        started = session_log.record_start(study, store, plan, RunOptions(study="weekend"), "disabled")
        session_log.record_end(store, started, 60.0, 0, (8, 0, 0))
    assert read_study_file(run_dir)["plan"]["eta_s"] is None
    assert run_report().sessions(RunStore(run_dir))[-1] == (
        "- the run's plan (its first session's) had no ETA: this machine had no figures for its settings; "
        "wall time over 1 session(s) 0:01:00"
    )
    trial = run_dir / "weekend_pop16_1d_seed42_00000_0"
    trial.mkdir()
    line = {metrics.KIND: "generation", metrics.GENERATION: 0, metrics.SEC_PER_GEN: 2.0, metrics.RSS_MB: 600, metrics.THREADS_OS: 26}
    (trial / GENERATIONS_FILE).write_text(json.dumps(line) + "\n")
    (row,) = run_report().trial_figures(RunStore(run_dir))
    assert row["trial"] == "weekend_pop16_1d_seed42" and row["planned_s"] is None, "units of work are no seconds"


def test_per_trial_figures_pace_census_and_rss_after_warm_up(two_sessions):
    """100 generations: pace 2 s then 3 s, RSS climbing over the first tenth then flat but for a last-tenth step."""
    run_dir, _, _ = two_sessions
    trial = run_dir / "weekend_pop16_1d_seed42_00000_0"
    trial.mkdir()
    lines = []
    for g in range(100):
        rss = 500 + 20 * min(g, 10) + (35 if g >= 90 else 0)  # warm-up to 700, then a +5 % step at the end
        line = {metrics.KIND: "generation", metrics.GENERATION: g, metrics.SEC_PER_GEN: 2.0 if g < 50 else 3.0, metrics.RSS_MB: rss}
        lines.append(json.dumps({**line, metrics.THREADS_OS: 26 if g else 27, metrics.SHARDS: 2}))
    (trial / GENERATIONS_FILE).write_text("\n".join(lines) + "\n")
    (row,) = run_report().trial_figures(RunStore(run_dir))
    assert row["trial"] == "weekend_pop16_1d_seed42" and row["generations"] == 100 and not row["complete"]
    assert row["planned_s"] == next(t["seconds"] for t in read_study_file(run_dir)["plan"]["trials"]
                                    if t["trial"] == "weekend_pop16_1d_seed42")  # fmt: skip
    assert (row["generations_s"], row["s_per_gen_first_10pct"], row["s_per_gen_last_10pct"]) == (250.0, 2.0, 3.0)
    assert (row["rss_mb_first"], row["rss_mb_last"], row["threads_first"], row["threads_last"]) == (500, 735, 27, 26)
    assert (row["rss_mb_warm_10_20pct"], row["rss_mb_last_10pct"], row["shards"]) == (700, 735, 2)
    assert "| 700 → 735 (+5.0 %) |" in run_report().markdown([row])


def test_a_shipped_record_names_the_calibration_store_under_home_as_tilde(two_sessions, tmp_path):
    """Older releases wrote the store's absolute path into a plan's source; what ships names no one's home."""
    run_dir, _, _ = two_sessions
    record = json.loads((run_dir / STUDY_FILE).read_text())
    home_store = f"{Path.home()}/.cache/bilevel_tune/calibration.json"
    record["plan"]["source"] = f"inner loop: cached probe of 2026-12-02 02:32 ({home_store})"
    (run_dir / STUDY_FILE).write_text(json.dumps(record))
    run_record.ship(RunStore(run_dir), None, tmp_path / "shipped", run_record.trial_figures(RunStore(run_dir)), "notes")
    shipped = (tmp_path / "shipped" / STUDY_FILE).read_text()
    assert "(~/.cache/bilevel_tune/calibration.json)" in shipped and str(Path.home()) + "/" not in shipped
    assert json.loads(shipped)["sessions"] == record["sessions"]  # the rest of the record as it was


def test_notes_taken_from_a_shipped_run_md_ship_its_title_once(two_sessions, tmp_path):
    """A re-ship's notes are the shipped run.md's head, title and all: the run's name heads run.md once."""
    run_dir, _, _ = two_sessions
    title = f"# {run_dir.resolve().name}"
    rows = run_record.trial_figures(RunStore(run_dir))
    run_record.ship(RunStore(run_dir), None, tmp_path / "shipped", rows, f"{title}\n\n{title}\n\nWhy it ran.\n\n# elsewhere")
    text = (tmp_path / "shipped" / run_record.RUN_MD).read_text()
    assert text.startswith(f"{title}\n\nWhy it ran.\n\n# elsewhere\n") and text.count(title + "\n") == 1


def test_a_shipped_run_md_quotes_its_summarys_sections_as_they_now_are(tmp_path):
    """run.md quotes the Answers and the Robustness section between markers; a rebuild replaces each quoted block
    where it stands, puts a held-out step's section before the provenance where run.md had none, and changes
    nothing the second time."""
    import shutil

    from bilevel_tune.report.pipeline import summarise

    folder = tmp_path / "fishery-analytic"
    shutil.copytree(Path(__file__).parents[1] / "docs" / "results" / "fishery-analytic", folder)
    run_md = folder / run_record.RUN_MD
    text = run_md.read_text()
    held_out = text.index(run_record.HELD_OUT_HEADING)
    without = text[:held_out] + text[text.index("\n## ", held_out) + 1 :]  # as shipped before its held-out step
    run_md.write_text(without.replace("<!-- quoted: answers -->\n", "<!-- quoted: answers -->\nan old answer\n", 1))
    store = RunStore(folder)
    summary = summarise(store)
    assert run_record.requote(store, summary) and not run_record.requote(store, summary)
    again = run_md.read_text()
    assert "an old answer" not in again and again.count(run_record.HELD_OUT_HEADING) == 1
    assert again.index(run_record.HELD_OUT_HEADING) < again.index("## Provenance and sessions")
    section = text[held_out : text.index("\n## ", held_out) + 1]
    assert section in again and again.replace(section, "") == without  # the block the ship wrote, the rest as it was
    assert "| 1 | analytic (its own), appo, ppo, frozen | 144 |" in again.split(run_record.HELD_OUT_HEADING)[1]


def test_a_stage_decided_again_keeps_its_own_elapsed_time_and_says_when_each_look_was(tmp_path):
    """A plan extended after stage 3 re-records stage 3's look days later: the table's decided and elapsed are the
    stage's first look; the latest outcomes and the earlier ones each say when they were given."""
    decision = {"comparison": "2-D vs 1-D", "stage": 3, "seeds": 6}
    first = {
        "decided_utc": "2026-12-03T18:31:12+00:00",
        "test": "adastop",
        "decisions": [{**decision, "outcome": "undecided"}],
    }
    stage = {
        "stage": 3, "seeds": [1671, 6578], "trials": ["a", "b"], "started_utc": "2026-12-03T14:24:40+00:00",
        "decided_utc": "2026-12-05T15:51:38+00:00", "test": "paired", "max_seeds": 12,
        "decisions": [{**decision, "outcome": "open"}], "superseded": [first],
    }  # fmt: skip
    (tmp_path / STUDY_FILE).write_text(
        json.dumps({"study": {"decide": {"max_seeds": 12, "seeds_per_stage": 2}}, "stages": [stage]})
    )
    row = run_record.stages(RunStore(tmp_path))[2]
    assert row == (
        "| 3 | 1671, 6578 | 2 | 2026-12-03T14:24:40 | 2026-12-03T18:31:12 | 4:06:32 | 1 open (paired t, 12-seed plan) "
        "at 2026-12-05T15:51:38; before: 1 undecided (AdaStop) at 2026-12-03T18:31:12 |"
    )


def test_a_held_out_session_ended_without_a_word_shows_what_it_logged(tmp_path):
    """A step's session logs its count as each job ends (`reevaluation.logged_session`): killed outright, its row
    says how far it got; one logged before that counted only as it ended, and its row says it was not recorded."""
    import shutil
    from types import SimpleNamespace

    from bilevel_tune.cli import reevaluation
    from bilevel_tune.study_data.run_folder import REEVALUATIONS, write_json

    run_dir = tmp_path / "fishery-analytic"
    shutil.copytree(Path(__file__).parents[1] / "docs" / "results" / "fishery-analytic", run_dir)
    base = {"learners": ["analytic (its own)", "ppo"], "jobs": 5, "scored": 0, "failed": 0}
    with held_store(run_dir) as store:
        store.log_step_session({**base, "started_utc": "2026-12-06T10:00:00+00:00"})  # as a step of old
        with pytest.raises(KeyboardInterrupt), reevaluation.logged_session(
            store, {**base, "started_utc": "2026-12-06T11:00:00+00:00"}
        ) as job_done:
            job_done(SimpleNamespace(error=None, cpu_s=1.0))
            job_done(SimpleNamespace(error="a crash", cpu_s=float("nan")))
            raise KeyboardInterrupt
    data = read_study_file(run_dir)
    data[REEVALUATIONS][-1].pop("ended_utc")  # as a session killed outright leaves it
    data[REEVALUATIONS][-1].pop("wall_s")
    write_json(run_dir / STUDY_FILE, data)
    rows = run_record.held_out_sessions(RunStore(run_dir))[-2:]
    assert "| 5 | not recorded | 2026-12-06T10:00:00 | not recorded | — |" in rows[0]
    assert "| 5 | 2 / 1 | 2026-12-06T11:00:00 | not recorded | — |" in rows[1]
