"""Verdicts from data: the weekend campaign's own table (docs/weekend.md), tables built for the opposite verdicts, and edge cases."""

import pandas as pd
import pytest

from bilevel_tune.core import metrics
from bilevel_tune.report.outputs import CEILING, FEW, NO_CEILING, NOISE, ROBUST, verdicts
from bilevel_tune.study_data.run_store import StoreError, open_store
from bilevel_tune.study_data.run_tables import nodes_used
from bilevel_tune.summary import main


def table(rows):
    return pd.DataFrame(rows, columns=["population", "dims", "seed", "best_objective"])


PR_TABLE = table(
    [
        (1, 1, 42, 0.2393),
        (1, 2, 42, 0.2424),
        (1, 1, 7, 0.2329),
        (1, 2, 7, 0.2314),
        (16, 1, 42, 0.2500),
        (16, 2, 42, 0.2500),
    ]
)


def test_the_prs_own_table():
    v = verdicts(PR_TABLE)
    pop, dims, ceiling = v["population_effect"], v["dims_effect"], v["ceiling"]
    assert pop["verdict"] == ROBUST
    assert [round(c["gap"], 4) for c in pop["cells"]] == [0.0139, 0.0131]
    assert pop["spread"] == pytest.approx(0.0127, abs=1e-4)
    assert dims["verdict"] == NOISE and "disagree in sign" in dims["sentence"]
    assert ceiling["verdict"] == CEILING
    assert {(c["population"], c["dims"]) for c in ceiling["cells"]} == {(16, 1), (16, 2)}
    for key in ("verdict", "gap", "spread", "n_seeds", "cells", "sentence"):
        assert all(key in v[k] for k in v)


def test_opposite_verdicts():
    # population within noise (a tiny gap), dimensionality robust, no ceiling
    rows = []
    for seed, noise in ((1, 0.0), (2, 0.01), (3, -0.01)):
        for pop in (1, 16):
            rows += [(pop, 1, seed, 0.20 + noise + (0.001 if pop == 16 else 0)), (pop, 2, seed, 0.30 + noise)]
    v = verdicts(table(rows))
    assert v["population_effect"]["verdict"] == NOISE
    assert v["dims_effect"]["verdict"] == ROBUST and v["dims_effect"]["gap"] == pytest.approx(0.0995, abs=1e-4)
    assert v["ceiling"]["verdict"] == NO_CEILING


def test_same_direction_but_gap_inside_the_spread_is_noise():
    rows = [(1, 1, 1, 0.20), (1, 1, 2, 0.30), (16, 1, 1, 0.21), (16, 1, 2, 0.31)]
    v = verdicts(table(rows))
    assert v["population_effect"]["verdict"] == NOISE and "does not exceed" in v["population_effect"]["sentence"]


def test_no_cell_with_two_seeds():
    v = verdicts(table([(1, 1, 42, 0.2), (16, 1, 42, 0.3), (1, 2, 42, 0.2), (16, 2, 42, 0.3)]))
    assert v["population_effect"]["verdict"] == FEW and v["dims_effect"]["verdict"] == FEW


def test_ceiling_says_whether_rules_or_search_cap_it():
    t = table([(16, 1, 42, 0.25), (16, 2, 42, 0.25)]).assign(best_generation=[50, 48], upper_bound=[0.25003, 0.31])
    cells = {c["dims"]: c for c in verdicts(t)["ceiling"]["cells"]}
    assert cells[1]["capped_by"] == "rules" and cells[2]["capped_by"] == "search"
    sentence = verdicts(t)["ceiling"]["sentence"]
    assert "the rules cap the objective there" in sentence and "the search stopped below the bound" in sentence
    assert "generation 50" in sentence


def test_summary_cli_rejects_foreign_folders(tmp_path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    assert main([str(tmp_path)]) == 2
    (tmp_path / "study.json").write_text("{}")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("bilevel_tune.summary: error:") for line in err)
    with pytest.raises(StoreError):
        _ = open_store(tmp_path).study


def test_verdicts_of_a_run_shorter_than_its_study_are_labelled_so():
    from bilevel_tune.report.heading import budget_note
    from bilevel_tune.study_data.definition import load_study
    from bilevel_tune.study_data.design import compile_design

    study = load_study("weekend")
    assert budget_note(compile_design(study)) is None
    note = budget_note(compile_design(study.with_overrides(outer_iters=4, inner_iters=10)))
    assert note.startswith(
        "SHORT RUN (budget full, outer_iters=4, inner_iters=10): cells ran 4 generations of 300/1000"
    )
    assert "K = 10 of 50" in note
    assert budget_note(compile_design(study.with_budget("quick"))).startswith("SHORT RUN (budget quick): cells ran 3 generations")


def test_the_summary_cli_answers_help(capsys):
    assert main(["--help"]) == 0
    assert "RUN_DIR" in capsys.readouterr().out


def test_a_trials_status_says_whether_it_finished_stopped_or_may_still_be_running():
    from bilevel_tune.core import metrics
    from bilevel_tune.study_data.run_tables import _status

    assert _status({metrics.FINAL_BEST: 0.3}, recorded=5, budget=5) == "complete"
    assert _status({metrics.STOP_REASON: "every candidate failed"}, recorded=3, budget=5) == "stopped"
    assert _status({}, recorded=3, budget=5) == "running or crashed"
    assert _status({}, recorded=5, budget=5) == "no final"  # every generation, but killed before its final line


