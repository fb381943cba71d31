"""The live view: each trial's curves under plain names, TensorBoard serving them while the study runs, and gone after.

The study tests read curves through TensorBoard's own HTTP data API, as its web page does.
"""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from contextlib import contextmanager

import psutil
import pytest

from bilevel_tune.cli.main import main
from bilevel_tune.core import metrics
from bilevel_tune.study_data.run_folder import TENSORBOARD_DIR
from bilevel_tune.views import curves
from bilevel_tune.views.live_view import LiveView, LiveViewError

from .inner_loops import HeldLoop
from .study_helpers import (
    REPO,
    curve_points,
    study_args,
    study_process,
    tensorboard_run,
    trial_records,
    wait_for,
)

REPORT = {
    metrics.OBJECTIVE: 0.31,
    metrics.BEST_OBJECTIVE: 0.33,
    metrics.OBJECTIVE_MEAN: 0.2,
    metrics.OBJECTIVE_STD: 0.05,
    metrics.SIGMA: 0.3,
    metrics.SEC_PER_GEN: 1.5,
    metrics.THREADS_OS: 41,
    metrics.RSS_MB: 512.0,
    metrics.GENERATION: 4,
    metrics.MEAN_RULE + "fixed_quota": 0.8,
    metrics.BEST_RULE + "fixed_quota": 0.85,
    f"{metrics.CANDIDATE}0/{metrics.OBJECTIVE}": 0.31,
    f"{metrics.CANDIDATE}0/fixed_quota": 0.86,
    f"{metrics.CANDIDATE}1/{metrics.OBJECTIVE}": float("nan"),  # a failed lake
    "trial_id": "abc",  # Tune's own keys are not curves
    "done": False,
}


def test_a_report_becomes_plainly_named_curves_with_rules_in_physical_units():
    tags = {tag: value for tag, value, _ in curves.trial_scalars(REPORT)}
    assert tags["objective/this_generation"] == 0.31 and tags["objective/best_so_far"] == 0.33
    assert tags["objective/population_mean"] == 0.2 and tags["objective/population_std"] == 0.05
    assert tags["search/sigma"] == 0.3 and tags["runtime/seconds_per_generation"] == 1.5
    assert tags["runtime/threads"] == 41 and tags["runtime/rss_mb"] == 512.0
    assert tags["rules/mean/fixed_quota"] == 0.8 and tags["rules/best_so_far/fixed_quota"] == 0.85
    assert not any(t.startswith("candidates/") for t in tags), "the candidates are histograms, not a card each"
    assert not any("trial_id" in t or "done" in t for t in tags)
    assert all(description for _, _, description in curves.trial_scalars(REPORT))
    # TensorBoard sorts groups by name: the objective's comes first
    assert sorted({t.split("/")[0] for t in tags})[0] == "objective"
    population = {tag: values for tag, values, _ in curves.population_histograms(REPORT)}
    assert population == {"population/objective": [0.31], "population/fixed_quota": [0.86]}  # the failed lake left out


def test_trial_curves_are_on_disk_when_the_report_returns_and_the_final_report_is_one_step_on(tmp_path):
    writers = curves.TrialCurveWriters(tmp_path)
    writers.report("weekend_pop2_1d_seed1", {**REPORT, metrics.GENERATION: 0})
    folder = tmp_path / TENSORBOARD_DIR / "weekend_pop2_1d_seed1"
    assert curve_points(tensorboard_run(folder), "objective/best_so_far") == [
        (0, pytest.approx(0.33))
    ]  # not closed yet
    writers.report("weekend_pop2_1d_seed1", {**REPORT, metrics.GENERATION: 1, metrics.BEST_OBJECTIVE: 0.4})
    writers.report("weekend_pop2_1d_seed1", {metrics.OBJECTIVE: 0.39, metrics.BEST_OBJECTIVE: 0.4, metrics.FINAL_BEST: 0.39})
    writers.close()
    acc = tensorboard_run(folder)
    assert [s for s, _ in curve_points(acc, "objective/best_so_far")] == [0, 1]
    assert curve_points(acc, "objective/final_best") == [(2, pytest.approx(0.39))]
    assert "population/objective" in acc.Tags()["tensors"]
    assert "custom_scalars__config__" in acc.Tags()["tensors"]
    assert [s for s, _ in curve_points(acc, "objective/this_generation")] == [0, 1], "the final report is no generation"
    assert acc.summary_metadata["objective/best_so_far"].summary_description.startswith("the best objective")


