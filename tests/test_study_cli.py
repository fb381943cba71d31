"""The study CLI before anything runs: --dry-run, --list, and bad input (one line, exit 2, nothing written)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bilevel_tune.cli.main import main
from bilevel_tune.cli.runner import RunOptions, resume_command

WEEKEND = ["weekend", "--wandb", "disabled"]


ETA_LINE = re.compile(r"ETA (\d+ days?, )?\d+:\d\d:\d\d")


@pytest.mark.long
def test_dry_run_shows_the_trials_their_shards_and_an_eta(capsys, tmp_path):
    argv = ["weekend", "--inner", "analytic", "--dry-run", "--num-cpus", "16", "--results", str(tmp_path / "r")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "8 trials = population [1, 16]" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("weekend_pop")}
    assert len(rows) == 8
    assert {r[1] for n, r in rows.items() if "pop1_" in n} == {"1000"} and {
        r[1] for n, r in rows.items() if "pop16" in n
    } == {"300"}
    assert all(r[2] == "1" for n, r in rows.items() if "pop1_" in n), "one candidate, one shard"
    assert "16 CPUs" in out and "empty head bundle" in out
    last_eta = [line for line in out.splitlines() if "ETA" in line][-1]
    assert ETA_LINE.search(last_eta) and last_eta == out.strip().splitlines()[-1]
    assert not (tmp_path / "r").exists()


@pytest.mark.long
def test_dry_run_applies_overrides_and_cpus_per_trial(capsys):
    argv = ["weekend", "--quick", "--inner", "analytic", "--dry-run", "--population", "16", "--seed", "1,2,3"]
    assert main([*argv, "--optimize-params", "fixed_quota", "--num-cpus", "4", "--cpus-per-trial", "2"]) == 0
    out = capsys.readouterr().out
    assert "3 trials" in out and "(smoke)" in out and "weekend_pop16_1d-quota_seed3" in out
    assert [line.split()[2] for line in out.splitlines() if line.startswith("weekend_pop")] == ["2", "2", "2"]
    assert "--cpus-per-trial" in out and "2 waves" in out


def test_the_dry_run_plans_the_first_stage_and_the_most(capsys, tmp_path):
    argv = ["weekend", "--quick", "--inner", "analytic", "--until-decided", "--dry-run", "--results", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "stages (--until-decided): paired t, group-sequential (O'Brien–Fleming spending, graphical Holm) at "
        "family-wise α 0.05 over 7 hypotheses (2 main effects, 1 interaction, 4 simple comparisons), 3 stage(s) of 2 "
        "seeds at most" in out
    )
    # what the plan can decide, at the SDs of the shipped run of this study and loop
    assert (
        "smallest effect decided with power 0.8 by stage 1 / 2 / 3 (2 / 4 / 6 seeds per cell), in the study's units "
        "at the paired SD of docs/results/weekend-analytic" in out
    )
    assert "  2-D vs 1-D, over populations (α 0.00833; SD " in out and "ETA " in out  # half its share: the margin's
    assert "  with margin 0.01: each row's 'differs' holds half its share" in out
    assert re.search(r"2-D vs 1-D, over populations .*; (equivalent by stage \d \(\d+ seeds\)|equivalence not)", out)
    assert "weekend_pop1_1d_seed42" in out and "seed6331" not in out.split("at the most")[0]
    assert "at the most (every comparison open to the end): 24 trials" in out and "  stage 3: 8 trials" in out
    assert "[decide] test paired, alpha 0.05, seeds_per_stage 2, max_seeds 6, beta 0.0, compare [], score best-so-far, margin 0.01" in out
    assert not list(tmp_path.iterdir())
    assert main([*argv, "--set", "decide.test=adastop"]) == 2  # AdaStop has no margin: one line
    assert "margin=0.01 needs the paired test's repeated intervals" in capsys.readouterr().err
    assert main([*argv, "--set", "decide.test=adastop", "--set", "decide.margin=none"]) == 0
    out = capsys.readouterr().out
    assert "stages (--until-decided): AdaStop at family-wise α 0.05 over 4 comparison(s), 3 stage(s) of 2 seeds" in out
    assert "first decide at stage 3 (6 seeds per cell)" in out and "smallest effect decided" not in out


def test_list(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "weekend" in out and "world fresh-water" in out
    assert out.splitlines()[-1].startswith("worlds: fresh-water, fishery, or your own as [world] kind")


@pytest.fixture
def file_in_the_way(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    return blocker


BAD = [
    (["weeknd"], "unknown study 'weeknd' (did you mean 'weekend'?)"),
    ([], "give a study"),
    (["weekend", "--optimize-params", "min_demand"], "unknown rule 'min_demand' (did you mean 'min_demand_frac'?)"),
    (["weekend", "--optimize-params", "fixed_quota,fixed_quota"], "repeats a rule"),
    (["weekend", "--set", "quota=0.9"], "unknown setting 'quota' in --set (did you mean 'fixed_quota'?)"),
    (["weekend", "--set", "risk_penalty_scale"], "must look like key=value"),
    (["weekend", "--set", "risk_penalty_scale=high"], "rules.risk_penalty_scale='high' must be a number in [0, 5]"),
    (["weekend", "--set", "appo.lr=-1"], "--set: appo.lr=-1.0 must be a number in (0, 1]"),
    (["weekend", "--set", "appo.lrr=0.1"], "unknown setting 'appo.lrr' in --set (did you mean 'appo.lr'?)"),
    (["weekend", "--grid", "es.sigma=0.05,x"], "es.sigma='x' must be a number"),
    (["weekend", "--grid", "es.sigma"], "must look like key=value"),
    (["weekend", "--population", "0"], "--population=0 must be an integer ≥ 1"),
    (["weekend", "--population", "-2"], "--population=-2 must be an integer ≥ 1"),
    (["weekend", "--population", "3", "--outer-iters", "2"], "population 3: optimizer 'es' needs population 1 or even (antithetic pairs), not 3"),
    (["weekend", "--population", "sixteen"], "--population 'sixteen' must be comma-separated integers"),
    (["weekend", "--outer-iters", "0"], "--outer-iters 0 must be ≥ 1"),
    (["weekend", "--inner-iters", "x"], "--inner-iters 'x' must be an integer"),
    (["weekend", "--seed", "-1"], "--seed=-1 must be an integer ≥ 0"),
    (["weekend", "--wandb", "cloud"], "invalid choice: 'cloud'"),
    (["weekend", "--budget", "slow"], "no budget 'slow'; it has: quick"),
    (["weekend", "--max-concurrent", "0"], "--max-concurrent 0 must be ≥ 1"),
    (["weekend", "--address", "nonsense"], "--address 'nonsense' must be host:port"),
    (
        ["weekend", "--num-cpus", "2", "--cpus-per-trial", "3", "--dry-run"],
        "--cpus-per-trial 3 exceeds the cluster's 2 CPUs",
    ),
    (["weekend", "--set", "fixed_quota=1", "--dry-run"], "rules.fixed_quota=1.0 must be a number in [0, 0.99]"),
    (["weekend", "--set", "fine_amount=-1"], "rules.fine_amount=-1.0 must be a number in [0, 1]"),
    (["weekend", "--address", "127.0.0.1:1", "--num-cpus", "2"], "--num-cpus sizes a Ray of the study's own"),
    (["weekend", "--name", "../x"], "--name '../x' must be a plain folder name"),
    (["weekend", "--resume"], "--resume: no earlier run of study 'weekend'"),
    (["weekend", "--set", "decide.alpha=2"], "--set: decide.alpha=2.0 must be a number in (0, 0.5]"),
    (["weekend", "--set", "decide.max_seeds=5"], "[decide] max_seeds=5 must be a multiple of seeds_per_stage=2"),
    (["weekend", "--set", "decide.compare=seed"], "[decide] compare: 'seed' is not a factor of this study"),
    (["weekend", "--set", "min_demand_frac=0.9"], "rule min_demand_frac=0.9: every mechanism of the grid"),
    (["weekend", "--inner", "analytic", "--grid", "appo.lr=0.001,0.01"], "grid axis appo.lr: the analytic loop reads"),
    (["weekend", "--grid", "min_demand_frac=0.1,0.2"], "grid axis rules.min_demand_frac: every mechanism of the grid"),
    (["weekend", "--set", "decide.beta=0.1"], "[decide] beta=0.1 is AdaStop's early 'no difference'"),
    (["weekend", "--extend-plan", "12"], "--extend-plan 12 grows a run's plan on --resume --until-decided"),
    (["weekend", "--set", "decide.margin=0"], "--set: decide.margin=0.0 must be a number > 0, or none"),
    (["weekend", "--set", "decide.margin=small"], "--set: decide.margin='small' must be a number > 0, or none"),
    (["weekend", "--set", "decide.test=adastop"], "margin=0.01 needs the paired test's repeated intervals"),
    (["weekend", "--declare-margin", "0.02"], "--declare-margin 0.02 declares a margin on a resumed run"),
    (["weekend", "--declare-margin", "-1", "--resume"], "--declare-margin -1 must be a number > 0"),
    (["weekend", "--grid", "decide.alpha=0.05,0.01"], "[decide] is how the study decides its comparisons"),
    (["weekend", "--set", "search.min_demand_frac=0.3,0.2"], "must be two numbers, low < high, within [0, 1]"),
    (["weekend", "--until-decided", "--seed", "1,2,3"], "the grid's 3 seed(s) (1, 2, 3) are the first stage"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) or "no-study" for a, _ in BAD])
def test_bad_input_is_one_line_exit_2_nothing_written(argv, message, capsys, tmp_path):
    results = tmp_path / "results"
    assert main([*argv, "--results", str(results)] if argv else []) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert "Traceback" not in err
    assert not results.exists()


@pytest.mark.parametrize(
    "section,message",
    [
        ("[decide]\nalpha = 0\n", "s.toml [decide]: decide.alpha=0 must be a number in (0, 0.5]"),
        ("[decide]\nseeds_per_stage = 2\nmax_seeds = 7\n", "max_seeds=7 must be a multiple of seeds_per_stage=2"),
        ("[decide]\ncompare = ['dims']\n", "[decide] compare: 'dims' is not a factor of this study"),
        ("[decide]\nstages = 3\n", "unknown key 'stages' in s.toml [decide]"),
        ("[search]\nmin_demand_frac = [0.0, 1.5]\n", "search.min_demand_frac=[0.0, 1.5] must be two numbers"),
    ],
)
def test_bad_decide_and_search_sections_are_one_line_exit_2_nothing_written(section, message, tmp_path, capsys):
    study = tmp_path / "s.toml"
    weekend = (Path(__file__).resolve().parent.parent / "studies" / "weekend.toml").read_text()
    header = section.split("\n", 1)[0] + "\n"
    study.write_text(weekend.replace(header, section) if header in weekend else weekend + section)
    assert main([str(study), "--until-decided", "--results", str(tmp_path / "r"), "--wandb", "disabled"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


def test_a_storage_uri_is_refused_not_made_a_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([*WEEKEND, "--results", "s3://bucket/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "storage URIs (s3://) are not supported" in err
    assert list(tmp_path.iterdir()) == []


def test_results_under_a_regular_file(file_in_the_way, capsys):
    assert main([*WEEKEND, "--results", str(file_in_the_way / "results")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_malformed_and_unknown_keys_in_a_study_path(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n[grid\n")
    assert main([str(bad), "--results", str(tmp_path / "r")]) == 2
    typo = tmp_path / "typo.toml"
    typo.write_text("name = 'x'\n[grids]\n")
    assert main([str(typo), "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "malformed TOML" in err[0] and "(did you mean 'grid'?)" in err[1]


def test_online_without_a_key_fails_before_writing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.chdir(tmp_path)
    assert main(["weekend", "--wandb", "online", "--results", str(tmp_path / "r")]) == 2
    assert "needs credentials: `wandb login`" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_resume_of_another_studys_run(tmp_path, capsys):
    run = tmp_path / "r" / "other-run"
    run.mkdir(parents=True)
    (run / "study.json").write_text('{"study": {"name": "other"}}')
    assert main([*WEEKEND, "--results", str(tmp_path / "r"), "--resume", "--name", "other-run"]) == 2
    assert "belongs to study 'other', not 'weekend'" in capsys.readouterr().err


def test_the_module_entry_point_exits_2_without_traceback():
    done = subprocess.run(
        [sys.executable, "-m", "bilevel_tune.study", "weekend", "--population", "5", "--outer-iters", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        done.returncode == 2
        and done.stderr.strip()
        == "bilevel_tune.study: error: population 5: optimizer 'es' needs population 1 or even (antithetic pairs), not 5"
    )


def test_an_unreachable_address_fails_fast(tmp_path, capsys):
    assert main([*WEEKEND, "--inner", "analytic", "--address", "127.0.0.1:1", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "--address 127.0.0.1:1: cannot connect to a Ray cluster (nothing answers at 127.0.0.1:1" in err
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.long
@pytest.mark.parametrize("script", ["bilevel-study", "bilevel-summary"])
def test_console_scripts_answer_help(script):
    done = subprocess.run(
        [str(Path(sys.executable).with_name(script)), "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "usage:" in done.stdout


def test_the_resume_command_repeats_this_sessions_choices():
    options = RunOptions(study="weekend", results="/data/r", num_cpus=8, wandb="offline", command="bilevel-study")
    assert resume_command(options, Path("/data/r/weekend-1")) == (
        "bilevel-study weekend --resume --name weekend-1 --results /data/r --num-cpus 8 --wandb offline"
    )
    watched = RunOptions(study="weekend", dashboard=True, command="bilevel-study")
    assert resume_command(watched, Path("results/w")).endswith("--resume --name w --dashboard")
    bound = RunOptions(study="weekend", dashboard=True, dashboard_host="0.0.0.0", command="bilevel-study")
    assert resume_command(bound, Path("results/w")).endswith("--name w --dashboard-host 0.0.0.0")
