"""The APPO inner loop (PolicyLoop; in its shard actor, the PolicyActor): RLlib, rebuilt every generation, leak-free.

Per generation its shard calls `reset(rules, seed, candidates)` — a fresh
APPO Algorithm whose env hosts one lake per candidate of the block, module
`cand{j}` per candidate, each module's initial weights drawn from
`candidate_seed(seed, k)` of its global index k, so they do not depend on
the block —, `train()` K times, then `evaluate(seeds)` (explore off, fixed
seeds, after every queued learner update is applied).

Leak-free reset (docs/inner-loop.md): APPO's local learner runs a
`_LearnerThread`. Ray ≥ 2.56 joins it in `algo.stop()`; older releases
leave it alive (on 2.53 spinning in a 10 kHz sleep loop). `stop_algorithm`
stops the Algorithm, verifies the thread is dead and otherwise stops it by
hand; when it cannot confirm the stop (RLlib's private names moved) reset
says so, and the shard is replaced so a leak never accumulates.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from typing import Any, Sequence

import numpy as np

from bilevel_tune.evaluation import evaluate_policy
from bilevel_tune.inner import InnerLoopConfig, candidate_seed
from bilevel_tune.objective import CandidateOutcome
from bilevel_tune.world import Rules
from bilevel_tune.world.env import FreshWaterEnv, module_for_agent, module_id

logger = logging.getLogger(__name__)
LEARNER_JOIN_TIMEOUT_S = 5.0
DRAIN_TIMEOUT_S = 60.0
INIT_SEED = "bilevel_init_seed"  # model_config key: the seed of a module's initial weights


# -- RLlib edge: building, stopping, census ---------------------------------
def learner_thread_class():
    try:
        from ray.rllib.algorithms.impala.impala_learner import _LearnerThread
    except ImportError:  # RLlib moved it: the census cannot count, the stop cannot be confirmed
        return None
    return _LearnerThread


_SEEDED_MODULE_CLASS = None


def seeded_module_class() -> type:
    """RLlib's APPO torch module, its weights initialised from the seed in its model_config.

    RLlib seeds torch once per build and builds modules in order, so the j-th
    module of a block would get the same weights in every block. Seeding each
    module's own setup (in a forked RNG, so exploration's stream is untouched)
    makes candidate k's initial weights a function of (generation seed, k).
    """
    global _SEEDED_MODULE_CLASS
    if _SEEDED_MODULE_CLASS is None:
        import torch
        from ray.rllib.algorithms.appo import APPOConfig

        base = APPOConfig().framework("torch").get_default_rl_module_spec().module_class

        def setup(self):
            seed = (self.model_config or {}).get(INIT_SEED)
            with torch.random.fork_rng(devices=[]):
                if seed is not None:
                    torch.manual_seed(int(seed))
                base.setup(self)

        cls = type("SeededAPPOModule", (base,), {"setup": setup, "__module__": __name__})
        globals()["SeededAPPOModule"] = _SEEDED_MODULE_CLASS = cls  # findable by name, should RLlib pickle it
    return _SEEDED_MODULE_CLASS


def build_algorithm(config: InnerLoopConfig, rules: Sequence[Rules], seed: int, candidates: Sequence[int] = ()):
    """APPO, new API stack, local learner, sampling in this process, one module per candidate.

    `candidates` are the block's global indices (default 0, 1, …): they seed each module's initial weights.
    """
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    population = len(rules)
    candidates = list(candidates) or list(range(population))
    env_config = {
        "num_farms": config.num_farms,
        "horizon": config.horizon,
        "smoothing": config.smoothing,
        "rules": [r.as_dict() for r in rules],
        "seed": int(seed),
    }
    module_class = seeded_module_class()
    modules = {
        module_id(j): RLModuleSpec(
            module_class=module_class,
            model_config={"fcnet_hiddens": list(config.hidden), INIT_SEED: candidate_seed(seed, k)},
        )
        for j, k in enumerate(candidates)
    }
    training = dict(
        gamma=config.discount,
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
    """Owns one APPO Algorithm at a time; a shard actor running it is the PolicyActor."""

    def __init__(self, config: InnerLoopConfig):
        quiet_rllib()
        self.config = config
        self.algo = None
        self.rules: list[Rules] = []
        self._kept: list[Any] = []  # stop_mode "none" only: old algorithms stay referenced
        self._frozen = False
        self.stop_confirmed = True

    def reset(self, rules: Sequence[dict[str, float]], seed: int, candidates: Sequence[int]) -> bool:
        """Fresh policies for these candidates' rules; False when the old learner's stop is unconfirmed."""
        self.stop_confirmed = self._release()
        self.rules = [Rules.from_physical(r) for r in rules]
        self.algo = build_algorithm(self.config, self.rules, seed, candidates)
        return self.stop_confirmed

    def train(self) -> dict[str, Any]:
        return self.algo.train()

    def evaluate(self, seeds: Sequence[int]) -> list[CandidateOutcome]:
        """Explore-off evaluation on fixed seeds, after every queued update is applied."""
        drain_learner(self.algo)
        learner = local_learner(self.algo)
        module_set = learner.module if learner is not None else self.algo.get_module()
        modules = [module_set[module_id(j)] for j in range(len(self.rules))]
        return evaluate_policy(
            self.config.world, self.config.weights, self.rules, seeds, lambda obs: greedy_fractions(modules, obs)
        )

    def learner_thread_class(self) -> type | None:
        """What the shard's census counts as learner threads."""
        return learner_thread_class()

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
