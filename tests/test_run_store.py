"""The run store: a run folder's one reader and one writer — every table keyed by cell, every event of study.json's
log appended whole under the run lock, and no other module writing the folder's primary files. The folders here
are written by the runner's own writers (session_log, staging), their trials' records line by line as a trial
writes them."""

import ast
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from bilevel_tune.cli import session_log, staging
from bilevel_tune.cli.options import RunOptions
from bilevel_tune.core import metrics
from bilevel_tune.planning.plan import make_plan
from bilevel_tune.study_data import final_scores, run_lock
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import GENERATIONS_FILE, HELDOUT_CSV, trial_name
from bilevel_tune.study_data.run_store import RunStore, StoreError, open_store

from .study_helpers import REPO, write_trial_records
from .test_plan import MODEL

PACKAGE = REPO / "bilevel_tune"


@pytest.fixture
def study():
    return load_study("weekend").with_overrides(populations=(1,))


@pytest.fixture
def run_dir(tmp_path, study):
    """Population 1 of the weekend, stage 1: three trials finished (one of them first begun in an earlier session's
    folder, whose name sorts after the later one's), the fourth under way."""
    run_dir = tmp_path / "run"
    cells = compile_design(study).stage_cells(1)
    with run_lock.held(run_dir, fresh=True) as lock:
        plan = make_plan(cells, study.budget, 2, MODEL)
        session_log.record_start(study, RunStore(run_dir, lock), plan, RunOptions(study="weekend"), "disabled")
    for i, cell in enumerate(cells[:3]):
        by_seed = {"seeds": [11, 12], "best": [0.4 + i / 100, 0.5 + i / 100], "mean": [0.3, None]}
        scored = {"8": {metrics.FINAL_BEST: 0.2 + i / 100, metrics.FINAL_MEAN: 0.1, "evaluations": 8}}
        write_trial_records(run_dir, study, cell, 3, 1.0, final=0.45 + i / 100, **{
            metrics.FINAL_MEAN: 0.3, metrics.FINAL_BY_SEED: by_seed, metrics.FINAL_AT_EVALUATIONS: scored})  # fmt: skip
    earlier = write_trial_records(run_dir, study, cells[3], 2, 1.0, folder_id="zzzzz")  # an earlier session's
    write_trial_records(run_dir, study, cells[3], 1, 1.0, folder_id="aaaaa")  # this session's: begun again, under way
    os.utime(earlier / GENERATIONS_FILE, ns=(10**18, 10**18))  # written long before (its name sorts after)
    return run_dir


def test_trials_are_keyed_by_cell_and_a_cell_in_two_folders_is_one_trial(run_dir, study):
    store = open_store(run_dir)
    cells = compile_design(study).stage_cells(1)
    assert set(store.trials) == {c.key for c in cells}
    assert len(store.folders) == 5
    assert store.finished_cells() == {c.key for c in cells[:3]}
    for cell in cells:
        assert store.trials[cell.key].trial == trial_name(study, cell)
    assert store.trials[cells[3].key].name.split("_")[-2] == "aaaaa", "the folder written last: the one under way"
    write_trial_records(run_dir, study, cells[0], 3, 1.0, folder_id="00000")  # begun again after it had finished
    assert open_store(run_dir).trials[cells[0].key].final is not None, "the folder that finished the cell"
    assert store.study.name == "weekend" and store.design.populations == (1,)


def test_a_looks_scores_are_keyed_by_cell_and_by_the_smaller_budget_they_were_scored_at(run_dir, study):
    store = open_store(run_dir)
    cells = compile_design(study).stage_cells(1)
    best = store.look_scores()
    assert {k: best[k] for k in (c.key for c in cells[:3])} == {c.key: 0.45 + i / 100 for i, c in enumerate(cells[:3])}
    mean = store.look_scores(final_scores.MEAN_RULES)
    assert mean[cells[1].key] == 0.3
    assert cells[3].key not in best  # under way: no look reads it
    equal = load_study("weekend").with_overrides(settings=(("decide.equal_budget", ["population"]),))
    assert compile_design(equal).equal_evaluations(16), "the weekend's population 16 is also read at population 1's"


