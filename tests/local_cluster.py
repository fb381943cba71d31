"""A real two-node Ray cluster on this machine, for the cluster tests.

The head node (`ray start --head`) and a worker node (`ray start --address`)
each run in a process group of their own, with their own temp folder. The
worker runs in a mount namespace of its own (`unshare -m`, which needs root)
with a private tmpfs over /tmp — its own /tmp, as on another machine (a
checkout under /tmp stays visible) — and,
on request, over folders it must not share with the head (a results root
that only looks shared). Nodes are stopped by killing their process groups
(never `ray stop`, which would end every Ray on the machine); the head's
temp folder, where `ray start` records the cluster's address, is removed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 90
WORKER_IP = "127.0.0.2"  # its own address, so a driver on this machine always attaches to the head
# The head notices a killed node after 3 refused health checks a second apart, not Ray's default of about
# 15-30 s; a live node under load still answers within the 3 s each check allows.
FAST_DEATH_NOTICE = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "3000",
    "RAY_health_check_failure_threshold": "3",
}


def can_make_nodes() -> str | None:
    """None when this machine can run the worker node; else why not."""
    if os.geteuid() != 0:
        return "a worker node in its own mount namespace needs root (unshare -m); CI runs as root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(log: Path, text: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the node exited ({proc.returncode}): {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.3)
    raise TimeoutError(f"the node did not start within {START_TIMEOUT_S} s: {log.read_text(errors='replace')[-2000:]}")


def _wait_for_file(path: Path, proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text().strip()):
            return text
        if proc.poll() is not None:
            raise RuntimeError(f"the node exited ({proc.returncode}) before writing {path}")
        time.sleep(0.1)
    raise TimeoutError(f"{path} did not appear within {START_TIMEOUT_S} s")


def _private_tmp() -> list[str]:
    """Shell commands giving the worker a /tmp of its own, with the checkout and its Python still visible.

    A checkout (or virtualenv) under /tmp would vanish under the new tmpfs: it is
    bind-mounted aside first, then back into place.
    """
    under_tmp = sorted({p for p in (REPO, Path(sys.prefix).resolve()) if p.is_relative_to("/tmp")})
    keep = [p for p in under_tmp if not any(p != q and p.is_relative_to(q) for q in under_tmp)]
    aside = [f"/run/bt-keep-$$-{i}" for i in range(len(keep))]
    return [
        *(f"mkdir -p {a} && mount --bind {shlex.quote(str(p))} {a}" for p, a in zip(keep, aside)),
        "mount -t tmpfs tmpfs /tmp",
        *(f"mkdir -p {shlex.quote(str(p))} && mount --bind {a} {shlex.quote(str(p))}" for p, a in zip(keep, aside)),
        *(f"umount {a} && rmdir {a}" for a in aside),
    ]


class LocalCluster:
    def __init__(self, head_cpus: int = 1):
        # short paths: Ray's unix sockets live under the temp folder (107 characters at most)
        self.head_tmp = tempfile.mkdtemp(prefix="bt-head-", dir="/tmp")
        self.port = _free_port()
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", **FAST_DEATH_NOTICE}
        log = Path(self.head_tmp) / "start.log"
        self.head = subprocess.Popen(
            [RAY, "start", "--head", "--block", f"--num-cpus={head_cpus}", f"--port={self.port}",
             f"--temp-dir={self.head_tmp}", "--include-dashboard=false"],
            stdout=open(log, "w"), stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
        )  # fmt: skip
        self.worker: subprocess.Popen | None = None
        try:
            _wait_for(log, "Ray runtime started", self.head)
            # `ray start` prints that line a moment before it writes the address file
            self.address = _wait_for_file(Path(self.head_tmp, "ray_current_cluster"), self.head)
        except BaseException:
            self.stop()  # never leave a head node behind
            raise
        self.worker_node_id = ""
        self.worker_log = Path(self.head_tmp) / "worker.log"

    def start_worker(self, cpus: int = 2, private: tuple[Path, ...] = ()) -> None:
        """A worker node with its own /tmp and, over each of `private`, an empty folder of its own."""
        mounts = " && ".join([*_private_tmp(), *(f"mount -t tmpfs tmpfs {p}" for p in private)])
        command = (
            f"{mounts} && mkdir -p /tmp/bt-worker && exec {RAY} start --block --address={self.address} "
            f"--num-cpus={cpus} --node-ip-address={WORKER_IP} --temp-dir=/tmp/bt-worker"
        )
        self.worker = subprocess.Popen(
            ["unshare", "-m", "sh", "-c", command],
            stdout=open(self.worker_log, "w"), stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
        )  # fmt: skip
        _wait_for(self.worker_log, "Ray runtime started", self.worker)
        self.worker_node_id = self._node_id_at(WORKER_IP)

    def _node_id_at(self, ip: str) -> str:
        """The id of the node at `ip`, asked of the cluster by a short-lived driver."""
        script = (
            "import ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
            "print([n['NodeID'] for n in ray.nodes() if n['Alive'] and n['NodeManagerAddress'] == %r][0])"
        ) % (self.address, ip)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=self.env, timeout=120)
        return done.stdout.strip().splitlines()[-1]

    def kill_worker(self) -> None:
        """The worker node dies at once: SIGKILL to its whole process group, no cleanup."""
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(timeout=30)
        self.worker = None

    def stop(self) -> None:
        self.kill_worker()
        if self.head.poll() is None:
            os.killpg(self.head.pid, signal.SIGKILL)
            self.head.wait(timeout=30)
        shutil.rmtree(self.head_tmp, ignore_errors=True)
