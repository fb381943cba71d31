"""The results store: a run folder read through one door, every table keyed by cell — and the readers that go
through it and nowhere else. The folders here are written by the runner's own writers (session_log), their trials'
records line by line as a trial writes them."""

import ast
import json
import os
from pathlib import Path

import pytest

from bilevel_tune.cli import session_log, staging
from bilevel_tune.cli.options import RunOptions
from bilevel_tune.core import metrics
from bilevel_tune.planning.plan import make_plan
from bilevel_tune.study_data import final_scores
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.results_store import ResultsError, open_results
from bilevel_tune.study_data.run_folder import GENERATIONS_FILE, key_at_evaluations, trial_name

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
    session_log.record_start(study, run_dir, make_plan(study.grid.stage_cells(1), study.budget, 2, MODEL), RunOptions(study="weekend"), "disabled")
    cells = study.grid.stage_cells(1)
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
    results = open_results(run_dir)
    cells = study.grid.stage_cells(1)
    assert set(results.trials) == {c.key for c in cells}
    assert len(results.folders) == 5
    assert results.finished_cells() == {c.key for c in cells[:3]}
    for cell in cells:
        assert results.trials[cell.key].trial == trial_name(study, cell)
    assert results.trials[cells[3].key].name.split("_")[-2] == "aaaaa", "the folder written last: the one under way"
    write_trial_records(run_dir, study, cells[0], 3, 1.0, folder_id="00000")  # begun again after it had finished
    assert open_results(run_dir).trials[cells[0].key].final is not None, "the folder that finished the cell"
    assert results.study.name == "weekend" and results.study.populations == (1,)


def test_a_looks_scores_are_keyed_by_cell_and_by_the_smaller_budget_they_were_scored_at(run_dir, study):
    results = open_results(run_dir)
    cells = study.grid.stage_cells(1)
    best = results.final_objectives()
    assert {k: best[k] for k in (c.key for c in cells[:3])} == {c.key: 0.45 + i / 100 for i, c in enumerate(cells[:3])}
    assert best[key_at_evaluations(cells[0].key, 8)] == 0.2
    mean = results.final_objectives(final_scores.MEAN_RULES)
    assert mean[cells[1].key] == 0.3 and mean[key_at_evaluations(cells[1].key, 8)] == 0.1
    assert cells[3].key not in best  # under way: no look reads it


def test_the_finals_table_joins_every_source_by_trial_and_keeps_the_first(run_dir, study):
    cell = study.grid.stage_cells(1)[0]
    name = trial_name(study, cell)
    final_scores.append_rows(run_dir / final_scores.FINALS_CSV, final_scores.FINALS_COLUMNS, [
        (name, final_scores.BEST_RULES, 11, 9.0),  # a seed the records hold: the record's value is kept
        (name, final_scores.BEST_RULES, 13, 0.7),  # a re-scoring's new seed
    ])  # fmt: skip
    finals = open_results(run_dir).finals
    mine = finals[(finals["trial"] == name) & (finals["rules"] == final_scores.BEST_RULES)]
    assert dict(zip(mine["final_seed"], mine["value"])) == {11: 0.4, 12: 0.5, 13: 0.7}
    means = finals[(finals["trial"] == name) & (finals["rules"] == final_scores.MEAN_RULES)]
    assert list(means["final_seed"]) == [11]  # a retraining that failed (null) has no row


def test_staging_decides_from_the_stores_scores(run_dir, study, monkeypatch):
    seen = {}

    def decide(study, finals, names):
        seen.update(finals)
        return "decided"

    monkeypatch.setattr(staging.decide, "decide", decide)
    assert staging.decide_run(study, run_dir) == "decided"
    assert seen == open_results(run_dir).final_objectives()


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
    with pytest.raises(ResultsError) as caught:
        _ = open_results(folder).study
    assert str(caught.value).startswith(f"{folder}: {said}") and "\n" not in str(caught.value)


def test_status_reads_nothing_but_study_json_and_the_records(run_dir):
    """Lazily: --status never reads a score table (a held-out step may be appending to one)."""
    (run_dir / final_scores.FINALS_CSV).write_text("not,a,table\n\x00")
    results = open_results(run_dir)
    assert results.looks_taken == 0 and len(results.trials) == 4
    with pytest.raises(KeyError):  # read only when asked for
        _ = results.finals


def _names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return names | {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}


READERS = [*sorted((PACKAGE / "report").glob("*.py")), *sorted((PACKAGE / "verdicts").glob("*.py")), PACKAGE / "cli" / "status.py"]


@pytest.mark.parametrize("module", READERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_reader_of_a_run_folder_reads_the_records_or_rebuilds_a_study_itself(module):
    """The report, the verdicts and --status go through the results store: none reads trial records itself or
    rebuilds a Study from a record (study.json is read by the store; the run's history writes its own logs)."""
    used = _names_used(module)
    assert not used & {"trial_records", "read_records", "from_dict", "from_record"}, module
    if module.parent.name == "verdicts":  # verdicts/ takes scores keyed by cell, never a path
        assert not used & {"read_study_file", "Path", "open_results"}, module
    if module.name == "status.py":
        assert "read_study_file" not in used and "open_results" in used
