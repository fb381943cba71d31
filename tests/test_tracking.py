"""W&B: a dead server costs seconds, not 30 minutes, and the key stays out of the run folder (and, with the summary's
run, out of the output: tests/test_lifecycle.py); credentials and modes."""

from pathlib import Path

import pytest

from bilevel_tune.tune_edge.tracking import TrackingError, load_key_file, resolve_wandb_mode

from .study_helpers import FAKE_KEY, files_containing, study_args, study_process

pytestmark = pytest.mark.ray
TINY = {"inner": "analytic", "population": 2, "seed": 1, "optimize_params": "min_demand_frac", "outer_iters": 3}


def test_an_unreachable_wandb_server_is_a_bounded_wait_and_the_data_stays_local(tmp_path):
    env = {"WANDB_API_KEY": FAKE_KEY, "WANDB_BASE_URL": "http://127.0.0.1:9"}  # a closed port
    proc = study_process(study_args(tmp_path, **TINY, wandb="online"), env=env)
    out, _ = proc.communicate(timeout=400)  # Tune's default upload wait alone is 1800 s
    assert proc.returncode == 0, out[-2000:]
    assert "finished, 0 errored, 0 interrupted" in out
    assert list((tmp_path / "run").glob("*/wandb/*run-*")), "the W&B run stays on disk for a later `wandb sync`"
    assert files_containing(tmp_path, FAKE_KEY.encode()) == []


def test_key_file_and_modes(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "")  # so that monkeypatch restores the original afterwards
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    assert resolve_wandb_mode("auto", key_dirs=[tmp_path]) == "offline"
    with pytest.raises(TrackingError, match="needs credentials"):
        resolve_wandb_mode("online", key_dirs=[tmp_path])
    (tmp_path / ".wandb.env").write_text(f"# W&B\nexport WANDB_API_KEY='{FAKE_KEY}'\n")
    assert load_key_file([tmp_path]) and resolve_wandb_mode("auto", key_dirs=[tmp_path]) == "online"
    assert resolve_wandb_mode("disabled", key_dirs=[tmp_path]) == "disabled"


def test_wandb_login_credentials_in_netrc_count_without_a_network_call(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_BASE_URL", raising=False)
    netrc = tmp_path / "netrc"
    monkeypatch.setenv("NETRC", str(netrc))
    assert resolve_wandb_mode("auto", key_dirs=[tmp_path]) == "offline"
    netrc.write_text(f"machine api.wandb.ai\n  login user\n  password {FAKE_KEY}\n")
    netrc.chmod(0o600)
    assert resolve_wandb_mode("auto", key_dirs=[tmp_path]) == "online"
    assert resolve_wandb_mode("online", key_dirs=[tmp_path]) == "online"
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")  # a private server: its own netrc entry
    assert resolve_wandb_mode("auto", key_dirs=[tmp_path]) == "offline"


def test_the_summary_run_carries_the_answers_and_every_figure(tmp_path, monkeypatch):
    """Real W&B, offline: the study's summary run holds the Answers and ceiling tables and each figure."""
    import shutil

    from bilevel_tune.report.pipeline import summarise
    from bilevel_tune.study_data.run_store import open_store
    from bilevel_tune.tune_edge.tracking import log_summary

    monkeypatch.setenv("WANDB_MODE", "offline")
    run = tmp_path / "ceiling-appo"
    shutil.copytree(Path(__file__).resolve().parent.parent / "docs" / "results" / "ceiling-appo", run)
    tables = [*summarise(open_store(run)).tables(), "trials.csv"]  # as the study names them: its sections' own
    assert log_summary(run, "offline", group="g", tags=["study:ceiling"], tables=tables) is None
    media = {p.name.split("_")[0] for p in run.glob("wandb/offline-run-*/files/media/*/summary/*")}
    assert {"answers", "ceiling", "trials"} <= media
    pictures = {p.name.rsplit("_", 2)[0] for p in run.glob("wandb/offline-run-*/files/media/images/summary/*.png")}
    assert {"best_so_far_evaluations", "final_pairs", "ceiling"} <= pictures


def test_the_summary_run_survives_an_earlier_runs_scratch_removing_wandbs_media_folder(tmp_path, monkeypatch):
    """W&B first imported during an earlier study in this process (a notebook's second study): its media folder
    was that study's scratch, gone at its end; the next summary run still carries its figures."""
    import shutil

    from wandb.sdk.data_types import _private

    from bilevel_tune.tune_edge.tracking import log_summary

    monkeypatch.setenv("WANDB_MODE", "offline")
    run = tmp_path / "weekend-analytic"
    shutil.copytree(Path(__file__).resolve().parent.parent / "docs" / "results" / "weekend-analytic", run)
    shutil.rmtree(_private.MEDIA_TMP.name)
    assert log_summary(run, "offline", group="g", tables=["answers.csv"]) is None
    assert list(run.glob("wandb/offline-run-*/files/media/images/summary/*.png"))
    assert list(run.glob("wandb/offline-run-*/files/media/table/summary/answers*"))


def test_the_checkouts_key_file_counts_from_any_folder(tmp_path, monkeypatch):
    """`.wandb.env` beside the README is read wherever the study is run from (the checkout's root, not the package's)."""
    from bilevel_tune.cli import resolve
    from bilevel_tune.cli.options import RunOptions

    assert resolve.REPO_ROOT == Path(__file__).resolve().parents[1], "the checkout: where README and .wandb.env live"
    monkeypatch.setenv("WANDB_API_KEY", "")
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    checkout, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    checkout.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(resolve, "REPO_ROOT", checkout)
    assert resolve.wandb_mode(RunOptions(study="weekend")) == "offline"
    (checkout / ".wandb.env").write_text(f"WANDB_API_KEY={FAKE_KEY}\n")
    assert resolve.wandb_mode(RunOptions(study="weekend")) == "online"
