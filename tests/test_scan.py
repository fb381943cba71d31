"""The rules scan: ground truth for the search — the grid, the landscape, regret, and the ceiling's truth.

Known landscapes (tests/inner_loops.py: the objective a closed-form
function of the searched rule) check the numbers under real Tune; the
analytic loop checks a scan resumed after its actor dies; real APPO runs a
tiny one end to end.
"""

import json

import numpy as np
import pandas as pd
import pytest

from bilevel_tune.cli.main import main
from bilevel_tune.core import metrics, scan
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.analytic import AnalyticLoop
from bilevel_tune.report.seed_noise import search_vs_grid
from bilevel_tune.study_data.definition import Study, StudyError, load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import SCAN_CSV
from bilevel_tune.tune_edge.trainable import Seeds, candidate_rules
from bilevel_tune.worlds.fresh_water.rules import rule_spec

from .study_helpers import kill_inner_actor_after, study_args, trial_records

LANDSCAPE_STUDY = """
name = "landscape"
inner = "tests.inner_loops:PeakLoop"

[grid]
population = [1]
optimize_params = [["min_demand_frac"]]
seed = [1]

[budget]
generations = 3
inner_iters = 1
final_eval_seeds = 2
horizon = 10
num_farms = 1
hidden = [4]

[scan]
points = 5
"""


# -- the grid (numpy) --------------------------------------------------------------------
def test_the_grid_holds_both_ends_and_the_centre_and_runs_row_major():
    assert scan.scan_grid(1, 5)[:, 0].tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    two = scan.scan_grid(2, 3)
    assert two.shape == (9, 2) and two[1].tolist() == [0.0, 0.5] and two[3].tolist() == [0.5, 0.0]
    assert scan.grid_spacing([rule_spec("min_demand_frac"), rule_spec("fixed_quota")], 5) == {
        "min_demand_frac": 0.0875,
        "fixed_quota": 0.0875,
    }
    assert scan.passes([11], [21, 22], generation_seed=5) == [(5, [11]), (21, [21]), (22, [22])]


def test_a_scan_is_a_trial_per_searched_rules_and_seed(tmp_path):
    study = load_study("weekend").with_overrides(scan=3)
    names = [c for c in compile_design(study).scan_cells]
    assert [(c.population, c.dims, c.seed, c.generations) for c in names] == [
        (3, 1, 42, 4), (3, 1, 7, 4), (9, 2, 42, 4), (9, 2, 7, 4),
    ]  # fmt: skip
    assert load_study("weekend").scan is None and compile_design(load_study("weekend")).scan_cells == ()  # no default scan
    assert Study.from_dict(json.loads(json.dumps(study.to_dict()))) == study
    path = tmp_path / "s.toml"
    path.write_text(LANDSCAPE_STUDY.replace("points = 5", "points = 1"))
    with pytest.raises(StudyError, match=r"\[scan\].points=1 must be an integer ≥ 2"):
        load_study(str(path))


def test_search_vs_grid_reads_the_grid_and_the_runs_on_the_same_scanned_seeds():
    """A run in stages adds seeds without scans: the runs' best, their regret and the grid's best are means over
    the scanned seeds only, so they add up (grid − runs' best = mean regret), and the line names those seeds."""
    bests = pd.DataFrame(
        {"dims": 1, "optimize_params": "min_demand_frac", "mechanism": "1-D", "seed": [7, 42], "points": 21,
         "scan_best": [0.40, 0.42], "grid_spacing": "min_demand_frac 0.0175"}
    )  # fmt: skip
    trials = pd.DataFrame(
        {"optimize_params": "min_demand_frac", "population": 1, "generations": 100, "seed": [7, 42, 6331, 6710],
         "best_objective": [0.41, 0.43, 0.50, 0.52], "regret": [-0.01, -0.01, np.nan, np.nan]}
    )  # fmt: skip
    sentence = search_vs_grid(trials, bests)["sentence"]
    assert "1-D grid 21 points → 0.4100; pop 1: 100 → 0.4200 (regret -0.0100) (seeds 7, 42)" in sentence
    assert "means over the scanned seeds" in sentence