def test_the_finals_table_joins_every_source_by_trial_and_keeps_the_first(run_dir, study):
    cell = compile_design(study).stage_cells(1)[0]
    name = trial_name(study, cell)
    with run_lock.held(run_dir, fresh=False) as lock:
        RunStore(run_dir, lock).append_finals([
            (name, final_scores.BEST_RULES, 11, 9.0),  # a seed the records hold: the record's value is kept
            (name, final_scores.BEST_RULES, 13, 0.7),  # a re-scoring's new seed
        ])  # fmt: skip
    store = open_store(run_dir)
    finals = store.finals
    mine = finals[(finals["trial"] == name) & (finals["rules"] == final_scores.BEST_RULES)]
    assert dict(zip(mine["final_seed"], mine["value"])) == {11: 0.4, 12: 0.5, 13: 0.7}
    means = finals[(finals["trial"] == name) & (finals["rules"] == final_scores.MEAN_RULES)]
    assert list(means["final_seed"]) == [11]  # a retraining that failed (null) has no row
    scores = store.scores  # the long table: finals are its view
    own = scores[(scores["trial"] == name) & (scores["learner"] == final_scores.own_label(study.inner))]
    assert len(own) == len(finals[finals["trial"] == name]) and set(own["evaluations"]) == {cell.generations}


def test_staging_decides_from_the_stores_look_scores(run_dir, study, monkeypatch):
    seen = {}

    def decide(design, finals, names):
        seen.update(finals)
        return "decided"

    monkeypatch.setattr(staging.decide, "decide", decide)
    store = open_store(run_dir)
    assert staging.decide_run(study, store) == "decided"
    assert seen == store.look_scores()


def test_a_store_without_the_runs_lock_writes_nothing(run_dir):
    before = (run_dir / "study.json").read_bytes()
    store = open_store(run_dir)
    for write in (lambda: store.end_session("x", wall_s=1.0), lambda: store.add_learners(["ppo"]),
                  lambda: store.append_heldout([["t"] * 10]), lambda: store.keep_pilot({})):  # fmt: skip
        with pytest.raises(StoreError, match="does not hold the run's lock: it writes nothing here"):
            write()
    assert (run_dir / "study.json").read_bytes() == before
    assert not (run_dir / HELDOUT_CSV).exists() and not (run_dir / "pilot.json").exists()
    with run_lock.held(run_dir, fresh=False) as lock:
        held = RunStore(run_dir, lock)
        held.lock.release()  # taken by another session since: its lock file names someone else
        with pytest.raises(StoreError):
            held.add_learners(["ppo"])


def test_each_event_is_appended_to_the_log_whole(run_dir, study):
    """Sessions, looks, a stage begun, learners: each one write of study.json, read back by a fresh store."""
    with run_lock.held(run_dir, fresh=False) as lock:
        store = RunStore(run_dir, lock)
        started = store.record["sessions"][0]["started_utc"]
        session_log.record_end(store, started, 12.0, 0, (3, 0, 1))
        store.log_look([{"stage": 1, "seeds": [42, 7], "trials": [], "started_utc": started}],
                       {"decided_utc": "t1", "decisions": [{"outcome": "open"}]})  # fmt: skip
        store.log_look([], {"decided_utc": "t2", "decisions": [{"outcome": "B better"}]})  # decided again: kept
        store.add_learners(["ppo", "frozen"])
        store.add_learners(["ppo"])
    record = open_store(run_dir).record
    assert record["sessions"][0]["wall_s"] == 12.0 and record["sessions"][0]["interrupted"] == 1
    (stage,) = record["stages"]
    assert stage["decided_utc"] == "t2" and stage["superseded"] == [{"decided_utc": "t1", "decisions": [{"outcome": "open"}]}]
    assert record["study"]["final"]["learners"] == ["ppo", "frozen"]


