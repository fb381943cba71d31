"""The Ray worker setup: a numpy worker never imports torch, an APPO one caps torch's pools as torch comes in; a
SIGTERM whose SystemExit Python swallows still ends the worker, and prints no traceback."""

import os
import subprocess
import sys
import textwrap

from bilevel_tune.runtime import ray_init

SETUP_THEN_APPO = textwrap.dedent(
    """
    import sys
    from bilevel_tune.runtime import ray_init

    ray_init.worker_setup()
    print("torch" in sys.modules)
    import bilevel_tune.appo
    import torch

    print(torch.get_num_threads(), torch.get_num_interop_threads())
    """
)


def test_a_worker_imports_torch_only_with_the_appo_package_and_then_with_its_pools_capped():
    env = {**os.environ, **ray_init.thread_env(1)}  # what runtime_env gives every worker
    done = subprocess.run([sys.executable, "-c", SETUP_THEN_APPO], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "1", "1"], "torch: not imported by the setup; both pools at the cap"


# What a Ray worker does (its SIGTERM handler raises SystemExit), with the signal landing inside a weakref callback.
WORKER = textwrap.dedent(
    """
    import signal, sys, time, weakref
    from bilevel_tune.runtime import ray_init

    if sys.argv[1] == "hook":
        sys.unraisablehook = ray_init.exit_when_an_exit_is_swallowed

    def sigterm_handler(signum, frame):
        raise SystemExit(1)

    def callback_interrupted_by_sigterm(ref):
        raise SystemExit(1)  # where the handler's exception surfaces when the signal lands here

    signal.signal(signal.SIGTERM, sigterm_handler)

    class Anything:
        pass

    thing = Anything()
    ref = weakref.ref(thing, callback_interrupted_by_sigterm)
    del thing
    time.sleep(2)
    print("still running")
    """
)


def run_worker(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WORKER, mode], capture_output=True, text=True, timeout=60)


def test_a_sigterm_swallowed_in_a_callback_still_ends_the_worker_and_prints_no_traceback():
    plain = run_worker("plain")  # what Python does alone: the exit is lost, a traceback printed
    assert plain.returncode == 0 and "still running" in plain.stdout and "Exception ignored in" in plain.stderr
    hooked = run_worker("hook")
    assert hooked.returncode == 1 and hooked.stdout == "" and hooked.stderr == ""
