"""Planning from a pilot: a design's power on the paired t's own boundaries, its cost in farm trainings, the pilot a
folder can or cannot be — and the weekend's own pilot planned from the command line."""

from fractions import Fraction

import pytest

from bilevel_tune.cli.pilot_plan import PilotError, read_pilot
from bilevel_tune.planning import pilot_designs
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design

from .study_helpers import REPO

RESULTS = REPO / "docs" / "results"


def _row(effect: float, run_sd: float, eval_sd: float, decided: str = "B better") -> pilot_designs.PilotRow:
    c = pilot_designs.Components(effect, run_sd**2, eval_sd**2, 12)
    return pilot_designs.PilotRow("r", decided, 0.01, 0.005, {("best-so-far", Fraction(1)): c})


CELLS = [pilot_designs.Cell(1000, 3600.0, 3.0), pilot_designs.Cell(4800, 2400.0, 3.0)]


def test_a_large_effect_is_decided_early_and_no_effect_at_about_the_rows_level():
    sure = pilot_designs.evaluate([_row(0.05, 0.002, 0.004)], CELLS, "best-so-far", Fraction(1), 3, 2, 12, None)
    assert sure.power == (1.0,) and sure.expected_seeds <= 6 and sure.decides  # O'Brien–Fleming: no early look is cheap
    none = pilot_designs.evaluate([_row(0.0, 0.01, 0.01)], CELLS, "best-so-far", Fraction(1), 3, 2, 12, None)
    assert none.power[0] <= 0.02 and not none.decides and none.expected_seeds > 11.9  # its level: ~1 % of paths cross


def test_more_final_seeds_buy_power_where_the_re_evaluation_is_the_noise():
    row = _row(0.006, 0.001, 0.012)
    few, many = (pilot_designs.evaluate([row], CELLS, "best-so-far", Fraction(1), k, 2, 8, None).power[0] for k in (3, 16))
    assert many > few + 0.3


def test_an_equivalence_row_is_planned_by_its_repeated_intervals_inside_the_margin():
    row = _row(0.0, 0.002, 0.004, decided="equivalent")
    inside = pilot_designs.evaluate([row], CELLS, "best-so-far", Fraction(1), 3, 2, 12, 0.01)
    assert inside.decides
    assert pilot_designs.evaluate([row], CELLS, "best-so-far", Fraction(1), 3, 2, 12, None).power == (0.0,)  # no margin: no claim


def test_a_design_costs_its_cells_evaluations_and_final_retrainings_per_seed():
    assert pilot_designs.trainings(CELLS, 6, Fraction(1), 3) == 6 * (1000 + 4800 + 2 * 2 * 3)
    assert pilot_designs.trainings(CELLS, 6, Fraction(1, 4), 8) == 6 * (250 + 1200 + 2 * 2 * 8)
    assert pilot_designs.core_seconds(CELLS, 2, Fraction(1, 2), 4) == 2 * (1800 + 1200 + 2 * 4 * 3.0)


def test_a_folder_that_is_no_pilot_for_the_study_is_one_line():
    with pytest.raises(PilotError, match="its world is not this study's"):
        read_pilot(load_study("weekend"), RESULTS / "fishery-analytic")
    with pytest.raises(PilotError, match="no final scores seed by seed"):
        read_pilot(load_study("weekend"), RESULTS / "weekend-analytic")
    with pytest.raises(PilotError, match="not a run folder or a shipped result"):
        read_pilot(load_study("weekend"), RESULTS / "nothing-here")


@pytest.mark.long
def test_the_weekend_planned_from_its_shipped_pilot(capsys):
    from bilevel_tune.cli.main import main

    args = ["weekend", "--inner", "analytic", "--dry-run", "--pilot", str(RESULTS / "weekend-appo")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "planned from the pilot:" in out and "139,488 farm trainings" in out
    assert "cheapest: score " in out and "as study-file lines:" in out and "final_eval_seeds = " in out
    assert main(["weekend", "--pilot", str(RESULTS / "weekend-appo")]) == 2
    assert "--pilot plans a run: give it with --dry-run" in capsys.readouterr().err


def test_a_study_with_rows_at_equal_evaluations_is_planned_in_its_own_family():
    """weekend-confirm adds the population main effect at equal evaluations to the pilot's family: four primary rows
    (α / 4, halved between each row's two claims), the new row read at b × population 1's evaluations and planned
    for the answer its pilot effect points to, and population 16's re-scoring at the smaller budget paid for."""
    from bilevel_tune.cli.pilot_plan import pilot_cells, planned_rows

    study = load_study("weekend-confirm")
    pilot = read_pilot(study, RESULTS / "weekend-appo")
    rows = {r.key: r for r in planned_rows(compile_design(study), pilot)}
    assert len(rows) == 7  # the pilot's 6 decided rows, and the one at equal evaluations
    equal = rows["population 16 vs population 1, over mechanisms, at equal evaluations"]
    quarter = equal.at[("best-so-far", Fraction(1, 4))]  # 250 evaluations each: +0.0020, under half the margin
    assert quarter.effect == pytest.approx(0.0020, abs=5e-5)
    assert equal.planned(quarter) == pilot_designs.Planned("equivalent", pytest.approx(2 * 0.05 / 4 / 2))
    whole = equal.at[("best-so-far", Fraction(1))]  # 1,000 each: population 16 ahead
    assert equal.planned(whole).decided == "B better"
    main = rows["population 16 vs population 1, over mechanisms"]
    assert main.planned(main.at[("best-so-far", Fraction(1))]).level == pytest.approx(0.05 / 4 / 2)
    simple = rows["2-D vs 1-D at population 1"]  # gated: half its main effect's share, the first sibling shown
    assert simple.planned(simple.at[("best-so-far", Fraction(1))]).level == pytest.approx(0.05 / 4 / 2 / 2, rel=1e-5)  # ε-edges
    assert sorted(c.rescorings for c in pilot_cells(pilot, compile_design(study))) == [0, 0, 1, 1]
