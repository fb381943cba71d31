"""Held-out learners and the status quo: what the learners are, what each trial's rules are, the Robustness section
decided on synthetic scores — and, with Ray, a quick study scored by held-out learners, a finished run re-evaluated,
and the frozen learner's habits."""

import dataclasses
import json
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bilevel_tune.cli.reevaluation import PROBE_ITERS, job_cost, probe_rules, trial_rules
from bilevel_tune.report.answers import decided
from bilevel_tune.report.robustness import HOLDS, robustness, status_quo_words
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.learners import check_learners, learners_of, parse_learner, with_learners
from bilevel_tune.study_data.run_folder import trial_name
from bilevel_tune.study_data.study_checks import StudyError

WEEKEND = load_study("weekend")
CEILING = load_study("ceiling")


def test_a_learner_is_a_loop_with_settings_of_its_own():
    learner = parse_learner("appo(appo.lr=3e-4, network.hidden=[64,64])", WEEKEND)
    assert learner.label == "appo(appo.lr=0.0003, network.hidden=64,64)" and learner.loop == "appo"
    assert learner.study(WEEKEND).appo.lr == 3e-4 and learner.study(WEEKEND).network.hidden == (64, 64)
    assert [x.label for x in learners_of(with_learners(WEEKEND, ("ppo", "frozen")))] == [
        "appo (its own)", "ppo", "frozen"
    ]
    assert parse_learner("analytic", WEEKEND).study(WEEKEND) is WEEKEND


