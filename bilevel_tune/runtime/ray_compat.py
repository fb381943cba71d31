"""Every private name of Ray this project reads, in one place, each with what it is for.

Ray's public API does not offer these; each one below is used by exactly one
feature. When a Ray release moves one, its function raises `RayCompatError`
naming the name, the Ray version and the feature — never a silent "off".
`PRIVATE_NAMES` lists them for tests/test_ray_compat.py, which resolves every
one on the installed Ray (a fast test: a version bump that moves one fails
there first). Optional ones are features of newer Rays that older ones
lack by design (not a move): their absence has a documented meaning.

Lazy imports only: this module imports no Ray at import time, so the Tune
edge and the RLlib edge both use it without importing each other.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable


class RayCompatError(RuntimeError):
    """A private Ray name this release of bilevel_tune relies on has moved; one line for the user."""


@dataclass(frozen=True)
class PrivateName:
    module: str
    name: str  # an attribute of the module; or "Class.self._attribute", set in that class's source
    purpose: str
    optional: bool = False  # absent from older Rays by design, with a documented meaning


PRIVATE_NAMES = (
    PrivateName("ray.train._internal.session", "get_session", "a trial's stop request while a generation runs"),
    PrivateName("ray.tune.tuner", "Tuner.self._local_tuner", "a resumed session's own trackers, retries, concurrency"),
    PrivateName(
        "ray.tune.impl.tuner_internal", "TunerInternal.self._run_config", "a resumed session's trackers and retries"
    ),
    PrivateName("ray.tune.impl.tuner_internal", "TunerInternal.self._tune_config", "a resumed session's concurrency"),
    PrivateName("ray._common.utils", "get_ray_address_file", "--address auto: the cluster `ray start` recorded"),
    PrivateName("ray._private.worker", "global_worker", "the Ray Dashboard's address for --dashboard"),
    PrivateName(
        "ray._private.authentication.authentication_utils",
        "is_token_auth_enabled",
        "whether the Ray Dashboard asks for a token (absent before Ray's token authentication: no token)",
        optional=True,
    ),  # fmt: skip
    PrivateName("ray._private.utils", "setproctitle", "silencing per-task process titles (macOS)", optional=True),
    PrivateName("ray._raylet", "setproctitle", "silencing per-task process titles (macOS)", optional=True),
    PrivateName(
        "ray.air.integrations.wandb",
        "WandbLoggerCallback.self._trial_logging_actors",
        "ending the W&B runs of trials a stopped study leaves running",
    ),  # fmt: skip
    PrivateName(
        "ray.air.integrations.wandb",
        "WandbLoggerCallback._signal_logging_actor_stop",
        "ending the W&B runs of trials a stopped study leaves running",
    ),  # fmt: skip
    PrivateName("ray.rllib.algorithms.impala.impala_learner", "_LearnerThread", "the census's learner threads"),
    PrivateName("ray.rllib.core.learner.learner_group", "LearnerGroup.self._learner", "APPO's local learner"),
    PrivateName(
        "ray.rllib.algorithms.impala.impala_learner", "IMPALALearner.self._learner_thread", "the leak-free stop"
    ),
    PrivateName(
        "ray.rllib.algorithms.impala.impala_learner",
        "IMPALALearner.self._learner_thread_in_queue",
        "draining queued updates before evaluation",
    ),  # fmt: skip
)


def resolve(private: PrivateName) -> Any:
    """The named object (or, for an instance attribute, True once its class's source sets it); RayCompatError if gone."""
    try:
        module = importlib.import_module(private.module)
        if ".self." not in private.name:
            return functools.reduce(getattr, private.name.split("."), module)  # a name, or a class's method
        cls_name, attribute = private.name.split(".self.")
        assigned = re.compile(rf"self\.{attribute}\s*(:[^=\n]*)?=[^=]")  # plain or annotated assignment
        if not assigned.search(inspect.getsource(getattr(module, cls_name))):
            raise AttributeError(f"{cls_name} no longer sets self.{attribute}")
        return True
    except (ImportError, AttributeError, OSError, TypeError) as err:
        raise _moved(private, err) from None


def _moved(private: PrivateName, err: Exception | None = None) -> RayCompatError:
    import ray

    why = f" ({type(err).__name__}: {err})" if err else ""
    return RayCompatError(
        f"Ray {ray.__version__} moved {private.module}.{private.name}, which bilevel_tune needs for "
        f"{private.purpose}{why}; use a Ray this release supports (2.53–2.60) or a newer bilevel_tune"
    )


def _named(module: str, name: str) -> PrivateName:
    return next(p for p in PRIVATE_NAMES if p.module == module and p.name == name)


# -- Tune and Train ------------------------------------------------------------------------------
def trial_stop_requested() -> bool:
    """Has Tune asked the calling trial to stop? (Tune tells a function trainable only at its next report.)"""
    get_session = resolve(_named("ray.train._internal.session", "get_session"))
    session = get_session()
    if session is None:
        return False  # not inside a trial
    return session.stop_event.is_set()


def tuner_configs(tuner) -> tuple[Any, Any]:
    """A restored Tuner's (RunConfig, TuneConfig), to give a resumed session its own options."""
    internal = getattr(tuner, "_local_tuner", None)
    if internal is None:
        raise _moved(_named("ray.tune.tuner", "Tuner.self._local_tuner"))
    run_config, tune_config = getattr(internal, "_run_config", None), getattr(internal, "_tune_config", None)
    if run_config is None or tune_config is None:
        raise _moved(_named("ray.tune.impl.tuner_internal", "TunerInternal.self._run_config"))
    return run_config, tune_config


def end_wandb_runs_still_open(callback) -> list:
    """Send each W&B logging actor of Tune's `WandbLoggerCallback` still running the end a finished trial's gets;
    the trials whose runs were still open."""
    actors = getattr(callback, "_trial_logging_actors", None)
    if actors is None:
        raise _moved(_named("ray.air.integrations.wandb", "WandbLoggerCallback.self._trial_logging_actors"))
    signal_stop = resolve(_named("ray.air.integrations.wandb", "WandbLoggerCallback._signal_logging_actor_stop"))
    still_open = list(actors)
    for trial in still_open:
        signal_stop(callback, trial)
    return still_open


# -- Ray core ----------------------------------------------------------------------------------------
def ray_address_file() -> str:
    """The file `ray start` records its cluster's address in."""
    return resolve(_named("ray._common.utils", "get_ray_address_file"))(None)


def dashboard_url() -> str | None:
    """The connected Ray's dashboard address (host:port), or None when it runs none."""
    worker = resolve(_named("ray._private.worker", "global_worker"))
    return worker.node.address_info.get("webui_url")


def token_auth_enabled() -> bool:
    """Does this Ray ask for a token? A Ray before token authentication does not."""
    try:
        return resolve(_named("ray._private.authentication.authentication_utils", "is_token_auth_enabled"))()
    except RayCompatError:
        return False


def silence_process_titles() -> None:
    """Make Ray's per-task process retitling a no-op (wherever this Ray keeps its setproctitle)."""
    import setproctitle

    setproctitle.setproctitle = lambda title: None
    for private in (_named("ray._private.utils", "setproctitle"), _named("ray._raylet", "setproctitle")):
        try:
            module = importlib.import_module(private.module)
            if hasattr(module, private.name):
                setattr(module, private.name, lambda title: None)
        except (ImportError, AttributeError, TypeError):  # optional: a Ray without this copy retitles through the other
            pass


# -- RLlib's APPO learner ----------------------------------------------------------------------------------
def learner_thread_class() -> type:
    """RLlib's `_LearnerThread`: what the census counts as learner threads."""
    return resolve(_named("ray.rllib.algorithms.impala.impala_learner", "_LearnerThread"))


def local_learner(algo):
    """An Algorithm's local learner (num_learners=0)."""
    group = algo.learner_group
    if not hasattr(group, "_learner"):
        raise _moved(_named("ray.rllib.core.learner.learner_group", "LearnerGroup.self._learner"))
    return group._learner


def learner_thread(learner) -> threading.Thread | None:
    """The local learner's update thread (None before it is built)."""
    if not hasattr(learner, "_learner_thread"):
        raise _moved(_named("ray.rllib.algorithms.impala.impala_learner", "IMPALALearner.self._learner_thread"))
    return learner._learner_thread


def learner_queue(learner):
    """The queue the local learner's thread takes batches from."""
    if not hasattr(learner, "_learner_thread_in_queue"):
        raise _moved(
            _named("ray.rllib.algorithms.impala.impala_learner", "IMPALALearner.self._learner_thread_in_queue")
        )
    return learner._learner_thread_in_queue


def stop_thread_by_hand(thread: threading.Thread, wake_item: Callable[[], Any]) -> None:
    """Ray 2.53's learner thread has no request_stop(): set its `stopped` flag and wake it with one queue item."""
    thread.stopped = True
    queue = getattr(thread, "_in_queue", None)  # 2.53's name for the thread's own reference to the queue
    if queue is not None:
        (queue.add if hasattr(queue, "add") else queue.put_nowait)(wake_item())
