"""One run folder, one session: a lock file taken before anything is written in the folder, held to the end.

    with run_lock.held(run_dir, fresh=True, out=print):
        ...  # the session: study.json, Tune, the summary

`RUN_LOCK` (JSON: host, pid, the process's start time, when it started,
and a heartbeat count) is created with O_EXCL, so of two sessions on one
folder exactly one holds it; the other is refused in one line (`LockError`,
exit 2) and the first is untouched. A fresh run makes its folder with the
lock (so a second fresh run of the same `--name` finds it taken) and
removes the folder again if it ends before writing anything else.

A lock left by a session that was killed is *stale* and taken over, with a
line that says so. How staleness is judged (docs/running.md):

* the lock names this host: stale when no process has its pid and start
  time (a reused pid is another process). On Linux the start is the
  boot's id and the process's start in clock ticks since boot, which no
  correction of the wall clock moves: a start in wall-clock seconds is
  derived there from the boot time, which moves with each correction (a
  VM's clock stepped 20 s in two hours on 2026-12-06, and a live
  session's lock read as a gone one's);
* it names another host (a cluster's node sharing the results root): the
  holder rewrites its heartbeat every `HEARTBEAT_S`; stale when the
  heartbeat does not move while this session watches it for
  `STALE_AFTER_S`. No two hosts' clocks are compared, only the file.

Taking over renames the stale lock aside first, which only one of two
racing sessions can do; the other then finds the new live lock.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from bilevel_tune.study_data.run_folder import RunFolderError

RUN_LOCK = ".session.lock"
HEARTBEAT_S = 10.0
STALE_AFTER_S = 3 * HEARTBEAT_S


class LockError(RunFolderError):
    """A live session holds the run folder; one line for the user."""


def _process_start(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None


def _start_since_boot(pid: int) -> tuple[str, int] | None:
    """(this boot's id, the process's start in clock ticks since boot) on Linux: fixed while the process lives,
    whatever the wall clock does; None elsewhere, or for no such process."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    after_name = stat[stat.rindex(")") + 2 :].split()  # the fields after (comm), which may hold spaces: field 3 on
    return boot, int(after_name[19])  # starttime is field 22


def _me() -> dict:
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "process_start": _process_start(os.getpid()),
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "beat": 0,
    }
    since_boot = _start_since_boot(os.getpid())
    if since_boot is not None:
        me.update(boot_id=since_boot[0], start_ticks=since_boot[1])
    return me


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # being written, or unreadable: judged by its heartbeat like another host's


def _alive_here(holder: dict) -> bool:
    pid = int(holder.get("pid", -1))
    if "start_ticks" in holder:  # Linux: exact, and no clock correction moves it
        return _start_since_boot(pid) == (holder.get("boot_id"), holder["start_ticks"])
    start = _process_start(pid)  # elsewhere (or a lock written before start_ticks): the wall-clock start
    return start is not None and (holder.get("process_start") is None or abs(start - holder["process_start"]) < 1.0)


def _stale(path: Path, holder: dict, watch_s: float) -> bool:
    """Is the session that wrote this lock gone? (see the module's docstring)"""
    if holder.get("host") == socket.gethostname():
        return not _alive_here(holder)
    deadline = time.monotonic() + watch_s
    while time.monotonic() < deadline:
        time.sleep(min(1.0, watch_s))
        now = _read(path)
        if now is None or now.get("beat") != holder.get("beat") or now.get("pid") != holder.get("pid"):
            return False  # it beat (or was released or taken): alive, or someone else's now
    return True


def _describe(holder: dict) -> str:
    return f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, since {holder.get('started_utc', '?')}"