@pytest.mark.parametrize("value", ["0", "-1", "x", "1"])
def test_bad_scan_values_exit_2_in_one_line_naming_scan(tmp_path, capsys, value):
    assert main(study_args(tmp_path, "--dry-run", "--scan", value)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--scan" in err and "≥ 2" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.long
def test_the_dry_run_lists_the_scan_trials_with_their_eta(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BILEVEL_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["weekend", "--dry-run", "--scan", "3", "--inner", "analytic", "--num-cpus", "4"]) == 0
    out = capsys.readouterr().out
    for name in ("weekend_scan_1d_seed42", "weekend_scan_1d_seed7", "weekend_scan_2d_seed42", "weekend_scan_2d_seed7"):
        line = next(line for line in out.splitlines() if line.startswith(name))
        assert line.split()[1] == "4"  # passes: the evaluation seeds, then 3 final seeds
    assert "+ 4 scan trials" in out and "grid points 3 (3) and 9 (3×3)" in out
    assert out.strip().splitlines()[-1].startswith("ETA ")


# -- known landscapes under real Tune -------------------------------------------------------------
def run_landscape(tmp_path, loop: str, *flags: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "landscape.toml"
    path.write_text(LANDSCAPE_STUDY)
    args = [str(path), "--inner", f"tests.inner_loops:{loop}", "--wandb", "disabled", *flags]
    assert main([*args, "--results", str(tmp_path), "--name", "run"]) == 0
    run = tmp_path / "run"
    return (
        run,
        pd.read_csv(run / SCAN_CSV),
        pd.read_csv(run / "trials.csv"),
        json.loads((run / "verdicts.json").read_text()),
    )


@pytest.mark.ray
def test_a_known_peak_is_the_scans_argmax_and_a_trial_starting_there_has_no_regret(ray_cluster, tmp_path):
    run, scans, trials, verdicts = run_landscape(tmp_path, "PeakLoop")
    assert len(scans) == 5 and list(scans["min_demand_frac"]) == pytest.approx([0.0, 0.0875, 0.175, 0.2625, 0.35])
    best = scans.loc[scans["objective"].idxmax()]
    assert best["min_demand_frac"] == pytest.approx(0.175) and best["objective"] == pytest.approx(0.3)
    assert best["final_objective"] == pytest.approx(0.3) and best["final_seeds"] == 2
    (trial,) = trials.itertuples()
    assert trial.regret == 0.0 and trial.final_regret == 0.0  # the ES's generation 0 is the grid's centre
    assert trial.grid_spacing == "min_demand_frac 0.0875"
    assert (run / "plots" / "landscape_1d.png").stat().st_size > 10_000
    assert not (run / "plots" / "landscape_2d.png").exists()
    sentence = verdicts["best_objective"]["search_vs_grid"]["sentence"]
    assert "1-D grid 5 points → 0.3000; pop 1: 3 → 0.3000 (regret +0.0000) (seeds 1)" in sentence
    assert "Rules scan (5 points per searched rule" in (run / "summary.md").read_text()
    assert (run / "tensorboard" / "landscape_scan_1d_seed1").is_dir()


@pytest.mark.ray
def test_the_ceiling_verdict_tells_a_structural_cap_from_a_search_that_stopped_short(ray_cluster, tmp_path):
    _, _, _, capped = run_landscape(tmp_path / "capped", "CappedLoop")
    sentence = capped["best_objective"]["ceiling"]["sentence"]
    assert "pinned at 0.2500" in sentence and "the rules cap the objective there" in sentence
    assert "the scan's best is 0.2500; no rules on the grid exceed the band (5 points" in sentence
    assert sentence.endswith("a structural cap.")
    _, scans, trials, short = run_landscape(tmp_path / "short", "ShortLoop")
    sentence = short["best_objective"]["ceiling"]["sentence"]
    assert "pinned at 0.2500" in sentence and "the search stopped below the bound" in sentence
    assert "the scan finds 0.3500 above the band at rules min_demand_frac=0.35: the search stopped short" in sentence
    assert trials["regret"].iloc[0] == pytest.approx(0.1)


# -- a scan resumes like any trial ------------------------------------------------------------------
@pytest.mark.ray
def test_a_scan_whose_actor_dies_resumes_from_its_last_pass_and_changes_nothing(ray_cluster, tmp_path):
    args = study_args(
        tmp_path, inner="analytic", wandb="disabled", population=1, optimize_params="fixed_quota", seed=3,
        outer_iters=1, scan=4,
    )  # fmt: skip
    killer, killed = kill_inner_actor_after(tmp_path / "run", generations=2, timeout=120, trial="weekend_scan")
    assert main(args) == 0
    killer.join(timeout=5)
    ((rows, final),) = [r for name, r in trial_records(tmp_path / "run").items() if name.startswith("weekend_scan")]
    assert [r[metrics.GENERATION] for r in rows] == [0, 1, 2, 3] and final is not None  # evaluation + 3 final seeds
    assert killed["pid"] in {r[metrics.PID] for r in rows} and len({r[metrics.PID] for r in rows}) == 2
    study = load_study("weekend").with_overrides(
        populations=[1], optimize_params=["fixed_quota"], seeds=[3], outer_iters=1, inner="analytic", scan=4
    )
    loop = AnalyticLoop(InnerLoopConfig.from_study(study))
    seeds = Seeds(3, study.budget.eval_episodes, study.budget.final_eval_seeds)
    rules = candidate_rules(study, ("fixed_quota",), scan.scan_grid(1, 4))
    for row, (generation_seed, eval_seeds) in zip(
        rows, scan.passes(seeds.evaluation, seeds.final, seeds.generation(0))
    ):
        loop.reset(rules, generation_seed, range(4))
        assert [o[metrics.OBJECTIVE] for o in row[metrics.OUTCOMES]] == [o.objective for o in loop.evaluate(eval_seeds)]
    k = int(np.argmax([o[metrics.OBJECTIVE] for o in rows[0][metrics.OUTCOMES]]))
    assert final[metrics.SCAN_BEST] == rows[0][metrics.OUTCOMES][k][metrics.OBJECTIVE]
    assert final[metrics.FINAL_BEST] == pytest.approx(np.mean([r[metrics.OUTCOMES][k][metrics.OBJECTIVE] for r in rows[1:]]))


# -- real APPO ------------------------------------------------------------------------------------------
@pytest.mark.ray
@pytest.mark.slow
def test_a_real_appo_scan_writes_its_landscape_and_every_trials_regret(ray_cluster, tmp_path):
    args = study_args(
        tmp_path, "--quick", inner="appo", wandb="disabled", population=2, optimize_params="min_demand_frac", seed=5,
        outer_iters=2, inner_iters=2, scan=3,
    )  # fmt: skip
    assert main(args) == 0
    run = tmp_path / "run"
    scans, trials = pd.read_csv(run / SCAN_CSV), pd.read_csv(run / "trials.csv")
    assert len(scans) == 3 and scans["objective"].notna().all() and (scans["final_seeds"] == 2).all()
    assert (scans["objective"] <= scans["upper_bound"] + 1e-12).all()
    assert np.isfinite(trials["regret"]).all() and np.isfinite(trials["final_regret"]).all()
    assert trials["regret"].iloc[0] == pytest.approx(scans["objective"].max() - trials["best_objective"].iloc[0])
    assert (run / "plots" / "landscape_1d.png").is_file()


# -- the campaign's regime: a structural cap the study finds by itself ------------------------------
@pytest.mark.ray
def test_the_ceiling_study_finds_its_cap_names_the_rules_that_set_it_and_the_third_mechanism_lifts_it(
    ray_cluster, tmp_path
):
    """`ceiling` with myopic farms: the cells that do not search risk_penalty_scale sit at 0.2500, and so do their
    scans; the verdict calls it a structural cap set by the flow penalty's rules; the third mechanism gets above."""
    args = study_args(tmp_path, "--quick", study="ceiling", inner="analytic", wandb="disabled", population=16, seed=42)
    assert main([*args, "--scan", "3"]) == 0
    run = tmp_path / "run"
    trials = pd.read_csv(run / "trials.csv").set_index("mechanism")
    assert list(trials.index) == ["1-D", "2-D", "2-D floor+risk"]
    assert (trials.loc[["1-D", "2-D"], "best_objective"] - 0.25).abs().max() <= 1e-4
    assert trials.loc["2-D floor+risk", "best_objective"] > 0.26
    bests = pd.read_csv(run / SCAN_CSV).groupby("optimize_params")["objective"].max()
    assert (bests[["min_demand_frac", "min_demand_frac,fixed_quota"]] - 0.25).abs().max() <= 1e-4
    verdicts = json.loads((run / "verdicts.json").read_text())["best_objective"]
    ceiling = verdicts["ceiling"]
    assert ceiling["verdict"] == "ceiling" and {c["mechanism"] for c in ceiling["cells"]} == {"1-D", "2-D"}
    for cell in ceiling["cells"]:
        assert cell["capped_by"] == "rules" and set(cell["cap_rules"]) == {"risk_penalty_scale", "risk_penalty_power"}
        assert cell["scan"].endswith("a structural cap")
    assert "searching them lifts the best (2-D floor+risk" in ceiling["sentence"]
    assert "mechanism_effect" in verdicts and "dims_effect" not in verdicts
    names = {p.name for p in (run / "plots").glob("landscape_*.png")}
    assert names == {"landscape_1d.png", "landscape_2d.png", "landscape_2d-floor-risk.png"}
    assert any(p.name.startswith("ceiling_pop16_2d-floor-risk_seed42") for p in run.iterdir())