def mechanisms_table(rows):
    """(population, optimize_params, seed, best) rows, with the columns a trial table has."""
    from bilevel_tune.study_data.definition import load_study

    out = pd.DataFrame(rows, columns=["population", "optimize_params", "seed", "best_objective"])
    params = out["optimize_params"].str.split(",")
    return out.assign(dims=params.map(len), mechanism=params.map(load_study("ceiling").mechanisms.label))


FLOOR, QUOTA, RISK = "min_demand_frac", "min_demand_frac,fixed_quota", "min_demand_frac,risk_penalty_scale"


def test_two_mechanisms_of_one_dimensionality_stay_apart_and_each_pair_is_judged():
    rows = []
    for seed, noise in ((42, 0.0), (7, 0.002)):
        for pop in (1, 16):
            rows += [(pop, FLOOR, seed, 0.25 - noise), (pop, QUOTA, seed, 0.25 - 2 * noise)]
            rows += [(pop, RISK, seed, 0.60 + noise)]
    v = verdicts(mechanisms_table(rows))
    assert "dims_effect" not in v
    mech = v["mechanism_effect"]
    assert mech["verdict"] == ROBUST and len(mech["pairs"]) == 3
    by_pair = {(p["low"], p["high"]): p["verdict"] for p in mech["pairs"]}
    assert by_pair == {("1-D", "2-D"): NOISE, ("1-D", "2-D floor+risk"): ROBUST, ("2-D", "2-D floor+risk"): ROBUST}
    assert "2-D floor+risk wins" in mech["sentence"]


def test_the_ceiling_names_the_fixed_rules_that_set_it_and_whether_searching_them_lifts_the_best():
    t = mechanisms_table([(16, FLOOR, 42, 0.25), (16, QUOTA, 42, 0.25), (16, RISK, 42, 0.61)])
    bound_by = {"fixed_quota": 0.25, "fine_amount": 0.25, "risk_penalty_scale": 0.98, "risk_penalty_power": 0.53}
    t = t.assign(upper_bound=[0.25, 0.25, 0.61], **{f"bound_by/{rule}": v for rule, v in bound_by.items()})
    cells = {c["mechanism"]: c for c in verdicts(t)["ceiling"]["cells"]}
    assert set(cells) == {"1-D", "2-D"}
    assert cells["1-D"]["cap_rules"] == {"risk_penalty_scale": 0.98, "risk_penalty_power": 0.53}
    assert cells["2-D"]["cap_rules"].keys() == {"risk_penalty_scale", "risk_penalty_power"}  # the quota is searched
    sentence = verdicts(t)["ceiling"]["sentence"]
    assert "the cap is set by the fixed rule(s) risk_penalty_scale" in sentence and "fine_amount" not in sentence
    assert "searching them lifts the best (2-D floor+risk 0.6100)" in sentence


def test_the_campaigns_table_with_mechanism_labels_gives_the_same_verdicts():
    rows = [(p, FLOOR if d == 1 else QUOTA, s, b) for p, d, s, b in PR_TABLE.itertuples(index=False)]
    labelled, plain = verdicts(mechanisms_table(rows)), verdicts(PR_TABLE)
    assert {k: v["sentence"] for k, v in labelled.items()} == {k: v["sentence"] for k, v in plain.items()}


def test_each_pair_of_three_mechanisms_names_its_levels_once_when_seeds_are_too_few():
    v = verdicts(mechanisms_table([(1, FLOOR, 42, 0.25), (1, QUOTA, 42, 0.2499), (1, RISK, 42, 0.745)]))
    mech = v["mechanism_effect"]
    assert mech["verdict"] == FEW and [p["verdict"] for p in mech["pairs"]] == [FEW] * 3
    assert mech["sentence"] == (
        "mechanism (3 levels): 2-D vs 1-D: mean gap -0.0001, but no cell has ≥ 2 seeds to measure seed noise. "
        "2-D floor+risk vs 1-D: mean gap +0.4950, but no cell has ≥ 2 seeds to measure seed noise. "
        "2-D floor+risk vs 2-D: mean gap +0.4951, but no cell has ≥ 2 seeds to measure seed noise."
    )
    two = verdicts(table([(1, 1, 42, 0.2), (16, 1, 42, 0.3)]))["population_effect"]["sentence"]
    assert two == "population 16 vs 1: mean gap +0.1000, but no cell has ≥ 2 seeds to measure seed noise."


def test_a_trials_nodes_are_its_machines_not_its_sessions_node_ids():
    def gens(*shards_per_generation):
        return [{metrics.SHARD_DETAIL: list(shards)} for shards in shards_per_generation]

    here, there = {metrics.NODE_IP: "10.0.0.1"}, {metrics.NODE_IP: "10.0.0.2"}
    resumed = gens([{metrics.NODE: "a", **here}], [{metrics.NODE: "b", **here}], [{metrics.NODE: "c", **here}])  # three sessions
    assert nodes_used(resumed) == 1
    spread = gens([{metrics.NODE: "a", **here}, {metrics.NODE: "d", **there}])  # one generation's shards on two machines
    assert nodes_used(spread) == 2
    older = gens([{metrics.NODE: "a"}], [{metrics.NODE: "b"}], [{metrics.NODE: "c"}, {metrics.NODE: "e"}])  # no addresses on record
    assert nodes_used(older) == 2 and nodes_used(gens([])) == 1 and nodes_used([]) == 1
