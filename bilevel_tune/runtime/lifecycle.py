"""A run's life on this machine: its exit status, scratch space that leaves no debris, signals that end it cleanly.

Exit status: 0 when every trial finished; 1 when a trial errored or the
cluster could no longer hold one; 2 for bad input (nothing written); 130
after Ctrl-C; 143 after SIGTERM. The first Ctrl-C (or SIGTERM) lets Tune
save every trial's state and the summary be written; a second one stops at
once — the records lose nothing either way, each generation being fsynced.

Scratch: Ray workers, W&B, torch and multiprocessing all put temporary files
under TMPDIR, and workers that are killed never remove theirs. A run points
TMPDIR (driver and workers) at a folder of its own and removes it at the end;
Ray keeps its own /tmp/ray (RAY_TMPDIR). Folders of runs that were killed
are swept by the next run.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path

EXIT_OK = 0
EXIT_ERRORED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143

SCRATCH_PREFIX = "bilevel_tune-"
_SCRATCH_NAME = re.compile(rf"^{SCRATCH_PREFIX}(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Scratch:
    """A run's own TMPDIR under the system temp folder, for this process and (through runtime_env) its workers."""

    def __init__(self):
        self.system_tmp = tempfile.gettempdir()
        self.ray_tmp = os.environ.get("RAY_TMPDIR") or self.system_tmp
        self.path = ""
        self._saved: dict[str, str | None] = {}
        self._saved_tempdir: str | None = None

    @staticmethod
    def sweep(folder: str) -> None:
        """Remove scratch folders whose run's process is gone."""
        for entry in Path(folder).glob(f"{SCRATCH_PREFIX}*"):
            match = _SCRATCH_NAME.match(entry.name)
            if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
                shutil.rmtree(entry, ignore_errors=True)

    def env(self) -> dict[str, str]:
        """What workers need: temporary files in the scratch folder, Ray's own where Ray keeps them."""
        return {"TMPDIR": self.path, "RAY_TMPDIR": self.ray_tmp}

    def __enter__(self) -> "Scratch":
        self.sweep(self.system_tmp)
        self.path = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=self.system_tmp)
        self._saved = {name: os.environ.get(name) for name in ("TMPDIR", "RAY_TMPDIR")}
        os.environ.update(self.env())
        self._saved_tempdir, tempfile.tempdir = tempfile.tempdir, self.path
        return self

    def __exit__(self, *exc) -> None:
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tempfile.tempdir = self._saved_tempdir
        shutil.rmtree(self.path, ignore_errors=True)


class Signals:
    """Which stop signal arrived; a second one (or any outside Tune's loop) stops at once.

    Tune's fit() installs its own SIGINT handler, which takes the first Ctrl-C
    (a graceful stop) and then hands SIGINT back to this one. SIGTERM — which
    Ray's driver handler would turn into exit 15 — is turned into that same
    graceful SIGINT the first time.
    """

    def __init__(self):
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    @property
    def exit_code(self) -> int | None:
        return {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED}.get(self.received)

    def _on_sigint(self, signum, frame):
        self.received = self.received or signal.SIGINT
        raise KeyboardInterrupt

    def _on_sigterm(self, signum, frame):
        if self.received is None:
            self.received = signal.SIGTERM
            os.kill(os.getpid(), signal.SIGINT)  # whoever holds SIGINT now stops gracefully
            return
        raise KeyboardInterrupt

    def note_tune_interrupt(self) -> None:
        """Tune consumed a Ctrl-C we never saw: it was one all the same."""
        self.received = self.received or signal.SIGINT

    def install(self) -> "Signals":
        """(Re)install the handlers: ray.init replaces SIGTERM's, so call this after it too."""
        if threading.current_thread() is threading.main_thread():
            for signum, handler in ((signal.SIGINT, self._on_sigint), (signal.SIGTERM, self._on_sigterm)):
                self._previous.setdefault(signum, signal.getsignal(signum))
                signal.signal(signum, handler)
        return self

    def restore(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
        self._previous.clear()
