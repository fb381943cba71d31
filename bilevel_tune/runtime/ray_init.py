"""Ray runtime: a Ray of the study's own (or the cluster at `address`), thread caps, quiet logs.

Thread caps are set three ways, because each pool reads its cap at a
different moment: environment variables in the driver (before numpy/torch
start their pools), the same variables in every worker through
runtime_env, and a worker setup hook (`worker_setup`) that applies
threadpoolctl inside each worker process. Torch's intra/inter-op caps are
applied where torch comes in (`cap_torch_threads`, called by the APPO
package on import), so that a numpy worker never pays for importing it.
Nothing is uploaded: the package is installed, runtime_env carries env
vars only (caps, quiet W&B, the run's scratch TMPDIR). `local_mode` is
never used (Ray ≥ 2.55 refuses it). Without an address, `ray.init` is told
to start a new local instance: a plain `ray.init()` would join whatever
cluster /tmp/ray/ray_current_cluster names, dead or alive.
"""

from __future__ import annotations

import _thread
import dataclasses
import logging
import os
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
CAP_ENV = "BILEVEL_THREAD_CAP"  # read by the worker hook for torch's pools
QUIET_TITLES_ENV = "BILEVEL_QUIET_PROCTITLE"


@dataclass(frozen=True)
class RuntimeConfig:
    address: str | None = None  # None: start a Ray of our own on this machine
    num_cpus: int | None = None  # our own Ray only; None = all cores
    thread_cap: int = 1
    quiet_proctitle: bool = sys.platform == "darwin"  # Ray's per-task setproctitle costs an XPC call on macOS
    include_dashboard: bool = False
    dashboard_host: str | None = None  # where the dashboard binds (None: Ray's default, loopback)
    log_to_driver: bool = True
    extra_env: tuple[tuple[str, str], ...] = ()  # more env vars for every worker (the run's scratch TMPDIR)

    def __post_init__(self):
        if not (isinstance(self.thread_cap, int) and self.thread_cap >= 1):
            raise ValueError(f"thread_cap={self.thread_cap!r} must be an integer ≥ 1")


# Workers do not inherit the driver's environment: quiet W&B's per-run console summary there too.
QUIET_ENV = {"WANDB_SILENT": "true", "WANDB_CONSOLE": "off"}


def thread_env(cap: int, quiet_proctitle: bool = False) -> dict[str, str]:
    env = {name: str(cap) for name in THREAD_ENV_VARS}
    env[CAP_ENV] = str(cap)
    if quiet_proctitle:
        env[QUIET_TITLES_ENV] = "1"
    return env


def cap_threads(cap: int) -> None:
    """Cap BLAS/OpenMP pools in this process (driver or worker), and torch's if torch is already here.

    Torch is not imported for it: a worker of the numpy inner loop never needs torch, and importing it costs
    each worker process a second. Where torch comes in, `cap_torch_threads` caps it (the APPO package calls it
    first thing); until then OMP_NUM_THREADS already holds its intra-op pool.
    """
    os.environ.update(thread_env(cap))
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=cap)
    if "torch" in sys.modules:
        cap_torch_threads()


def cap_torch_threads() -> None:
    """Cap torch's intra- and inter-op pools at this process's cap (none set: leave torch as it is)."""
    if CAP_ENV not in os.environ:
        return
    import torch

    cap = int(os.environ[CAP_ENV])
    torch.set_num_threads(cap)
    try:
        torch.set_num_interop_threads(cap)
    except RuntimeError:  # only settable before torch's first parallel work; then already fixed
        pass


def exit_when_an_exit_is_swallowed(unraisable) -> None:
    """`sys.unraisablehook` for workers: a SystemExit Python swallowed is signalled again, so the worker exits quietly.

    Ray's worker answers SIGTERM by raising SystemExit wherever the main thread is. Landing in a weakref callback
    or a `__del__`, Python cannot raise it: it prints "Exception ignored in" with a traceback, which reaches the
    driver's console, and the worker carries on until it is killed. SIGTERM sent again from a new thread runs
    Ray's handler once the callback has returned: sent from here, or from a thread this one waits to see started
    (`threading.Thread.start`), it would land inside the callback again; should it still, this hook sends it again.
    """
    if not issubclass(unraisable.exc_type, SystemExit):
        sys.__unraisablehook__(unraisable)
        return
    try:
        _thread.start_new_thread(os.kill, (os.getpid(), signal.SIGTERM))
    except RuntimeError:  # the interpreter is already shutting down: the exit is under way
        pass


def worker_setup() -> None:
    """Ray worker setup hook: apply the caps, exit quietly on SIGTERM, silence per-task process titles if asked."""
    sys.unraisablehook = exit_when_an_exit_is_swallowed
    if os.environ.get("TMPDIR"):  # the run's scratch folder: on another node it does not exist yet
        os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    cap_threads(int(os.environ.get(CAP_ENV, "1")))
    if os.environ.get(QUIET_TITLES_ENV) == "1":
        # Ray retitles the worker process on every task; no env var turns that off
        from bilevel_tune.runtime.ray_compat import silence_process_titles

        silence_process_titles()


def runtime_env(config: RuntimeConfig) -> dict:
    return {
        "env_vars": {**thread_env(config.thread_cap, config.quiet_proctitle), **QUIET_ENV, **dict(config.extra_env)},
        "worker_process_setup_hook": "bilevel_tune.runtime.ray_init.worker_setup",
    }


_own_node: str | None = None  # the node of the Ray this process started: its raylet and workers are our children


def init(config: RuntimeConfig = RuntimeConfig()) -> bool:
    """Start (or join) Ray with caps everywhere; True when this call connected, False if Ray was already up."""
    global _own_node
    import ray

    cap_threads(config.thread_cap)
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    kwargs = dict(
        runtime_env=runtime_env(config),
        logging_level=logging.WARNING,
        log_to_driver=config.log_to_driver,
        configure_logging=True,
    )
    if config.address is None:
        if config.include_dashboard and config.dashboard_host:
            kwargs["dashboard_host"] = config.dashboard_host
        ray.init(address="local", num_cpus=config.num_cpus, include_dashboard=config.include_dashboard, **kwargs)
        _own_node = ray.get_runtime_context().get_node_id()
    else:
        ray.init(address=config.address, **kwargs)
    return True


def own_node() -> str | None:
    """The id of the node this process started Ray on, while that Ray is up; None on a cluster it joined."""
    import ray

    return _own_node if ray.is_initialized() else None


def shutdown() -> None:
    global _own_node
    import ray

    if ray.is_initialized():
        ray.shutdown()
    _own_node = None


@contextmanager
def scratch_ray(config: RuntimeConfig = RuntimeConfig()) -> Iterator[None]:
    """A Ray of this script's own whose temporary files (torch's, the workers') go to a scratch folder removed after.

    For scripts (benchmarks); a Ray already up in this process is used as it is, and left up.
    """
    from bilevel_tune.runtime.lifecycle import Scratch

    with Scratch() as scratch:
        started = init(dataclasses.replace(config, address=None, extra_env=(*config.extra_env, *scratch.env().items())))
        try:
            yield
        finally:
            if started:
                shutdown()
