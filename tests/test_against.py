"""Against its pilot: a run's answers beside its pilot's, row by row, in the words a paper uses — on the shipped
pilot itself (every decided row confirms) and on pilots whose decisions were changed to each other case."""

import copy
import json
import shutil

import pandas as pd
import pytest

from bilevel_tune.cli import quotes
from bilevel_tune.report import against
from bilevel_tune.report.pipeline import summarise
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.run_folder import PILOT_FILE
from bilevel_tune.study_data.run_store import RunStore, open_store
from bilevel_tune.summary import main

from .study_helpers import REPO

PILOT = REPO / "docs" / "results" / "weekend-appo"


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "weekend-appo"
    shutil.copytree(PILOT, folder)
    return folder


def _against(folder, pilot: dict) -> against.Against:
    (folder / PILOT_FILE).write_text(json.dumps(pilot))
    return summarise(open_store(folder)).against


def test_a_run_against_itself_confirms_every_decided_row_and_says_so_in_its_summary(run):
    assert main([str(run), "--no-plots", "--against", str(PILOT)]) == 0
    verdicts = json.loads((run / "verdicts.json").read_text())["against"]
    assert verdicts["pilot"] == "weekend-appo" and verdicts["pilot_confirmatory"] is False
    by_row = {r["comparison"]: r["against the pilot"] for r in verdicts["rows"]}
    assert by_row.pop("population 16 vs population 1 at 2-D") == against.NEITHER  # undecided in both
    assert set(by_row.values()) == {against.CONFIRMS} and len(by_row) == 6
    summary = (run / "summary.md").read_text()
    assert "## Against its pilot (weekend-appo, exploratory)" in summary
    assert "- Of the pilot's 6 decided row(s) asked here: 6 confirms. Of its 1 undecided: 1 undecided in both." in summary
    assert "| population 16 vs population 1 × 2-D vs 1-D | equivalent within ±0.01" in summary.replace("  ", "")
    before = summary
    assert main([str(run), "--no-plots"]) == 0  # pilot.json kept: the same section without --against
    assert (run / "summary.md").read_text() == before


def test_each_case_is_named_by_comparison_not_by_order(run):
    pilot = against.pilot_record(PILOT)
    changed = copy.deepcopy(pilot)
    rows = {c["comparison"]: c for c in changed["comparisons"]}
    rows["population 16 vs population 1, over mechanisms"]["decision"] = "A better"  # the other side
    rows["2-D vs 1-D, over populations"].update(decision="equivalent", within_margin=True)  # equivalence
    rows["population 16 vs population 1 × 2-D vs 1-D"]["decision"] = "undecided"  # the run decides it
    rows["population 16 vs population 1 at 2-D"]["decision"] = "B better"  # the run leaves it undecided
    del rows["2-D vs 1-D at population 16"]  # a row the pilot did not ask
    changed["comparisons"] = [*reversed(list(rows.values())), {**pilot["comparisons"][0], "comparison": "an old row"}]
    table = _against(run, changed).table().set_index("comparison")["against the pilot"]
    assert table.to_dict() == {
        "population 16 vs population 1, over mechanisms": against.REVERSES,
        "2-D vs 1-D, over populations": against.DIFFERS,
        "population 16 vs population 1 × 2-D vs 1-D": against.DECIDES,
        "2-D vs 1-D at population 1": against.CONFIRMS,
        "population 16 vs population 1 at 1-D": against.CONFIRMS,
        "population 16 vs population 1 at 2-D": against.LEAVES_UNDECIDED,
        "2-D vs 1-D at population 16": against.NEW,
        "an old row": against.NOT_ASKED,
    }
    (line,) = _against(run, changed).findings()
    assert line == (
        "Of the pilot's 5 decided row(s) asked here: 2 confirms, 1 reverses, 1 differs, 1 leaves undecided. "
        "Of its 1 undecided: 1 decides what the pilot left undecided. 1 row(s) new, not in the pilot."
    )


