"""The package outside the checkout: a wheel, installed into a fresh virtualenv, runs the built-in studies from any folder."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest

from .study_helpers import REPO

pytestmark = pytest.mark.install


def run(command, cwd, env=None) -> str:
    done = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_wheel_lists_and_plans_the_weekend_study_from_another_folder(tmp_path):
    # built from a copy of the sources: a build leaves build/ and *.egg-info beside them
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns(
        ".venv*", ".git", "results", "build", "*.egg-info", "__pycache__", ".*_cache", "wandb", "runs", ".frozen",
        ".pytest-shared",
    )  # a working machine's runs and frozen clones too: not the package's sources
    shutil.copytree(REPO, source, ignore=ignore)
    wheels = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, source], cwd=tmp_path)
    (wheel,) = wheels.glob("bilevel_tune-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    python, study = venv / "bin" / "python", venv / "bin" / "bilevel-study"
    run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], cwd=tmp_path)
    # The heavy dependencies (Ray, torch, …) from this environment, read-only, without its editable bilevel_tune:
    # a path in a .pth file is appended to sys.path, and the .pth files inside it are not run.
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path).strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    installed = run([python, "-c", "import bilevel_tune; print(bilevel_tune.__file__)"], cwd=elsewhere)
    assert installed.startswith(str(venv)), installed  # the wheel's copy, not the checkout's

    listed = [line.split()[0] for line in run([study, "--list"], cwd=elsewhere).splitlines()]
    assert {"weekend", "ceiling"} <= set(listed), listed
    env = {"BILEVEL_CACHE_DIR": str(tmp_path / "cache"), "RAY_AUTH_MODE": "disabled"}
    plan = run([study, "weekend", "--dry-run", "--inner", "analytic"], cwd=elsewhere, env=env)
    assert "study weekend (bilevel_tune.studies/weekend.toml)" in plan and plan.strip().splitlines()[-1].startswith(
        "ETA "
    )

    mine = elsewhere / "mine.toml"  # a user's own study file, by path
    mine.write_text(
        'name = "mine"\n[grid]\npopulation = [2]\noptimize_params = [["fixed_quota"]]\nseed = [1]\n[budget]\ngenerations = 2\n'
    )
    plan = run([study, str(mine), "--dry-run", "--inner", "analytic"], cwd=tmp_path, env=env)
    assert "mine_pop2_1d-quota_seed1" in plan

    # docs/worlds.md's example world and study file, copied into an empty folder, run as they are with real APPO
    page = (REPO / "docs" / "worlds.md").read_text()
    example = tmp_path / "example"
    example.mkdir()
    (example / "tragedy.py").write_text(re.search(r"```python\n(.*?)```", page, re.S).group(1))
    (example / "tragedy.toml").write_text(re.search(r"```toml\n(.*?)```", page, re.S).group(1))
    out = run([study, "tragedy.toml", "--quick", "--scan", "2", "--wandb", "disabled"], cwd=example, env=env)
    assert "4 finished, 0 errored, 0 interrupted of 4 trials" in out, out  # two ES runs, a scan of each mechanism
    (run_folder,) = (example / "results").iterdir()
    assert "[world] herders 3, horizon 20" in (run_folder / "summary.md").read_text()
    scan = pd.read_csv(run_folder / "scan.csv")  # the rules scan trained real APPO on the ParallelEnv per point
    assert len(scan) == 2 + 4 and scan["objective"].notna().all() and scan["final_objective"].notna().all()
    refused = subprocess.run(
        [study, "tragedy.toml", "--quick", "--inner", "analytic"], cwd=example, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "offers no myopic_actions" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
