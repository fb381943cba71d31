"""PolicyActor: the RLlib APPO inner loop, rebuilt every generation without leaking.

Per generation the trainable calls `reset(rules, seed)` (a fresh APPO
Algorithm whose env hosts one lake per candidate, module `cand{k}` per
candidate, same initial weights every time), `train()` K times, then
`evaluate(seeds)` (explore off, fixed seeds, after every queued learner
update is applied), which returns per-candidate outcomes
(`objective.candidate_outcomes`) and a thread/memory census.

Leak-free reset (DESIGN §5): APPO's local learner runs a `_LearnerThread`.
Ray ≥ 2.56 joins it in `algo.stop()`; older releases leave it alive (on
2.53 spinning in a 10 kHz sleep loop). `stop_algorithm` stops the
Algorithm, verifies the thread is dead and otherwise stops it by hand;
when it cannot confirm the stop (RLlib's private names moved) it says so,
and the owner replaces the actor so a leak never accumulates.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from bilevel_tune.evaluation import census, evaluate_policy
from bilevel_tune.objective import ObjectiveWeights
from bilevel_tune.world import Rules, WorldConfig
from bilevel_tune.world.env import FreshWaterEnv, module_for_agent, module_id

logger = logging.getLogger(__name__)
STOP_MODES = ("leak-free", "none")
LEARNER_JOIN_TIMEOUT_S = 5.0
DRAIN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class InnerLoopConfig:
    """The inner loop's world and APPO settings (defaults: the PR's)."""

    num_farms: int = 5
    horizon: int = 150
    smoothing: float = 0.0
    hidden: tuple[int, ...] = (256, 256)
    lr: float = 1e-3
    gamma: float = 0.99
    entropy_coeff: float = 0.001
    grad_clip: float = 40.0
    econ_weight: float = 1.0
    sus_weight: float = 0.0
    # "none" skips the stop and keeps old algorithms referenced, as Ray < 2.56 effectively
    # did: the leaking "before" of benchmarks/leak.py and the test that proves the census can fail.
    stop_mode: str = "leak-free"

    def __post_init__(self):
        WorldConfig(self.num_farms, self.horizon, self.smoothing)  # validates the world fields
        ObjectiveWeights(self.econ_weight, self.sus_weight)
        if not self.hidden or any(int(h) < 1 for h in self.hidden):
            raise ValueError(f"hidden={self.hidden!r} must be a non-empty list of layer sizes ≥ 1")
        if self.stop_mode not in STOP_MODES:
            raise ValueError(f"stop_mode={self.stop_mode!r} is unknown; allowed: {', '.join(STOP_MODES)}")

    @property
    def world(self) -> WorldConfig:
        return WorldConfig(self.num_farms, self.horizon, self.smoothing)

    @property
    def weights(self) -> ObjectiveWeights:
        return ObjectiveWeights(self.econ_weight, self.sus_weight)


# -- RLlib edge: building, stopping, census ---------------------------------
def learner_thread_class():
    try:
        from ray.rllib.algorithms.impala.impala_learner import _LearnerThread
    except ImportError:  # RLlib moved it: the census cannot count, the stop cannot be confirmed
        return None
    return _LearnerThread


def build_algorithm(config: InnerLoopConfig, rules: Sequence[Rules], seed: int):
    """APPO, new API stack, local learner, sampling in this process, one module per candidate."""
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    population = len(rules)
    env_config = {
        "num_farms": config.num_farms,
        "horizon": config.horizon,
        "smoothing": config.smoothing,
        "rules": [r.as_dict() for r in rules],
        "seed": int(seed),
    }
    modules = {
        module_id(k): RLModuleSpec(model_config={"fcnet_hiddens": list(config.hidden)}) for k in range(population)
    }
    training = dict(
        gamma=config.gamma,
        lr=config.lr,
        entropy_coeff=config.entropy_coeff,
        grad_clip=config.grad_clip,
        vtrace=True,
        train_batch_size_per_learner=config.horizon,  # one fragment of the whole population (env steps)
        num_epochs=1,
    )
    appo = APPOConfig()
    if hasattr(appo, "use_circular_buffer"):  # absent on Ray 2.53
        # A plain queue blocks instead of sleep-polling, can be drained exactly, and samples no unseeded RNG.
        training["use_circular_buffer"] = False
    algo_config = (
        appo.api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .environment(FreshWaterEnv, env_config=env_config)
        .framework("torch")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=config.horizon)
        .learners(num_learners=0)
        .training(**training)
        .multi_agent(policies=set(modules), policy_mapping_fn=module_for_agent)
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=modules))
        .reporting(min_time_s_per_iteration=0, metrics_num_episodes_for_smoothing=1)
        # log_sys_usage=False: no UtilMonitor thread, whose join costs ~0.6 s at every stop
        .debugging(seed=int(seed), log_level="ERROR", log_sys_usage=False)
    )
    return algo_config.build_algo() if hasattr(algo_config, "build_algo") else algo_config.build()


def local_learner(algo):
    group = getattr(algo, "learner_group", None)
    return getattr(group, "_learner", None)


def learner_thread_of(algo) -> threading.Thread | None:
    return getattr(local_learner(algo), "_learner_thread", None)


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
            thread.stopped = True
            queue = getattr(thread, "_in_queue", None)
            if queue is not None:
                (queue.add if hasattr(queue, "add") else queue.put_nowait)(_WakeUp())
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
    learner = local_learner(algo)
    queue = getattr(learner, "_learner_thread_in_queue", None)
    if queue is None:
        return
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


def greedy_fractions(modules: Sequence[Any], obs: np.ndarray) -> np.ndarray:
    """Explore-off actions of each candidate's module for its (1, 11) observation, in [0, 1]."""
    import torch
    from ray.rllib.core.columns import Columns

    out = np.empty(len(modules))
    with torch.no_grad():
        for k, module in enumerate(modules):
            dist_inputs = module.forward_inference({Columns.OBS: torch.from_numpy(obs[k : k + 1])})[
                Columns.ACTION_DIST_INPUTS
            ]
            action = module.get_inference_action_dist_cls().from_logits(dist_inputs).to_deterministic().sample()
            # RLlib's env runner unsquashes actions from [-1, 1] to the Box [0, 1] (normalize_actions=True)
            out[k] = (np.clip(float(action.reshape(-1)[0]), -1.0, 1.0) + 1.0) / 2.0
    return out


