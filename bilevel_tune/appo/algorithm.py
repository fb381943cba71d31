"""The RLlib edge both APPO loops share: APPO's settings, building quietly, and a leak-free stop.

Leak-free stop (docs/inner-loop.md): APPO's local learner runs a
`_LearnerThread`. Ray ≥ 2.56 joins it in `algo.stop()`; older releases
leave it alive (on 2.53 spinning in a 10 kHz sleep loop). `stop_algorithm`
stops the Algorithm, verifies the thread is dead and otherwise stops it by
hand; when it cannot confirm the stop (RLlib's private names moved) the
loop's reset says so, and the shard is replaced so a leak never accumulates.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import time
from typing import Any

from bilevel_tune.inner import InnerLoopConfig
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


def appo_config(config: InnerLoopConfig, seed: int):
    """RLlib's APPOConfig with the study's APPO settings: new API stack, torch, local learner, sampling in-process."""
    from ray.rllib.algorithms.appo import APPOConfig

    training = dict(
        gamma=config.discount,
        lr=config.lr,
        entropy_coeff=config.entropy_coeff,
        grad_clip=config.grad_clip,
        vtrace=True,
        vtrace_clip_rho_threshold=config.vtrace_clip_rho_threshold,
        vtrace_clip_pg_rho_threshold=config.vtrace_clip_pg_rho_threshold,
        # fragments (seasons) of the whole block per batch, in env steps: one step advances every lake a day
        train_batch_size_per_learner=config.horizon * config.fragments_per_batch,
        num_epochs=1,
    )
    appo = APPOConfig()
    if hasattr(appo, "use_circular_buffer"):  # absent on Ray 2.53
        # A plain queue blocks instead of sleep-polling, can be drained exactly, and samples no unseeded RNG.
        training["use_circular_buffer"] = False
    return (
        appo.api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=config.horizon)
        .learners(num_learners=0)
        .training(**training)
        .reporting(min_time_s_per_iteration=0, metrics_num_episodes_for_smoothing=1)
        # log_sys_usage=False: no UtilMonitor thread, whose join costs ~0.6 s at every stop
        .debugging(seed=int(seed), log_level="ERROR", log_sys_usage=False)
    )


def algorithm_from(algo_config):
    """The Algorithm of a config: `build_algo` where RLlib has it, `build` in the releases before it."""
    return algo_config.build_algo() if hasattr(algo_config, "build_algo") else algo_config.build()


def env_config(config: InnerLoopConfig, rules, seed: int) -> dict[str, Any]:
    """The world of a block: one lake per candidate's rules (`world.env.parse_env_config` reads it)."""
    return {
        **dataclasses.asdict(config.world),
        "rules": [r.as_dict() for r in rules],
        "seed": int(seed),
    }


def quiet_rllib() -> None:
    """RLlib warns on every build (new API stack, env re-registered, gputil); once is plenty."""
    import warnings

    for name in ("ray.rllib", "ray.tune", "ray.util", "ray._common"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*Overriding environment.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)


# -- the learner thread ------------------------------------------------------------------
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