def test_an_open_row_is_not_decided_yet_whatever_the_pilot_said():
    """A row still open here (a later stage may decide it) is 'not decided yet', be the pilot's decided or not."""
    here = against.Side("open", False, "population 1", "population 16", False)
    for pilot in ("B better", "A better", "equivalent", "undecided"):
        row = against.Row("population 16 vs population 1", against.Side(pilot, False, "population 1", "population 16", False), here)
        assert row.verdict == against.NOT_YET, pilot


def test_a_pilot_without_answers_is_one_line_and_nothing_is_written(run, tmp_path, capsys):
    before = (run / "summary.md").read_text()
    (tmp_path / "nothing").mkdir()
    assert main([str(run), "--no-plots", "--against", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--against" in err and "no answers to compare with" in err
    assert not (run / PILOT_FILE).exists() and (run / "summary.md").read_text() == before


def test_a_reship_keeps_the_pilot_its_shipped_copy_is_compared_with(tmp_path):
    shipped, run = tmp_path / "shipped", tmp_path / "run"
    shipped.mkdir(), run.mkdir()
    (shipped / PILOT_FILE).write_text(json.dumps(against.pilot_record(PILOT)))
    with run_lock.held(run, fresh=False) as lock:
        RunStore(run, lock).adopt(RunStore(shipped))
        assert (run / PILOT_FILE).read_text() == (shipped / PILOT_FILE).read_text()
        (run / PILOT_FILE).write_text("{}")
        RunStore(run, lock).adopt(RunStore(shipped))
    assert (run / PILOT_FILE).read_text() == "{}"  # its own is kept


def test_the_readme_quotes_the_confirmatory_runs_comparison_with_its_pilot():
    (found,) = [source for folder, _, source in quotes.quoted(REPO / "README.md")
                if folder == "docs/results/weekend-confirm" and source.startswith("- Of the pilot's")]  # fmt: skip
    assert pd.notna(found) and "decided row(s) asked here" in found


def test_run_md_quotes_the_section_whole_and_a_run_without_a_pilot_has_none(run):
    from bilevel_tune.cli.run_record import quoted_blocks

    assert main([str(run), "--no-plots", "--against", str(PILOT)]) == 0
    store = open_store(run)
    block = quoted_blocks(store, summarise(store))["against"]
    assert block.startswith("## Against its pilot (weekend-appo, exploratory)\n\nEach row of the Answers")
    assert "| comparison" in block and "- Of the pilot's 6 decided row(s) asked here: 6 confirms." in block
    pilot = open_store(PILOT)
    assert "against" not in quoted_blocks(pilot, summarise(pilot))


def test_the_effects_figure_shows_each_row_beside_its_pilots_where_the_pilot_kept_its_effects(run):
    """plots.effects: every row's B − A with its interval; against itself, the pilot's marks lie on the run's own
    effects, row by row; a pilot.json from before the pilot's effects were kept draws the run's alone."""
    import matplotlib.pyplot as plt

    from bilevel_tune.report.plots import plot_effects

    pilot = against.pilot_record(PILOT)
    (run / PILOT_FILE).write_text(json.dumps(pilot))
    s = summarise(open_store(run))
    fig = plot_effects(s)
    (ax,) = fig.axes
    ours = [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() == "o"]
    theirs = [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() == "D"]
    plt.close(fig)
    effects = [r.effect.mean for r in s.answers.rows]
    assert [x for x, _ in ours] == effects and [y for _, y in ours] == [-i for i in range(len(effects))]
    assert [x for x, _ in theirs] == pytest.approx(effects) and len(theirs) == 7
    assert [y for _, y in theirs] == pytest.approx([-i - 0.3 for i in range(7)])
    old = {**pilot, "comparisons": [{k: v for k, v in c.items() if k not in ("effect", "interval")}
                                    for c in pilot["comparisons"]]}  # fmt: skip
    (run / PILOT_FILE).write_text(json.dumps(old))
    fig = plot_effects(summarise(open_store(run)))
    assert not [line for line in fig.axes[0].lines if line.get_marker() == "D"]
    plt.close(fig)
