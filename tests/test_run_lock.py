"""One run folder, one session: a second session on a folder a live one holds is refused in one line, a lock left by
a killed session is taken over, on this host by its process and from another host by its heartbeat."""

import json
import os
import socket
import subprocess
import sys
import threading

import pytest

from bilevel_tune.cli.main import main
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.run_folder import RunFolderError

from .study_helpers import study_args, study_process, wait_for


def write_lock(folder, **holder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / run_lock.RUN_LOCK).write_text(json.dumps({"beat": 0, "started_utc": "then", **holder}))


def gone_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_live_session_on_this_host_keeps_its_folder(tmp_path):
    lock = run_lock.acquire(tmp_path)
    try:
        with pytest.raises(run_lock.LockError, match=rf"in use by another session \(pid {os.getpid()} on host"):
            run_lock.acquire(tmp_path)
    finally:
        lock.release()
    assert not (tmp_path / run_lock.RUN_LOCK).exists()
    run_lock.acquire(tmp_path).release()  # released: free again


def test_a_lock_whose_process_is_gone_is_taken_over_with_a_line(tmp_path):
    write_lock(tmp_path, host=socket.gethostname(), pid=gone_pid(), process_start=1.0)
    said = []
    lock = run_lock.acquire(tmp_path, out=said.append)
    assert len(said) == 1 and "took over the lock of a session that is gone (pid" in said[0]
    assert json.loads((tmp_path / run_lock.RUN_LOCK).read_text())["pid"] == os.getpid()
    lock.release()


def test_a_reused_pid_is_another_process(tmp_path):
    """The pid is alive (this test's own), but started at another time: the lock's session is gone."""
    write_lock(tmp_path, host=socket.gethostname(), pid=os.getpid(), process_start=12.0)
    said = []
    run_lock.acquire(tmp_path, out=said.append).release()
    assert said and "took over" in said[0]


@pytest.mark.skipif(
    run_lock._start_since_boot(os.getpid()) is None,
    reason="needs /proc (Linux): elsewhere a lock is judged by its wall-clock start, as the tests above check",
)
def test_a_live_session_keeps_its_folder_through_a_correction_of_the_clock(tmp_path):
    """The lock of a live process whose wall-clock start has moved 20 s since it was written (Linux derives it from
    the boot time, which a correction of the clock moves) is still held: judged by the start in ticks since boot.
    Another start in ticks (a reused pid), or another boot, is a gone session's."""
    boot, ticks = run_lock._start_since_boot(os.getpid())
    me = {"host": socket.gethostname(), "pid": os.getpid(), "process_start": run_lock._process_start(os.getpid()) - 20}
    write_lock(tmp_path, **me, boot_id=boot, start_ticks=ticks)
    with pytest.raises(run_lock.LockError, match="in use by another session"):
        run_lock.acquire(tmp_path)
    assert run_lock.holder(tmp_path)[0]
    for other in ({"boot_id": boot, "start_ticks": ticks + 1}, {"boot_id": "another boot", "start_ticks": ticks}):
        write_lock(tmp_path, **me, **other)
        assert not run_lock.holder(tmp_path)[0]
        said = []
        run_lock.acquire(tmp_path, out=said.append).release()
        assert said and "took over" in said[0]


def test_another_hosts_lock_is_judged_by_its_heartbeat(tmp_path):
    write_lock(tmp_path, host="node-2", pid=1)
    beating = threading.Event()

    def beat():  # node-2's session, alive: it rewrites its heartbeat
        count = 0
        while not beating.wait(0.05):
            count += 1
            write_lock(tmp_path, host="node-2", pid=1, beat=count)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    with pytest.raises(run_lock.LockError, match="pid 1 on host node-2"):
        run_lock.acquire(tmp_path, watch_s=0.5)
    beating.set()
    thread.join()
    said = []  # its heartbeat stopped: the session is gone
    run_lock.acquire(tmp_path, out=said.append, watch_s=0.5).release()
    assert said and "pid 1 on host node-2" in said[0]


def test_the_holder_beats_and_never_overwrites_a_lock_not_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(run_lock, "HEARTBEAT_S", 0.05)
    lock = run_lock.acquire(tmp_path)
    path = tmp_path / run_lock.RUN_LOCK
    wait_for(lambda: json.loads(path.read_text())["beat"] >= 2, timeout=5, interval=0.02)
    write_lock(tmp_path, host="node-2", pid=1)  # taken (wrongly judged stale): the old holder must not write over it
    lock._thread.join(timeout=5)
    assert not lock._thread.is_alive() and json.loads(path.read_text())["host"] == "node-2"
    lock.release()
    assert path.exists(), "a release leaves another session's lock alone"


def test_a_fresh_run_makes_its_folder_and_removes_it_when_nothing_was_written(tmp_path):
    run = tmp_path / "results" / "run"
    with run_lock.held(run, fresh=True):
        assert (run / run_lock.RUN_LOCK).is_file()
    assert not (tmp_path / "results").exists()
    with run_lock.held(run, fresh=True):
        (run / "study.json").write_text("{}")
    assert sorted(p.name for p in run.iterdir()) == ["study.json"]
    with pytest.raises(RunFolderError, match="exists; --resume continues it"):
        with run_lock.held(run, fresh=True):
            pass


@pytest.mark.ray
def test_two_sessions_on_one_name_give_one_exit_0_and_one_exit_2(tmp_path, capsys):
    args = study_args(tmp_path, "--quick", name="same", inner="analytic", wandb="disabled", outer_iters=10,
                      population=1, optimize_params="min_demand_frac", seed=1)  # one trial: the lock is the point  # fmt: skip
    first = study_process(args)
    lock = tmp_path / "same" / run_lock.RUN_LOCK
    wait_for(lock.is_file, timeout=60, interval=0.05)
    assert main(args) == 2  # a second fresh run of the name
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run folder" in err and "exists; --resume continues it" in err
    resume = ["weekend", "--resume", "--name", "same", "--results", str(tmp_path), "--wandb", "disabled"]
    wait_for(lambda: (tmp_path / "same" / "study.json").is_file(), timeout=60, interval=0.05)
    assert main(resume) == 2  # a resume while the first session runs
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is in use by another session (pid" in err
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0, out[-2000:]
    assert not lock.exists() and len(list((tmp_path / "same").glob("weekend_*"))) == 1  # one session's trial