class RunLock:
    """The lock this session holds: beats in a daemon thread, released at the end."""

    def __init__(self, path: Path, me: dict):
        self.path, self.me = path, me
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="run-lock-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            holder = _read(self.path)
            if not holder or holder.get("pid") != self.me["pid"] or holder.get("host") != self.me["host"]:
                return  # not ours any more: never overwrite another session's lock
            self.me["beat"] += 1
            tmp = self.path.with_name(f"{RUN_LOCK}.{self.me['pid']}.tmp")
            tmp.write_text(json.dumps(self.me))
            os.replace(tmp, self.path)

    def holds(self) -> bool:
        """Does this session still hold the folder (its lock file names this process)?"""
        holder = _read(self.path)
        return bool(holder) and holder.get("pid") == self.me["pid"] and holder.get("host") == self.me["host"]

    def release(self) -> None:
        self._stop.set()
        holder = _read(self.path)
        if holder and holder.get("pid") == self.me["pid"] and holder.get("host") == self.me["host"]:
            self.path.unlink(missing_ok=True)


def acquire(run_dir: Path, out: Callable[[str], None] = print, watch_s: float = STALE_AFTER_S) -> RunLock:
    """Hold the run folder's lock, taking over a stale one; LockError when a live session holds it."""
    path = Path(run_dir) / RUN_LOCK
    me = _me()
    for _ in range(3):  # a race lost while taking over a stale lock: look again
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _read(path)
            if holder is None:
                continue  # released meanwhile
            if not _stale(path, holder, watch_s):
                raise LockError(
                    f"run folder {run_dir} is in use by another session ({_describe(holder)}); wait for it to end, "
                    "or stop it first"
                ) from None
            aside = path.with_name(f"{RUN_LOCK}.stale-{me['pid']}")
            try:
                os.rename(path, aside)  # only one of two racing sessions renames it
            except FileNotFoundError:
                continue
            aside.unlink(missing_ok=True)
            out(f"run folder {run_dir}: took over the lock of a session that is gone ({_describe(holder)})")
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(me))
        lock = RunLock(path, me)
        lock._thread.start()
        return lock
    raise LockError(f"run folder {run_dir}: another session keeps taking its lock; try again")


@contextlib.contextmanager
def held(run_dir: Path, fresh: bool, out: Callable[[str], None] = print) -> Iterator[RunLock]:
    """The session's hold on its run folder; a fresh run makes the folder (refused when it exists) and removes it
    again if the session ends before writing anything beside the lock."""
    run_dir = Path(run_dir)
    made = [p for p in (run_dir, *run_dir.parents) if not p.exists()]  # the folders a fresh run makes, deepest first
    if fresh:
        try:
            run_dir.mkdir(parents=True)
        except FileExistsError:
            raise RunFolderError(
                f"run folder {run_dir} exists; --resume continues it, or choose another --name"
            ) from None
    try:
        lock = acquire(run_dir, out)
    except BaseException:
        if fresh:
            _remove(made)
        raise
    try:
        yield lock
    finally:
        lock.release()
        if fresh and run_dir.is_dir() and not any(p.name != RUN_LOCK for p in run_dir.iterdir()):
            _remove(made)  # the session wrote nothing: as if it never ran


def _remove(made: list[Path]) -> None:
    """Remove the folders a fresh run made, deepest first, each only when empty (but the lock)."""
    for folder in made:
        (folder / RUN_LOCK).unlink(missing_ok=True)
        try:
            folder.rmdir()
        except OSError:
            return


def holder(run_dir: Path) -> tuple[bool, str]:
    """Is a session holding the folder, and who, in one line — judged at once: a session of this host by its
    process; another host's by when its heartbeat last changed the file, against `STALE_AFTER_S` (for --status; a
    resume still watches the heartbeat before it takes a lock over)."""
    path = Path(run_dir) / RUN_LOCK
    found = _read(path)
    if found is None:
        return False, "no session holds it"
    if found.get("host") == socket.gethostname():
        if _alive_here(found):
            return True, f"a session holds it ({_describe(found)})"
        return False, f"its lock names a session that is gone ({_describe(found)}): the next --resume takes it over"
    try:
        age = time.time() - path.stat().st_mtime
    except OSError:
        age = 0.0  # released or rewritten while being read
    if age > STALE_AFTER_S:
        gone = f"its lock, from another host, has not beaten for {age:.0f} s ({_describe(found)})"
        return False, f"{gone}: that session looks gone"
    return True, f"a session on another host holds it ({_describe(found)}; its heartbeat {age:.0f} s ago)"