def tiny_png(width: int, height: int) -> bytes:
    """A valid RGBA PNG, white, built by hand."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff" * 4 * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def test_a_resumed_trials_replayed_generation_replaces_the_earlier_sessions_point(tmp_path):
    first = curves.TrialCurveWriters(tmp_path)
    for g in range(3):
        first.report("t", {**REPORT, metrics.GENERATION: g, metrics.OBJECTIVE: 0.1 * g})
    first.close()
    # a resumed session is a later process, its event file a later second's: TensorBoard reads a run's files in name
    # order, and two of one second and one process are ordered by a counter compared as text (…9 after …10)
    started = int(time.time())
    while int(time.time()) == started:
        time.sleep(0.05)
    resumed = curves.TrialCurveWriters(tmp_path)  # generation 2 was in flight: the next session runs it again
    for g in (2, 3):
        resumed.report("t", {**REPORT, metrics.GENERATION: g, metrics.OBJECTIVE: 0.5 + g})
    resumed.close()
    points = curve_points(tensorboard_run(tmp_path / TENSORBOARD_DIR / "t"), "objective/this_generation")
    assert points == [(0, 0.0), (1, pytest.approx(0.1)), (2, 2.5), (3, 3.5)]


def test_the_summary_board_holds_the_summarys_sections_and_its_plots(tmp_path):
    sections = [  # as the summary's list renders them (`Summary.markdown`), by section
        ("head", ["# Study weekend", "", "**SHORT RUN.**", ""]),
        ("grid", ["## Best objective grid (rows …)", "", "| a |", "|---|", "| 1 |", ""]),
        ("verdicts", ["## Verdicts (effects on the final re-evaluation)", "", "- ceiling: none."]),
    ]
    (tmp_path / "plots").mkdir()
    png = tiny_png(width=3, height=2)
    (tmp_path / "plots" / "grid_heatmap.png").write_bytes(png)
    folder = curves.write_summary_board(tmp_path, sections)
    folder = curves.write_summary_board(tmp_path, sections)  # rebuilt, not appended to
    assert len(list(folder.glob("events.*"))) == 1
    acc = tensorboard_run(folder)
    texts = {"summary/head", "summary/grid", "summary/verdicts"}
    assert set(acc.Tags()["tensors"]) == texts | {"plots/grid_heatmap"}
    (verdicts,) = acc.Tensors("summary/verdicts")
    assert b"- ceiling: none." in verdicts.tensor_proto.string_val[0]
    (image,) = acc.Tensors("plots/grid_heatmap")  # the image plugin's form: width, height, PNG
    assert list(image.tensor_proto.string_val) == [b"3", b"2", png]
    assert acc.summary_metadata["plots/grid_heatmap"].plugin_data.plugin_name == "images"


# -- the server -----------------------------------------------------------------------------------
def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def curve(url: str, run: str, tag: str) -> list[tuple[int, float]]:
    """A run's curve as TensorBoard's web page reads it: [(step, value)], empty while it has none."""
    query = urllib.parse.urlencode({"run": run, "tag": tag})
    try:
        return [(step, value) for _, step, value in get_json(f"{url}data/plugin/scalars/scalars?{query}")]
    except urllib.error.HTTPError:  # 400 until the run and tag exist
        return []


def refuses(url: str) -> bool:
    parsed = urllib.parse.urlparse(url)
    with socket.socket() as s:
        return s.connect_ex((parsed.hostname, parsed.port)) != 0


def servers_of(pid: int) -> list[psutil.Process]:
    """TensorBoard children a study (process `pid`) started, alive."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "bilevel_tune.views.live_view" in cmd and str(pid) in cmd:
            found.append(p)
    return found


def test_the_server_answers_with_new_points_and_stops(tmp_path):
    writers = curves.TrialCurveWriters(tmp_path)
    writers.report("t", {**REPORT, metrics.GENERATION: 0})
    with LiveView(tmp_path / TENSORBOARD_DIR) as view:
        url = view.wait_for_url()
        assert url.startswith("http://127.0.0.1:")
        assert wait_for(lambda: curve(url, "t", "objective/this_generation"), timeout=60) == [(0, pytest.approx(0.31))]
        writers.report("t", {**REPORT, metrics.GENERATION: 1, metrics.OBJECTIVE: 0.35})
        points = wait_for(lambda: [p for p in curve(url, "t", "objective/this_generation") if p[0] == 1], timeout=60)
        assert points == [(1, pytest.approx(0.35))]
    assert refuses(url) and not view.serving


def test_a_host_it_cannot_bind_is_one_line(tmp_path):
    with LiveView(tmp_path, host="203.0.113.7") as view:  # TEST-NET-3: an address no machine here has
        with pytest.raises(LiveViewError) as err:
            view.wait_for_url(timeout_s=60)
    assert "\n" not in str(err.value) and "203.0.113.7" in str(err.value) and "cannot serve" in str(err.value)


