"""Every shipped result reopens: its summary.md, tables and answers rebuilt from the folder alone are the shipped
ones, byte for byte; its run.md quotes its Answers as the summary has them."""

import json
import re
import shutil
import subprocess

import pandas as pd
import pytest

import bilevel_tune
from bilevel_tune.cli import run_record
from bilevel_tune.report.pipeline import summarise
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.run_store import open_store
from bilevel_tune.summary import main

from .study_helpers import REPO

SHIPPED = sorted(p.parent for p in (REPO / "docs" / "results").glob("*/generations.csv.gz"))
REBUILT = ("summary.md", "answers.csv", "trials.csv", "cells.csv", "grid.csv", "verdicts.json")
WHICH_TOOL = (re.compile(rb"^Written at tool commit .*$", re.M), re.compile(rb'^  "tool_commit": .*$', re.M))


def _tool_line(shipped, copy) -> tuple[str, str]:
    """The line naming the tool's commit, as the shipped summary has it and as the rebuild wrote it."""
    old, new = ((p / "summary.md").read_text().splitlines()[2] for p in (shipped, copy))
    return old, new


def rebuilt(path) -> bytes:
    """A summary's file as a rebuild compares it: less the one line (summary.md) and field (verdicts.json) naming the
    tool's commit that wrote it."""
    data = path.read_bytes()
    for which in WHICH_TOOL:
        data = which.sub(b"", data)
    return data


PRIMARY = ("study.json", "trials.csv", "generations.csv.gz", "scan.csv", "finals.csv", "anytime.csv", "heldout.csv")


PLANNED = ("run.md", "recipe.sh")  # a run planned and not yet looked at: its notes (plan, commit) and how it runs


def test_every_folder_under_docs_results_is_a_shipped_result_that_reopens_or_a_plan_before_its_first_look():
    folders = {p for p in (REPO / "docs" / "results").iterdir() if p.is_dir()}
    planned = {p for p in folders if p not in SHIPPED and {f.name for f in p.iterdir()} <= set(PLANNED)}
    assert {p.name for p in SHIPPED} == {p.name for p in folders - planned}
    assert all((p / "run.md").is_file() for p in planned)
    assert {"weekend-appo", "ceiling-appo", "weekend-analytic"} <= {p.name for p in SHIPPED}


@pytest.mark.parametrize("shipped", SHIPPED, ids=[p.name for p in SHIPPED])
def test_a_shipped_folder_rebuilds_its_summary_byte_for_byte(shipped, tmp_path, capsys):
    copy = tmp_path / shipped.name
    shutil.copytree(shipped, copy)
    assert main([str(copy), "--no-plots"]) == 0
    held_out = ("robustness.csv",) if (shipped / "heldout.csv").is_file() else ()  # re-evaluated by held-out learners
    for name in (*REBUILT, *held_out):
        assert rebuilt(copy / name) == rebuilt(shipped / name), name
    for name in PRIMARY:  # the run's own data: the summary reads it and writes none of it
        assert (copy / name).is_file() == (shipped / name).is_file(), name
        assert not (copy / name).is_file() or (copy / name).read_bytes() == (shipped / name).read_bytes(), name
    answers = run_record.body(summarise(open_store(copy)), "answers")
    assert answers and answers in (copy / "run.md").read_text(), "run.md's 'What it answers' is the summary's"
    assert (copy / "run.md").read_text() == (shipped / "run.md").read_text().replace(*_tool_line(shipped, copy))
    before = {p: p.stat().st_mtime_ns for p in copy.rglob("*")}
    assert main([str(copy), "--ship", str(tmp_path / "again")]) == 2
    assert "keeps no trial records" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in copy.rglob("*")} == before and not (tmp_path / "again").exists()


@pytest.mark.parametrize("shipped", SHIPPED, ids=[p.name for p in SHIPPED])
def test_the_public_reader_opens_every_shipped_folder_and_writes_nothing(shipped):
    before = {p: p.stat().st_mtime_ns for p in shipped.rglob("*")}
    run = bilevel_tune.open(shipped)
    answers = pd.read_csv(shipped / "answers.csv")
    assert list(run.answers["comparison"]) == list(answers["comparison"]) and len(run.trials) == len(pd.read_csv(shipped / "trials.csv"))
    assert {"trial", "learner", "rules", "evaluations", "final_seed", "value"} <= set(run.scores.columns)
    assert not run.generations.empty and run.section("answers").startswith("## Answers")
    assert {p: p.stat().st_mtime_ns for p in shipped.rglob("*")} == before


def test_a_summary_of_a_folder_another_live_session_holds_refuses_in_one_line_and_writes_nothing(tmp_path, capsys):
    copy = tmp_path / "fishery-analytic"
    shutil.copytree(REPO / "docs" / "results" / "fishery-analytic", copy)
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    lock = run_lock.acquire(copy, out=lambda line: None)  # a live session's (this process stands in for it)
    try:
        for flags in ([], ["--ship", str(tmp_path / "shipped")]):
            assert main([str(copy), "--no-plots", *flags]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "is in use by another session" in err and f"--status {copy}" in err
    finally:
        lock.release()
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "shipped").exists()


def test_a_folder_holding_neither_records_nor_tables_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds neither trial records" in err


def _ran_real_appo(shipped) -> bool:
    return '"inner": "appo"' in (shipped / "study.json").read_text()


@pytest.mark.parametrize("shipped", [p for p in SHIPPED if _ran_real_appo(p)], ids=lambda p: p.name)
def test_a_full_budget_appo_result_keeps_its_recipe_and_records_beside_it(shipped):
    recipe = (shipped / "recipe.sh").read_text()
    assert subprocess.run(["bash", "-n", str(shipped / "recipe.sh")]).returncode == 0
    assert f"--name {shipped.name}" in recipe and "worktree add" in recipe
    assert "ETA" in (shipped / "dryrun.txt").read_text()
    log = shipped / "sessions.log"  # the recipe's console log ships whole — a start line for every session — or not at all
    if log.is_file():
        starts = [line for line in log.read_text().splitlines() if line.split(" ")[-1:] and " start (" in line and "--dry-run" not in line]
        sessions = json.loads((shipped / "study.json").read_text())["sessions"]
        assert " exit " in log.read_text() and len(starts) >= len(sessions), f"{log} is not the whole log"


def test_no_tracked_file_names_one_machines_absolute_path():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    machine_paths = re.compile(r"(?<![\w.~])/(?:root|home/\w+|work)/")
    named = [path for path in tracked.splitlines()
             if (REPO / path).is_file()
             and machine_paths.search((REPO / path).read_bytes().decode("utf-8", "replace"))]
    assert named == []