def test_adopting_a_shipped_copys_held_out_rows_is_a_store_operation_under_the_lock(tmp_path):
    """A re-ship keeps its shipped copy's held-out rows of every trial whose final rules are still the ones scored,
    that step's sessions and its learners; the rows of a trial whose rules changed since are dropped."""
    run_dir, shipped = tmp_path / "run", tmp_path / "shipped"
    shutil.copytree(REPO / "docs" / "results" / "fishery-analytic", shipped)
    shutil.copytree(shipped, run_dir)
    (run_dir / HELDOUT_CSV).unlink()
    record = json.loads((run_dir / "study.json").read_text())
    record.pop("reevaluations")
    record["study"]["final"]["learners"] = []
    (run_dir / "study.json").write_text(json.dumps(record))
    theirs = pd.read_csv(shipped / HELDOUT_CSV, dtype=str, keep_default_na=False)
    changed = theirs["trial"] == theirs["trial"].iloc[0]
    theirs.loc[changed, "final_rules"] = "quota_max=0.99"  # that trial's final rules are not the run's any more
    theirs.to_csv(shipped / HELDOUT_CSV, index=False)
    with pytest.raises(StoreError, match="does not hold the run's lock"):
        open_store(run_dir).adopt(RunStore(shipped))
    with run_lock.held(run_dir, fresh=False) as lock:
        assert RunStore(run_dir, lock).adopt(RunStore(shipped)) == int((~changed).sum())
    after = open_store(run_dir)
    assert set(after.heldout["trial"]) == set(theirs["trial"][~changed])
    assert after.record["reevaluations"] == json.loads((shipped / "study.json").read_text())["reevaluations"]
    assert after.study.final.learners == open_store(shipped).study.final.learners


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda d: None, "not a folder"),
        (lambda d: d.mkdir(), "not a study run folder (no study.json)"),
        (lambda d: (d.mkdir(), (d / "study.json").write_text("{not json")), "its study.json does not read as a run's"),
        (lambda d: (d.mkdir(), (d / "study.json").write_text(json.dumps({"plan": {}}))), "its study.json is not a bilevel_tune study file"),
    ],
    ids=["missing", "empty", "garbled", "no-study"],
)
def test_a_folder_that_is_not_a_runs_is_one_line_naming_it(tmp_path, make, said):
    folder = tmp_path / "x"
    make(folder)
    with pytest.raises(StoreError) as caught:
        _ = open_store(folder).study
    assert str(caught.value).startswith(f"{folder}: {said}") and "\n" not in str(caught.value)


def test_status_reads_nothing_but_study_json_and_the_records(run_dir):
    """Lazily: --status never reads a score table (a held-out step may be appending to one)."""
    (run_dir / final_scores.FINALS_CSV).write_text("not,a,table\n\x00")
    store = open_store(run_dir)
    assert store.looks_taken == 0 and len(store.trials) == 4
    with pytest.raises(KeyError):  # read only when asked for
        _ = store.finals


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text())


def _names_used(path: Path) -> set[str]:
    tree = _tree(path)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return names | {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}


READERS = [*sorted((PACKAGE / "report").glob("*.py")), *sorted((PACKAGE / "verdicts").glob("*.py")), PACKAGE / "cli" / "status.py"]
PRIMARY = {"STUDY_FILE", "HELDOUT_CSV", "FINALS_CSV", "ANYTIME_CSV", "TRIALS_CSV", "GENERATIONS_CSV", "SCAN_CSV"}
WRITERS = {"write_json", "write_text", "to_csv", "append_rows", "append_record", "open", "replace", "copy2"}


@pytest.mark.parametrize("module", READERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_reader_of_a_run_folder_reads_the_records_or_rebuilds_a_study_itself(module):
    """The report, the verdicts and --status go through the run's store: none reads trial records itself or
    rebuilds a Study from a record, and none takes a Study (they take the design)."""
    used = _names_used(module)
    assert not used & {"trial_records", "read_records", "from_dict", "from_record", "read_study_file", "Study"}, module
    if module.parent.name == "verdicts":  # verdicts/ takes scores keyed by cell, never a path
        assert not used & {"Path", "open_store", "RunStore"}, module


def _writes_primary(path: Path) -> list[int]:
    """Lines of a module that call a writer with one of the primary files' names in the call."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            named = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}  # fmt: skip
            if func in WRITERS and named & PRIMARY:
                found.append(node.lineno)
    return found


def test_study_json_and_the_score_tables_are_written_by_the_store_alone():
    writers = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py")) if (lines := _writes_primary(p))}
    assert set(writers) == {"study_data/run_store.py"}, writers


def test_a_command_opens_a_run_folders_store_once(tmp_path, monkeypatch, capsys):
    """bilevel-summary and --status: one store a command, passed on (each part of the folder read once in it)."""
    import shutil

    from bilevel_tune.cli.status import show_status
    from bilevel_tune.study_data import run_store
    from bilevel_tune.summary import main

    copy = tmp_path / "weekend-appo"
    shutil.copytree(REPO / "docs" / "results" / "weekend-appo", copy)
    opened = []
    init = run_store.RunStore.__init__
    monkeypatch.setattr(run_store.RunStore, "__init__", lambda self, run_dir, lock=None: (
        opened.append(Path(run_dir).resolve()), init(self, run_dir, lock))[1])  # fmt: skip
    assert main([str(copy), "--no-plots"]) == 0
    assert opened == [copy.resolve()]
    opened.clear()
    show_status(copy, out=lambda line: None)
    assert opened == [copy.resolve()]
