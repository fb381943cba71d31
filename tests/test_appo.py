"""The real APPO inner loops in real Ray actors: leak-free resets, caps, evaluation, shard-independent weights.

Both built-in APPO loops run here: `appo` (one population module) and
`appo-multiagent` (RLlib's per-agent path); tests/test_population.py
checks that they compute the same thing.
"""

import dataclasses

import numpy as np
import pytest
import ray

from bilevel_tune.inner import Shard, ShardedInnerLoop
from bilevel_tune.worlds.fresh_water import Rules

from .conftest import TEST_THREAD_CAP

pytestmark = [pytest.mark.ray, pytest.mark.slow]
TIGHT = Rules(fixed_quota=0.95, min_demand_frac=0.0, max_demand_frac=0.35).as_dict()
LOOSE = Rules(fixed_quota=0.6, min_demand_frac=0.35, max_demand_frac=1.0).as_dict()


APPO_LOOPS = ("appo", "appo-multiagent")


RESETS = 5  # a leak of one thread a reset shows at any count; each reset builds an RLlib algorithm


def census_over_resets(inner, loop="appo", generations=RESETS):
    """A PolicyActor (a shard running an APPO loop) through `generations` of reset → train → evaluate."""
    actor = ray.remote(Shard).options(num_cpus=1).remote(loop, inner)
    try:
        return [ray.get(actor.generation.remote([TIGHT, LOOSE], g, 0, [0], 1)).census for g in range(generations)]
    finally:
        ray.get(actor.stop.remote())
        ray.kill(actor)


def own_threads(c):
    """OS threads less gRPC's self-scaling pools, which come and go whatever our code does."""
    return c.threads_os - c.threads_grpc


@pytest.mark.parametrize("loop", APPO_LOOPS)
def test_census_is_flat_over_resets_and_the_leaking_variant_grows(ray_cluster, tiny_inner, loop):
    flat = census_over_resets(tiny_inner, loop)
    assert max(c.learner_threads for c in flat) <= 1
    assert own_threads(flat[-1]) - own_threads(flat[0]) == 0
    leaking = census_over_resets(dataclasses.replace(tiny_inner, stop_mode="none"), loop)
    assert leaking[-1].learner_threads == RESETS
    assert own_threads(leaking[-1]) - own_threads(leaking[0]) >= RESETS - 1  # one learner thread a reset, at least


@pytest.mark.parametrize(
    "build", ("appo.population:build_population_algorithm", "appo.multiagent:build_multiagent_algorithm")
)
def test_by_hand_stop_ends_rllibs_own_learner_thread(ray_cluster, tiny_inner, build):
    import importlib

    from bilevel_tune.appo.local_learner import learner_thread_of, stop_learner_thread

    module, _, name = build.partition(":")
    algo = getattr(importlib.import_module(f"bilevel_tune.{module}"), name)(tiny_inner, [Rules()], seed=0)
    try:
        algo.train()
        thread = learner_thread_of(algo)
        assert type(thread).__name__ == "_LearnerThread" and thread.is_alive()
        assert stop_learner_thread(thread, timeout=5.0)
        assert not thread.is_alive()
    finally:
        algo.stop()


def test_thread_caps_scratch_tmpdir_and_the_quiet_exit_hold_inside_workers_and_the_actor(ray_cluster, scratch):
    @ray.remote(num_cpus=1)
    def pools():
        import sys
        import tempfile

        __import__("bilevel_tune.appo")  # as an APPO inner loop starts: torch's pools capped as torch comes in
        import torch
        from threadpoolctl import threadpool_info

        return {
            "torch": torch.get_num_threads(),
            "interop": torch.get_num_interop_threads(),
            "blas": {i["num_threads"] for i in threadpool_info()},
            "tmp": tempfile.gettempdir(),
            "unraisable": sys.unraisablehook.__name__,
        }

    @ray.remote(num_cpus=1)
    class Probe:
        def read(self):
            own = {"self": __import__("torch").get_num_threads(), "tmp": __import__("tempfile").gettempdir()}
            return ray.get(pools.remote()) | own

    probe = Probe.remote()
    worker, actor = ray.get(pools.remote()), ray.get(probe.read.remote())
    # torch's and every library's temporary files land in the session's scratch folder, never in /tmp itself
    assert worker.pop("tmp") == actor.pop("tmp") == scratch.path, (worker, actor)
    assert worker.pop("unraisable") == actor.pop("unraisable") == "exit_when_an_exit_is_swallowed"
    assert worker == {"torch": TEST_THREAD_CAP, "interop": TEST_THREAD_CAP, "blas": {TEST_THREAD_CAP}}
    assert actor["self"] == TEST_THREAD_CAP
    ray.kill(probe)


def test_tight_quota_delivers_less_and_evaluation_is_repeatable(ray_cluster, tiny_inner):
    from bilevel_tune.appo import PopulationPolicyLoop

    loop = PopulationPolicyLoop(
        dataclasses.replace(tiny_inner, world_settings=dataclasses.replace(tiny_inner.world_settings, horizon=30))
    )
    try:
        loop.reset([TIGHT, LOOSE], seed=1, candidates=[0, 1])
        for _ in range(2):
            loop.train()
        first, again = loop.evaluate([5, 6]), loop.evaluate([5, 6])
        tight, loose = first
        assert tight.diagnostics["allowed_fraction"] < loose.diagnostics["allowed_fraction"]
        assert tight.diagnostics["delivered_m3"] < loose.diagnostics["delivered_m3"]
        assert first == again
        assert all(np.isfinite(c.objective) and c.objective <= c.upper_bound + 1e-12 for c in first)
    finally:
        assert loop.stop()


FOUR = [Rules.at_unit({"min_demand_frac": u, "fixed_quota": 1 - u}).as_dict() for u in (0.1, 0.4, 0.6, 0.9)]


def test_a_generation_trains_every_shard_and_merges_in_candidate_order(ray_cluster, tiny_inner):
    with ShardedInnerLoop("appo", tiny_inner, shards=2) as inner:
        result = inner.run(FOUR, seed=5, eval_seeds=[3], inner_iters=2)
    assert [s.first for s in result.shards] == [0, 2] and [len(s.outcomes) for s in result.shards] == [2, 2]
    assert all(np.isfinite(result.objectives)) and all(s.sec_train > 0 for s in result.shards)
    assert result.census.learner_threads <= 2 and all(s.node for s in result.shards)


def test_the_learner_takes_every_batch_once_on_any_ray(tiny_inner):
    """Ray ≥ 2.54: a plain queue. Ray 2.53 has only its circular buffer, whose default replays a batch up to twice,
    picked at random as timing allows: there it takes each batch once."""
    from bilevel_tune.appo.rllib_config import appo_config

    config = appo_config(tiny_inner, seed=1)
    if hasattr(config, "use_circular_buffer"):
        assert config.use_circular_buffer is False
    else:
        assert config.circular_buffer_iterations_per_batch == 1
