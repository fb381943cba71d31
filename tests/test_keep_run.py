"""A run folder kept in history at a hand-in comes back whole: docs/results/keep-run.sh commits what changed since
the base and the overlays before it and removes it again, and restore-run.sh rebuilds the folder on another clone —
files the run removed since (a replaced checkpoint) stay removed. Run on a scratch git repository."""

import os
import shutil
import subprocess

import pytest

from .study_helpers import REPO

SCRIPTS = ("restore-run.sh", "keep-run.sh")
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def _run(args, cwd, check=True):
    env = {**os.environ, **GIT_IDENTITY}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _git(repo, *args):
    return _run(["git", *args], repo).stdout.strip()


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _folder(root):
    """Every file under root (relative path → text), the session's lock and W&B's mirror aside."""
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in (".session.lock", ".manifest") and "wandb" not in p.parts
    }


@pytest.fixture
def campaign(tmp_path):
    """A repository with the two scripts, a stage's folder committed as the base, and runs/ ignored."""
    repo = tmp_path / "repo"
    (repo / "docs" / "results").mkdir(parents=True)
    for script in SCRIPTS:
        shutil.copy2(REPO / "docs" / "results" / script, repo / "docs" / "results" / script)
    _write(repo, {
        ".gitignore": "/runs/\n",
        "campaign/results/demo/study.json": '{"stages": [1]}\n',
        "campaign/results/demo/trial_a/checkpoint_000001/es_state.json": "generation 10\n",
        "campaign/results/demo/trial_a/result.json": "gen 1\ngen 10\n",
    })
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    return repo, _git(repo, "rev-parse", "HEAD")


def _restore(repo, *commits):
    return _run(["docs/results/restore-run.sh", "demo", commits[0], "campaign/results/demo", *commits[1:]], repo)


def _keep(repo, *commits, check=True):
    return _run(["docs/results/keep-run.sh", "demo", "keep demo", commits[0], "campaign/results/demo", *commits[1:]],
                repo, check=check)


def _overlay_commit(kept):
    return next(line.split()[1] for line in kept.stdout.splitlines() if line.startswith("overlay "))


def test_two_hand_ins_kept_then_restored_on_a_fresh_clone(campaign, tmp_path):
    repo, base = campaign
    _restore(repo, base)
    live = repo / "runs" / "demo"
    # the run goes on: a newer checkpoint replaces the old one, a stage begins, W&B mirrors it, a session holds it
    shutil.rmtree(live / "trial_a" / "checkpoint_000001")
    _write(live, {
        "trial_a/checkpoint_000002/es_state.json": "generation 20\n",
        "trial_a/result.json": "gen 1\ngen 10\ngen 20\n",
        "trial_b/result.json": "gen 1\n",
        "trial_b/wandb/offline-run/run.wandb": "mirror\n",
        ".session.lock": "pid 1\n",
    })
    first = _overlay_commit(_keep(repo, base))
    kept = set(_git(repo, "show", "--name-only", "--format=", first).splitlines())
    assert kept == {
        "runs/demo/.manifest", "runs/demo/trial_a/checkpoint_000002/es_state.json",
        "runs/demo/trial_a/result.json", "runs/demo/trial_b/result.json",
    }, "only what changed since the base, with the manifest; no mirror, no lock"
    assert _git(repo, "ls-files", "runs") == "" and _git(repo, "status", "--porcelain") == ""
    assert "kept in history at " + first[:7] in _git(repo, "log", "-1", "--format=%s")

    # the next hand-in: one more generation, trial_b's result replaced; only those two files are new
    _write(live, {"trial_a/result.json": "gen 1\ngen 10\ngen 20\ngen 21\n", "trial_b/result.json": "gen 1\ngen 2\n"})
    second = _overlay_commit(_keep(repo, base, first))
    assert set(_git(repo, "show", "--name-only", "--format=", second).splitlines()) == {
        "runs/demo/.manifest", "runs/demo/trial_a/result.json", "runs/demo/trial_b/result.json",
    }

    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(repo), str(clone)], tmp_path)
    _restore(clone, base, first, second)
    restored = clone / "runs" / "demo"
    assert _folder(restored) == _folder(live)
    assert not (restored / "trial_a" / "checkpoint_000001").exists(), "the replaced checkpoint stays removed"


def test_keeping_refuses_staged_changes_and_commits_nothing(campaign, capsys):
    repo, base = campaign
    _restore(repo, base)
    _write(repo, {"notes.md": "half-done\n"})
    _git(repo, "add", "notes.md")
    head = _git(repo, "rev-parse", "HEAD")
    refused = _keep(repo, base, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0 and "changes are staged" in refused.stderr
    assert _git(repo, "rev-parse", "HEAD") == head


def test_keeping_names_a_missing_run_folder(campaign):
    repo, base = campaign
    refused = _keep(repo, base, check=False)
    assert refused.returncode == 2 and "no run folder" in refused.stderr and refused.stderr.count("\n") == 1
