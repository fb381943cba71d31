"""A study's live view (`--dashboard`): TensorBoard serving the run's curves for the study's lifetime, and the Ray Dashboard.

    with LiveView(run_dir / TENSORBOARD_DIR, host, log=scratch / "tensorboard.log") as view:
        out(view.line())                        # waits for its URL (or raises LiveViewError, one line)
        ray.init(include_dashboard=True, ...)   # the study's own Ray
        out(ray_dashboard_line(own_ray=True))
        ...                                     # the trials, the summary
    # TensorBoard has stopped

TensorBoard runs in a child process on a free port of `host` (loopback
unless `--dashboard-host` says otherwise). The child has a session of its
own, so a terminal's Ctrl-C reaches only the study, which stops it after
saving the trials; and it exits by itself once the study's process is gone,
so even a killed study leaves no server behind. Both URLs live as long as
the study: TensorBoard is its child, the Ray Dashboard its Ray's (a joined
cluster's outlives it). The event files stay in the run folder, for a
`tensorboard --logdir` later.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"
WILDCARDS = ("0.0.0.0", "::", "")
STARTUP_TIMEOUT_S = 60.0
RELOAD_S = 2  # how often TensorBoard looks for new points (its default is 5 s)
URL_LINE, ERROR_LINE = "url ", "error "  # what the child prints on its stdout, once


class LiveViewError(RuntimeError):
    """TensorBoard could not serve the run: one line for the user."""


class LiveView:
    """TensorBoard on `logdir` in a child process, from `__enter__` to `__exit__`."""

    def __init__(self, logdir: Path, host: str = LOOPBACK, log: Path | None = None):
        self.logdir = Path(logdir)
        self.host = host
        self.log = log
        self.url: str | None = None
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> "LiveView":
        stderr = open(self.log, "w") if self.log else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(self.logdir), "--host", self.host, "--parent", str(os.getpid())],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,  # the terminal's Ctrl-C is the study's to handle
            )
        finally:
            if self.log:
                stderr.close()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def wait_for_url(self, timeout_s: float = STARTUP_TIMEOUT_S) -> str:
        """The URL TensorBoard serves on, once it does; LiveViewError when it cannot."""
        if self.url:
            return self.url
        process = self._process
        deadline = time.monotonic() + timeout_s
        line = ""
        while not line and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], max(deadline - time.monotonic(), 0.0))
            if not ready:
                break
            line = process.stdout.readline()
            if not line:  # the child exited before saying anything
                break
        if line.startswith(URL_LINE):
            self.url = display_url(line.removeprefix(URL_LINE).strip(), self.host)
            return self.url
        if line.startswith(ERROR_LINE):
            reason = line.removeprefix(ERROR_LINE).strip()
        elif process.poll() is not None:
            reason = f"it exited with status {process.returncode}{self._last_log_line()}"
        else:
            reason = f"no answer within {timeout_s:.0f} s"
        self.stop()
        raise LiveViewError(f"--dashboard: TensorBoard cannot serve {self.logdir} on {self.host} ({reason})")

    def line(self) -> str:
        return (
            f"TensorBoard: {self.wait_for_url()} — every trial's curves while the study runs (it stops with the study)"
        )

    @property
    def serving(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Stop the server (its whole process group) and wait for it; a no-op once stopped."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
        process.stdout.close()

    def _last_log_line(self) -> str:
        if not self.log or not Path(self.log).is_file():
            return ""
        lines = [line for line in Path(self.log).read_text(errors="replace").splitlines() if line.strip()]
        return f": {lines[-1][:200]}" if lines else ""


def display_url(url: str, host: str) -> str:
    """The URL as a browser elsewhere would reach it: a wildcard bind shows the machine's name."""
    if host in WILDCARDS:
        for wildcard in ("0.0.0.0", "[::]"):
            url = url.replace(f"//{wildcard}:", f"//{socket.gethostname()}:")
    return url


def ray_dashboard_line(own_ray: bool) -> str:
    """The Ray Dashboard of the Ray this process is connected to, and how to get in (Ray 2.60 asks for a token).

    The study's own Ray's dashboard goes with it; a cluster's (`--address`) is the cluster's.
    """
    from bilevel_tune.runtime.ray_compat import dashboard_url

    url = dashboard_url()
    if not url:
        return "Ray Dashboard: this cluster runs none (`ray start --head --include-dashboard=true` starts one)"
    host, _, port = url.rpartition(":")
    if host in WILDCARDS:
        url = f"{socket.gethostname()}:{port}"
    token = Path.home() / ".ray" / "auth_token"
    how = f"paste the token from {token} when it asks" if _token_auth() else "no token needed"
    lifetime = "it stops with the study's Ray" if own_ray else "the cluster's own"
    return f"Ray Dashboard: http://{url} — the cluster, its actors and logs; {how} ({lifetime})"


def _token_auth() -> bool:
    """Does this Ray ask for a token (Ray 2.60's default; RAY_AUTH_MODE=disabled turns it off)?"""
    from bilevel_tune.runtime.ray_compat import token_auth_enabled

    return token_auth_enabled()


# -- the child: `python -m bilevel_tune.views.live_view LOGDIR --host H --parent PID` ------------------------
def serve(logdir: str, host: str, parent: int) -> int:
    """Serve TensorBoard on a free port of `host` until the parent process is gone (or a signal ends it)."""
    try:
        from tensorboard import program

        board = program.TensorBoard()
        board.configure(
            argv=[None, "--logdir", logdir, "--host", host, "--port", "0", "--load_fast", "false"]
            + ["--reload_interval", str(RELOAD_S)]
        )
        url = board.launch()
    except ImportError as err:
        print(f"{ERROR_LINE}TensorBoard is not installed ({err}); pip install tensorboard", flush=True)
        return 1
    except (OSError, program.TensorBoardServerException) as err:
        print(f"{ERROR_LINE}{getattr(err, 'msg', None) or err}", flush=True)
        return 1
    print(f"{URL_LINE}{url}", flush=True)
    while os.getppid() == parent:  # reparented: the study is gone
        time.sleep(1.0)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description="TensorBoard for a running study")
    parser.add_argument("logdir")
    parser.add_argument("--host", default=LOOPBACK)
    parser.add_argument("--parent", type=int, default=os.getppid())
    args = parser.parse_args(argv)
    return serve(args.logdir, args.host, args.parent)


if __name__ == "__main__":
    sys.exit(main())
