"""The study CLI before anything runs: --dry-run, --list, and bad input (one line, exit 2, nothing written)."""

import subprocess
import sys

import pytest

from bilevel_tune.study import main

WEEKEND = ["weekend", "--wandb", "disabled"]


def test_dry_run_shows_the_eight_trials(capsys, tmp_path):
    assert main(["weekend", "--dry-run", "--results", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "8 trials = population [1, 16]" in out
    assert out.count("weekend_pop") == 8 and "rough ETA" in out and "placement group" in out
    assert "1000" in out and "300" in out
    assert not (tmp_path / "r").exists()


def test_dry_run_applies_overrides(capsys):
    assert (
        main(
            [
                "weekend",
                "--quick",
                "--dry-run",
                "--population",
                "16",
                "--seed",
                "1,2,3",
                "--optimize-params",
                "fixed_quota",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "3 trials" in out and "smoke-budget" in out and "weekend_pop16_1d_seed3" in out


def test_list(capsys):
    assert main(["--list"]) == 0
    assert "weekend" in capsys.readouterr().out


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
    (["weekend", "--set", "quota=0.9"], "unknown rule 'quota' in --set"),
    (["weekend", "--set", "risk_penalty_scale"], "must look like rule=value"),
    (["weekend", "--set", "risk_penalty_scale=high"], "value 'high' must be a number"),
    (["weekend", "--population", "0"], "--population=0 must be an integer ≥ 1"),
    (["weekend", "--population", "-2"], "--population=-2 must be an integer ≥ 1"),
    (["weekend", "--population", "3"], "--population=3 must be 1 or even"),
    (["weekend", "--population", "sixteen"], "--population 'sixteen' must be comma-separated integers"),
    (["weekend", "--outer-iters", "0"], "--outer-iters 0 must be ≥ 1"),
    (["weekend", "--inner-iters", "x"], "--inner-iters 'x' must be an integer"),
    (["weekend", "--seed", "-1"], "--seed=-1 must be an integer ≥ 0"),
    (["weekend", "--wandb", "cloud"], "invalid choice: 'cloud'"),
    (["weekend", "--budget", "slow"], "no budget 'slow'; it has: quick"),
    (["weekend", "--max-concurrent", "0"], "--max-concurrent 0 must be ≥ 1"),
    (["weekend", "--address", "nonsense"], "--address 'nonsense' must be host:port"),
    (["weekend", "--name", "../x"], "--name '../x' must be a plain folder name"),
    (["weekend", "--resume"], "--resume: no earlier run of study 'weekend'"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) or "no-study" for a, _ in BAD])
def test_bad_input_is_one_line_exit_2_nothing_written(argv, message, capsys, tmp_path):
    results = tmp_path / "results"
    assert main([*argv, "--results", str(results)] if argv else []) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert "Traceback" not in err
    assert not results.exists()


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
    monkeypatch.chdir(tmp_path)
    assert main(["weekend", "--wandb", "online", "--results", str(tmp_path / "r")]) == 2
    assert "needs an API key" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_resume_of_another_studys_run(tmp_path, capsys):
    run = tmp_path / "r" / "other-run"
    run.mkdir(parents=True)
    (run / "study.json").write_text('{"study": {"name": "other"}}')
    assert main([*WEEKEND, "--results", str(tmp_path / "r"), "--resume", "--name", "other-run"]) == 2
    assert "belongs to study 'other', not 'weekend'" in capsys.readouterr().err


def test_the_module_entry_point_exits_2_without_traceback():
    done = subprocess.run(
        [sys.executable, "-m", "bilevel_tune.study", "weekend", "--population", "5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        done.returncode == 2
        and done.stderr.strip() == "bilevel_tune.study: error: --population=5 must be 1 or even (antithetic pairs)"
    )


def test_an_unreachable_address_fails_fast(tmp_path, capsys):
    assert main([*WEEKEND, "--inner", "analytic", "--address", "127.0.0.1:1", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "--address 127.0.0.1:1: cannot connect to a Ray cluster (nothing answers at 127.0.0.1:1" in err
    )
    assert not (tmp_path / "r").exists()
