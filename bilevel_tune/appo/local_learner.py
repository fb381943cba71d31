"""APPO's local learner: its thread stopped without a leak, its queue drained, its trained module read.

Leak-free stop (docs/inner-loop.md): APPO's local learner runs a
`_LearnerThread`. Ray ≥ 2.56 joins it in `algo.stop()`; older releases
leave it alive (on 2.53 spinning in a 10 kHz sleep loop). `stop_algorithm`
stops the Algorithm, verifies the thread is dead and otherwise stops it by
hand; when it cannot confirm the stop (RLlib's private names moved) the
loop's reset says so, and the shard is replaced so a leak never accumulates.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

from bilevel_tune.runtime.ray_compat import (  # noqa: F401 - learner_thread_class, local_learner: the loops' names for them
    learner_queue,
    learner_thread,
    learner_thread_class,
    local_learner,
    stop_thread_by_hand,
)

logger = logging.getLogger(__name__)
LEARNER_JOIN_TIMEOUT_S = 5.0
DRAIN_TIMEOUT_S = 60.0


def learner_thread_of(algo) -> threading.Thread | None:
    return learner_thread(local_learner(algo))


class _WakeUp:
    """A queue item that wakes a blocked learner thread; CircularBuffer asks dropped items for env_steps()."""

    def env_steps(self) -> int:
        return 0


def stop_learner_thread(thread: threading.Thread, timeout: float = LEARNER_JOIN_TIMEOUT_S) -> bool:
    """Stop RLlib's learner thread by hand; True once it has exited."""
    if thread.is_alive():
        if hasattr(thread, "request_stop"):  # Ray ≥ 2.54 (`stopped` is read-only on 2.60)
            thread.request_stop()
        else:  # Ray 2.53: set the flag, then wake the thread with one item
            stop_thread_by_hand(thread, _WakeUp)
        thread.join(timeout)
    return not thread.is_alive()


def stop_algorithm(algo) -> bool:
    """algo.stop(), then make sure the learner thread is gone; True when confirmed."""
    thread = learner_thread_of(algo)
    algo.stop()
    if thread is None:
        return False
    return thread.is_alive() is False or stop_learner_thread(thread)


def drain_learner(algo, timeout: float = DRAIN_TIMEOUT_S) -> None:
    """Wait until every queued batch has been applied by the learner thread."""
    queue = learner_queue(local_learner(algo))
    if hasattr(queue, "join"):  # a plain queue.Queue (Ray ≥ 2.54 with use_circular_buffer=False): exact
        queue.join()
        return
    # A CircularBuffer (Ray 2.53) has no join: it is drained once it is empty *and* the thread
    # is back in sample()'s wait loop, so no update is half-applied.
    thread = learner_thread_of(algo)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(queue) == 0 and (thread is None or not thread.is_alive() or _waiting_in_sample(thread)):
            return
        time.sleep(0.001)
    logger.warning("learner queue not drained after %.0f s; evaluating anyway", timeout)


def _waiting_in_sample(thread: threading.Thread) -> bool:
    frame = sys._current_frames().get(thread.ident)
    return frame is not None and frame.f_code.co_name == "sample"


def trained_module(algo, module_id: str):
    """The learner's copy of a module (the env runner's may lag an update behind): what evaluation reads."""
    return local_learner(algo).module[module_id]