@pytest.mark.parametrize(
    "text,message",
    [
        ("sarsa", "learner 'sarsa' is unknown; allowed: analytic, ppo, frozen, appo, appo-multiagent"),
        ("appo(world.horizon=20)", "world.horizon is what the learner is scored on, not what it is"),
        ("appo(appo.lr)", "'appo.lr' must look like key=value"),
        ("appo(appo.lr=2)", "appo.lr=2.0 must be a number in (0, 1]"),
        ("ppo(", "must look like a loop's name, with settings in parentheses"),
    ],
)
def test_a_learner_that_cannot_be_is_one_line(text, message):
    with pytest.raises(StudyError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        parse_learner(text, WEEKEND)


def test_learners_named_twice_or_that_the_world_cannot_run_are_refused():
    with pytest.raises(StudyError, match="learners: 'ppo' is named twice"):
        check_learners(with_learners(WEEKEND, ("ppo", "ppo")))
    check_learners(with_learners(WEEKEND, ("analytic", "ppo", "frozen")))


def finished(study, best: dict) -> dict[tuple, pd.Series]:
    """Trial rows by cell key (`RunStore.trial_rows`) of finished trials whose best candidates' searched rules are
    `best`, in reverse order (a reader finds each cell's row by its key, never by its place)."""
    rows = {}
    for cell in reversed(compile_design(study).cells):
        who = {"population": cell.population, "optimize_params": ",".join(cell.optimize_params), "seed": cell.seed}
        rows[cell.key] = pd.Series({**who, "status": "complete", **{f"best/{p}": best[p] for p in cell.optimize_params}})
    return rows


def test_each_trial_is_scored_at_its_final_rules_against_the_status_quo_of_its_own_searched_rules():
    """The ceiling fixes fixed_quota at 0.6, and its 2-D mechanism searches it: there the status quo puts it at its
    default (0.85); the 1-D trials keep the study's 0.6. The final seeds are the trial's own."""
    rules = {t.name: t for t in trial_rules(CEILING, finished(CEILING, {"min_demand_frac": 0.3, "fixed_quota": 0.7,
                                                                        "risk_penalty_scale": 0.2}))}  # fmt: skip
    one_d, two_d = rules["ceiling_pop1_1d_seed42"], rules["ceiling_pop1_2d_seed42"]
    assert one_d.final["min_demand_frac"] == 0.3 and one_d.final["fixed_quota"] == 0.6
    assert one_d.status_quo["min_demand_frac"] == 0.05 and one_d.status_quo["fixed_quota"] == 0.6
    assert two_d.final["fixed_quota"] == 0.7 and two_d.status_quo["fixed_quota"] == 0.85
    assert two_d.status_quo["risk_penalty_scale"] == 1.0  # fixed by the study, not searched here
    from bilevel_tune.inner.contract import Seeds

    assert one_d.seeds == tuple(Seeds(42, 1, 3).final) and len(rules) == 12
    assert probe_rules(CEILING)[0].final == probe_rules(CEILING)[0].status_quo
    assert "the fixed rules as the study sets them (max_demand_frac 1" in status_quo_words(compile_design(CEILING))


def synthetic_heldout(study, gain_of, final_of=lambda learner, cell: 0.4, seeds=(1, 2)) -> pd.DataFrame:
    rows = []
    for cell in compile_design(study).cells:
        for learner in ("appo (its own)", "ppo", "frozen"):
            for j, seed in enumerate(seeds):
                final = final_of(learner, cell) + 0.001 * j
                gain = gain_of(learner, cell) + 0.002 * (cell.seed % 3) + 0.001 * j
                rows.append({"trial": trial_name(study, cell), "learner": learner, "final_seed": seed,
                             "final": final, "status_quo": final - gain, "gain": gain})  # fmt: skip
    return pd.DataFrame(rows)


def grown(study, seeds):
    return dataclasses.replace(study, seeds=tuple(seeds))


def test_a_gain_is_decided_per_cell_and_learner_and_a_winner_that_holds_nowhere_is_said_so():
    """Six seeds: a clear gain under every learner but frozen's (none), and 2-D ahead under the study's own learner
    only (the Answers decide it; under ppo and frozen the two mechanisms score alike)."""
    study = grown(WEEKEND, (1, 2, 3, 4, 5, 6))
    rng = np.random.default_rng(0)
    levels = {s: rng.normal(0, 0.01) for s in study.seeds}
    design = compile_design(study)
    rows = {c.key: pd.Series({"status": "complete", "trial": trial_name(study, c),
                              "final_objective": 0.4 + levels[c.seed] + (0.01 if c.dims == 2 else 0.0) + rng.normal(0, 0.001)})
            for c in design.cells}  # fmt: skip
    found = decided(design, rows, {key: row["final_objective"] for key, row in rows.items()})
    assert {r.hypothesis.key: r.decision.outcome for r in found.rows}["2-D vs 1-D, over populations"] == "B better"
    heldout = synthetic_heldout(
        study,
        gain_of=lambda learner, cell: 0.0 if learner == "frozen" else 0.05,
        final_of=lambda learner, cell: 0.4 + levels[cell.seed] + (0.01 if cell.dims == 2 and learner.startswith("appo")
                                                                  else 0.0),
    )  # fmt: skip
    r = robustness(compile_design(study), heldout, found)
    gains = {(g.where, g.learner): g.answer for g in r.gains()}
    assert gains[("population 1, 2-D", "ppo")] == "gain" and gains[("population 1, 2-D", "frozen")] == "not shown"
    winners = {(w.where, w.learner): w.answer for w in r.winners()}
    assert winners[("2-D vs 1-D, over populations", "ppo")] != HOLDS
    assert any("2-D wins only against its own learner, appo; under the held-out ones:" in line for line in r.lines())
    assert r.lines()[1] == (
        "a gain over the status quo shown in: appo (its own) 4 of 4 (+0.0525), ppo 4 of 4 (+0.0525), "
        "frozen 0 of 4 (+0.0025) cells."
    )
    record = json.loads(json.dumps(r.record()))
    assert record["learners"] == ["appo (its own)", "ppo", "frozen"] and record["alpha"] == 0.05
    assert len(r.table()) == len(r.rows) == 4 * 3 + len(r.winners())


def test_a_learner_is_costed_by_a_warm_job_its_first_build_paid_once_per_actor():
    """Each job rebuilds the learner (cheap once its process is warm); the first build, imports and all, is an
    actor's once. The probe once counted it per seed and scaled a seed's first, slowest train() calls to K: 8:32
    for weekend-confirm's 168 jobs, 4:17 after."""
    seed = lambda reset, train, evaluate: types.SimpleNamespace(sec_reset=reset, sec_train=train, sec_evaluate=evaluate)  # noqa: E731
    steady, first_extra = 0.5, 0.3  # a seed's train() calls: its first ones cost more
    once = seed(0.2, first_extra + steady * PROBE_ITERS[0], 0.1)
    more = seed(0.4, first_extra + steady * PROBE_ITERS[1], 0.3)
    warm_up = seed(6.0, 2.0 + once.sec_train, 0.1)  # the actor's first seed: imports, first build, first calls
    cost = job_cost(warm_up, once, more, k=50)
    assert cost.per_job == pytest.approx(0.3 + 0.2 + first_extra + steady * 50)  # mean reset and evaluation
    assert cost.warm_up == pytest.approx(5.8 + 2.0)
    assert cost.eta(jobs=12, cpus=2) == pytest.approx(12 * cost.per_job / 2 + cost.warm_up)
    assert cost.eta(jobs=0, cpus=2) == 0.0
    assert job_cost(warm_up, once, more, k=0).per_job == pytest.approx(0.5)  # K = 0: a build and an evaluation


def test_no_held_out_scores_no_section():
    assert robustness(compile_design(WEEKEND), pd.DataFrame(), None) is None


# -- with Ray: the frozen learner, a study scored by held-out learners, a finished run re-evaluated ----------------
@pytest.mark.ray
@pytest.mark.slow
def test_frozen_farms_are_trained_under_the_status_quo_and_scored_under_the_final_rules(ray_cluster, tiny_inner):
    """Both loops in lockstep (each batch applied before the next season): the frozen learner's block (final rules,
    status quo) is the plain loop's block (status quo, status quo) trained alike, scored under (final, status quo)."""
    from bilevel_tune.appo.frozen import FrozenLoop
    from bilevel_tune.appo.local_learner import drain_learner
    from bilevel_tune.appo.population import PopulationPolicyLoop

    final, status_quo = {"min_demand_frac": 0.3, "fixed_quota": 0.7}, {}
    frozen, plain = FrozenLoop(tiny_inner), PopulationPolicyLoop(tiny_inner)
    try:
        frozen.reset([final, status_quo], 5, [0, 1])
        plain.reset([status_quo, status_quo], 5, [0, 1])
        for loop in (frozen, plain):
            for _ in range(3):
                loop.train()
                drain_learner(loop.algo)
        mine, theirs = frozen.evaluate([5]), plain.evaluate_on([final, status_quo], [5])
        assert [o.objective for o in mine] == [o.objective for o in theirs]
        assert mine[0].objective != plain.evaluate([5])[0].objective  # the final rules differ from the habits' own
    finally:
        frozen.stop(), plain.stop()


@pytest.mark.ray
@pytest.mark.slow
def test_a_quick_study_with_held_out_learners_then_one_more_on_the_finished_run(ray_cluster, tmp_path, capsys):
    from bilevel_tune.cli.main import main

    from .study_helpers import study_args

    args = study_args(tmp_path, "--quick", name="held", population=1, seed=42, wandb="disabled",
                      learners="ppo,analytic,frozen")  # fmt: skip
    assert main(args) == 0
    run = tmp_path / "held"
    heldout = pd.read_csv(run / "heldout.csv")
    assert len(heldout) == 2 * 4 * 2  # trials × learners (its own first) × final seeds
    assert list(dict.fromkeys(heldout["learner"])) == ["appo (its own)", "ppo", "analytic", "frozen"]
    assert (heldout["job_seconds"] > 0).all() and (heldout["job_core_s"] > 0).all()  # the OS-measured CPU seconds too
    summary = (run / "summary.md").read_text()
    section = summary.split("## Robustness")[1].split("\n## ")[0]
    for learner in ("appo (its own)", "ppo", "analytic", "frozen"):
        assert f"| {learner} " in section
    assert "status quo: each trial's searched rules at their defaults (min_demand_frac 0.05, fixed_quota 0.85)" in section
    assert json.loads((run / "verdicts.json").read_text())["robustness"]["learners"][0] == "appo (its own)"
    assert (run / "robustness.csv").is_file()
    capsys.readouterr()

    # one more learner on the finished run: only its jobs run, the others' rows stay as they were
    again = ["--reevaluate", str(run), "--learners", "appo(appo.lr=3e-4)", "--wandb", "disabled"]
    assert main([*again, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "  appo(appo.lr=0.0003): 2 job(s) × ~" in out and "  ppo: 0 job(s) left" in out and "held-out ETA" in out
    assert main(again) == 0
    more = pd.read_csv(run / "heldout.csv")
    assert more.iloc[: len(heldout)].equals(heldout) and set(more["learner"][len(heldout):]) == {"appo(appo.lr=0.0003)"}
    record = json.loads((run / "study.json").read_text())
    assert record["study"]["final"]["learners"] == ["ppo", "analytic", "frozen", "appo(appo.lr=3e-4)"]
    assert [r["jobs"] for r in record["reevaluations"]] == [8, 2]
    assert main(["--reevaluate", str(run), "--population", "1", "--learners", "ppo"]) == 2
    assert "--reevaluate scores a finished run as its study.json records it; drop --population" in capsys.readouterr().err

    # shipped; then re-shipped from a folder that lost its held-out step (a run continued from an older copy): the
    # shipped rows of every trial whose final rules they scored are kept, with their sessions, and the section too
    from bilevel_tune.summary import main as summary_main

    shipped = tmp_path / "shipped"
    assert summary_main([str(run), "--no-plots", "--ship", str(shipped)]) == 0
    rows = pd.read_csv(shipped / "heldout.csv")
    moved = rows["trial"].iloc[0]
    rows.loc[rows["trial"] == moved, "final_rules"] = "min_demand_frac=0.123"  # scored at rules it no longer has
    rows.to_csv(shipped / "heldout.csv", index=False)
    (run / "heldout.csv").unlink()
    record.pop("reevaluations")
    record["study"].pop("final")
    (run / "study.json").write_text(json.dumps(record))
    capsys.readouterr()
    assert summary_main([str(run), "--no-plots", "--ship", str(shipped)]) == 0
    assert f"held-out: kept {(more['trial'] != moved).sum()} row(s) of {shipped / 'heldout.csv'}" in capsys.readouterr().out
    kept = pd.read_csv(run / "heldout.csv")
    assert kept.equals(more[more["trial"] != moved].reset_index(drop=True))
    record = json.loads((run / "study.json").read_text())
    assert [r["jobs"] for r in record["reevaluations"]] == [8, 2]
    assert record["study"]["final"]["learners"] == ["ppo", "analytic", "frozen", "appo(appo.lr=3e-4)"]
    assert "## Robustness" in (shipped / "summary.md").read_text() and (shipped / "heldout.csv").is_file()


@pytest.mark.ray
def test_a_shipped_result_is_re_evaluated_from_its_tables(ray_cluster, tmp_path, capsys):
    """A shipped folder keeps no records: its trials table holds each trial's best rules, enough to score them."""
    import shutil

    from bilevel_tune.cli.main import main

    from .study_helpers import REPO

    shipped = tmp_path / "fishery-analytic"
    shutil.copytree(REPO / "docs" / "results" / "fishery-analytic", shipped)
    before = pd.read_csv(shipped / "heldout.csv")  # shipped re-evaluated by appo, ppo and frozen beside its own
    written = (shipped / "heldout.csv").read_bytes()
    assert main(["--reevaluate", str(shipped), "--learners", "analytic", "--wandb", "disabled"]) == 0
    appended = (shipped / "heldout.csv").read_bytes()
    assert appended.startswith(written) and b"\r" not in appended  # one line ending, pandas' own, as a ship writes
    heldout = pd.read_csv(shipped / "heldout.csv")
    assert heldout.iloc[: len(before)].equals(before)  # only the new learner's jobs ran
    assert list(dict.fromkeys(heldout["learner"])) == ["analytic (its own)", "appo", "ppo", "frozen", "analytic"]
    assert len(heldout) == before["trial"].nunique() * 5 * 3 == 24 * 5 * 3  # its 24 ES trials, 5 learners, 3 seeds
    assert json.loads((shipped / "study.json").read_text())["study"]["final"]["learners"] == [
        "appo", "ppo", "frozen", "analytic"
    ]
    own, other = (
        heldout[heldout["learner"] == label].sort_values(["trial", "final_seed"])["gain"].to_numpy()
        for label in ("analytic (its own)", "analytic")
    )
    assert np.array_equal(own, other)  # one loop, deterministic: the same scores twice
    assert "## Robustness" in (shipped / "summary.md").read_text()
    assert main(["--reevaluate", str(tmp_path / "nothing"), "--learners", "analytic"]) == 2
    assert "--reevaluate" in capsys.readouterr().err


@pytest.mark.ray
def test_the_dry_run_plans_the_held_out_step_with_the_trials(ray_cluster, capsys):
    from bilevel_tune.cli.main import main

    argv = ["weekend", "--quick", "--inner", "analytic", "--learners", "ppo", "--dry-run", "--num-cpus", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "held-out learners, after the trials: analytic (its own), ppo" in out
    assert "  ppo: 8 job(s) × ~" in out and "held-out ETA" in out
    assert "for the whole command with its held-out step" in out.strip().splitlines()[-1]


def test_the_packed_stages_held_out_jobs_cost_a_tenth_of_weekend_confirms_summed_over_its_learners():
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "heldout_cost.py"), "--run", str(root / "docs/results/weekend-confirm-packed"),
         "--against", str(root / "docs/results/weekend-confirm")],
        capture_output=True, text=True, check=True, cwd=root,
    )  # fmt: skip
    against = json.loads(out.stdout.strip().splitlines()[-1])["against"]
    assert set(against) == {"appo (its own)", "analytic", "frozen", "ppo", "sum_over_learners"}
    assert against["ppo"] < 0.25 and against["sum_over_learners"] <= 0.25  # PPO batched: one block a job
    assert "summed over the 4 learners" in out.stdout