def quiet_rllib() -> None:
    """RLlib warns on every build (new API stack, env re-registered, gputil); once is plenty."""
    import warnings

    for name in ("ray.rllib", "ray.tune", "ray.util", "ray._common"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*Overriding environment.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)


# -- the inner loop ------------------------------------------------------------
class PolicyLoop:
    """Owns one APPO Algorithm at a time; the body of the Ray actor `PolicyActor`."""

    def __init__(self, config: InnerLoopConfig):
        quiet_rllib()
        self.config = config
        self.algo = None
        self.rules: list[Rules] = []
        self._kept: list[Any] = []  # stop_mode "none" only: old algorithms stay referenced
        self._frozen = False
        self.stop_confirmed = True

    def reset(self, rules: Sequence[dict[str, float]], seed: int) -> bool:
        """Fresh policies for these candidates' rules; False when the old learner's stop is unconfirmed."""
        self.stop_confirmed = self._release()
        self.rules = [Rules.from_physical(r) for r in rules]
        self.algo = build_algorithm(self.config, self.rules, seed)
        return self.stop_confirmed

    def train(self) -> dict[str, float]:
        result = self.algo.train()
        learners = result.get("learners", {})
        return {
            "env_steps": float(result.get("num_env_steps_sampled_lifetime", 0) or 0),
            "modules_trained": float(len(learners)),
        }

    def evaluate(self, seeds: Sequence[int]) -> dict[str, Any]:
        """Explore-off evaluation on fixed seeds, after every queued update is applied."""
        drain_learner(self.algo)
        learner = local_learner(self.algo)
        module_set = learner.module if learner is not None else self.algo.get_module()
        modules = [module_set[module_id(k)] for k in range(len(self.rules))]
        outcomes = evaluate_policy(
            self.config.world, self.config.weights, self.rules, seeds, lambda obs: greedy_fractions(modules, obs)
        )
        return {"candidates": outcomes, "census": self.census()}

    def census(self) -> dict[str, float]:
        return census(learner_thread_class())

    def stop(self) -> bool:
        confirmed = self._release()
        self._kept.clear()
        gc.collect()
        return confirmed

    def _release(self) -> bool:
        algo, self.algo = self.algo, None
        if algo is None:
            return True
        if self.config.stop_mode == "none":
            self._kept.append(algo)
            return True
        confirmed = stop_algorithm(algo)
        del algo
        gc.collect()  # an Algorithm is a web of cycles; without this RSS creeps up between full collections
        if not self._frozen:
            # What is alive now (torch, the modules RLlib imports on its first build) lives as long as
            # the actor: freezing it lets every later collection scan only new objects (~1 ms, not ~0.3 s).
            gc.freeze()
            self._frozen = True
        return confirmed


def make_policy_actor(config: InnerLoopConfig, num_cpus: float = 1):
    """Start a PolicyActor (a Ray actor around PolicyLoop) holding `num_cpus` of its trial's bundle."""
    import ray

    return ray.remote(PolicyLoop).options(num_cpus=num_cpus, max_restarts=0).remote(config)
