"""Helpers for tests that run real studies."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from bilevel_tune.core import metrics
from bilevel_tune.study_data import run_lock
from bilevel_tune.study_data.run_folder import (
    GENERATIONS_FILE,
    KIND_FINAL,
    trial_name,
    trial_records,  # noqa: F401 - tests import it from here
)
from bilevel_tune.study_data.run_store import RunStore, append_record

REPO = Path(__file__).resolve().parent.parent
FAKE_KEY = "abcdef0123456789abcdef0123456789deadbeef"  # a W&B API key's shape


def write_trial_records(run_dir: Path, study, cell, generations: int, pace: float, final=None, folder_id: str = "abcde", **final_fields):
    """A trial's records as the trial writes them: one line a generation, then its final line (`final`: its score)."""
    folder = run_dir / f"{trial_name(study, cell)}_{folder_id}_{cell.seed:05d}"
    folder.mkdir(parents=True)
    who = {metrics.POPULATION: cell.population, metrics.OPTIMIZE_PARAMS: list(cell.optimize_params), metrics.SEED: cell.seed}
    for generation in range(generations):
        append_record(folder / GENERATIONS_FILE, {metrics.KIND: "generation", metrics.GENERATION: generation, metrics.SEC_PER_GEN: pace, **who})
    if final is not None:
        append_record(folder / GENERATIONS_FILE, {metrics.KIND: KIND_FINAL, metrics.FINAL_BEST: final, **who, **final_fields})
    return folder


@contextlib.contextmanager
def held_store(run_dir: Path, fresh: bool = False):
    """The run folder's store, writing, for as long as this test holds its lock (as a session does)."""
    with run_lock.held(run_dir, fresh=fresh, out=lambda line: None) as lock:
        yield RunStore(run_dir, lock)


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def study_args(results: Path, *flags: str, study: str = "weekend", name: str = "run", **options) -> list[str]:
    """CLI arguments for a test study: `population=2` becomes `--population 2`, flags pass as they are."""
    args = [study, *flags]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return [*args, "--results", str(results), "--name", name]


def raw_generation_lines(path: Path) -> list[int]:
    return [json.loads(line)["generation"] for line in path.read_text().splitlines() if '"kind": "generation"' in line]


def wait_for(predicate, timeout: float, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"condition not met within {timeout} s")


def study_process(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return command_process([sys.executable, "-m", "bilevel_tune.study", *args], env)


def command_process(command: list[str], env: dict | None = None) -> subprocess.Popen:
    """A command run from the repository, as a user would (a printed resume command, say)."""
    return subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a SIGKILL of the group takes Ray's children too
    )


def interrupt(proc: subprocess.Popen, sig=signal.SIGINT, timeout: float = 120) -> str:
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=timeout)
    return out


def kill_inner_actor_after(
    run_dir: Path, generations: int, timeout: float = 300, trial: str = ""
) -> tuple[threading.Thread, dict]:
    """Start a thread that SIGKILLs a trial's inner-loop actor once `generations` are recorded.

    The trial: the first whose folder name starts with `trial` (default: the only one).
    """
    killed: dict = {}

    def watch_and_kill():
        def recorded():
            recs = [r for name, r in trial_records(run_dir).items() if name.startswith(trial)]
            gens = recs[0][0] if recs else []
            return gens[-1] if len(gens) >= generations else None

        row = wait_for(recorded, timeout=timeout, interval=0.05)
        killed["pid"] = row[metrics.PID]
        os.kill(row[metrics.PID], signal.SIGKILL)

    thread = threading.Thread(target=watch_and_kill, daemon=True)
    thread.start()
    return thread, killed


def tensorboard_run(folder: Path):
    """A TensorBoard run read as TensorBoard's server reads it: every point kept, orphaned ones purged."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    run = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    run.Reload()
    return run


def curve_points(run, tag: str) -> list[tuple[int, float]]:
    """[(step, value)] of a scalar curve of a `tensorboard_run`."""
    from tensorboard.util import tensor_util

    return [(e.step, tensor_util.make_ndarray(e.tensor_proto).item()) for e in run.Tensors(tag)]