PARENT_SCRIPT = """
import sys, time
from bilevel_tune.views.live_view import LiveView
view = LiveView(sys.argv[1]).__enter__()
print(view.wait_for_url(), flush=True)
time.sleep(600)
"""


def test_a_killed_study_leaves_no_server_behind(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    url = parent.stdout.readline().strip()
    assert url.startswith("http://") and not refuses(url) and servers_of(parent.pid)
    parent.kill()
    parent.wait()
    parent.stdout.close()
    wait_for(lambda: refuses(url) and not servers_of(parent.pid), timeout=30)


# -- a study with --dashboard ---------------------------------------------------------------------
class Lines:
    """A process's output lines as they come (a reader thread), for a test that looks while it runs."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def first(self, prefix: str, timeout: float = 120) -> str:
        return wait_for(lambda: next((line for line in self.lines if line.startswith(prefix)), None), timeout)

    def text(self, timeout: float = 300) -> str:
        self.proc.wait(timeout=timeout)
        self.thread.join(timeout=10)
        return "\n".join(self.lines)


@contextmanager
def running(proc: subprocess.Popen):
    """A study process that a failing test does not leave running (held, or 100000 generations long)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _url(lines: Lines) -> str:
    return lines.first("TensorBoard: http").split()[1]


DASHBOARD_STUDY = {"population": 2, "optimize_params": "fixed_quota", "seed": 1, "wandb": "disabled"}
TRIAL = "weekend_pop2_1d-quota_seed1"


@pytest.mark.ray
def test_a_dashboard_study_serves_each_trials_curves_while_it_runs_and_stops_serving_at_its_end(tmp_path):
    hold = tmp_path / "hold"
    hold.touch()
    args = study_args(
        tmp_path, "--quick", "--dashboard", inner="tests.inner_loops:HeldLoop", outer_iters=3, **DASHBOARD_STUDY
    )
    with running(study_process(args, env={HeldLoop.HOLD_ENV: str(hold)})) as proc:
        lines = Lines(proc)
        url = _url(lines)
        dashboard = lines.first("Ray Dashboard: http://127.0.0.1:")
        assert "no token needed" in dashboard, "the test's Ray runs with RAY_AUTH_MODE=disabled"
        # held in its second generation: the study is running, and its first generation is on the page
        best = wait_for(lambda: curve(url, TRIAL, "objective/best_so_far"), timeout=120)
        assert proc.poll() is None and [step for step, _ in best] == [0]
        ((generations, _),) = trial_records(tmp_path / "run").values()
        (generation,) = generations
        assert best[0][1] == pytest.approx(generation[metrics.BEST_OBJECTIVE], rel=1e-6)
        tags = get_json(f"{url}data/plugin/scalars/tags")[TRIAL]
        assert {"objective/population_mean", "search/sigma", "runtime/threads", "runtime/rss_mb"} <= set(tags)
        assert {"rules/mean/fixed_quota"} <= set(tags) and not any(t.startswith("candidates/") for t in tags)
        hold.unlink()
        out = lines.text()
    assert proc.returncode == 0, out[-3000:]
    assert refuses(url) and not servers_of(proc.pid), "TensorBoard stops with the study"
    summary_run = tensorboard_run(tmp_path / "run" / TENSORBOARD_DIR / curves.SUMMARY_RUN)
    assert {"summary/answers", "summary/seed_noise", "plots/grid_heatmap"} <= set(summary_run.Tags()["tensors"])
    assert out.index("TensorBoard: http") < out.index("Ray Dashboard: http") < out.index("Trial status")


@pytest.mark.ray
def test_ctrl_c_stops_the_dashboards_server_too(tmp_path):
    args = study_args(tmp_path, "--quick", "--dashboard", inner="analytic", outer_iters=100000, **DASHBOARD_STUDY)
    with running(study_process(args)) as proc:
        lines = Lines(proc)
        url = _url(lines)
        wait_for(lambda: curve(url, TRIAL, "objective/this_generation"), timeout=120)
        proc.send_signal(signal.SIGINT)
        out = lines.text(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    assert refuses(url) and not servers_of(proc.pid)
    assert "--dashboard" in out.strip().splitlines()[-1], "the resume command keeps the live view"


def test_a_dashboard_host_it_cannot_bind_stops_the_study_before_anything_is_written(tmp_path, capsys):
    argv = ["weekend", "--quick", "--inner", "analytic", "--wandb", "disabled", "--results", str(tmp_path / "r")]
    assert main([*argv, "--dashboard-host", "203.0.113.7"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "TensorBoard cannot serve" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
    assert main([*argv, "--dashboard-host", "no host"]) == 2
    assert "--dashboard-host 'no host' must be a host name or an IP address" in capsys.readouterr().err
