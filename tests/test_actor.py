"""The real APPO inner loop in a real Ray actor: leak-free resets, caps, evaluation."""

import dataclasses

import numpy as np
import pytest
import ray

from bilevel_tune import metrics as M
from bilevel_tune.actor import PolicyLoop, build_algorithm, learner_thread_of, make_policy_actor, stop_learner_thread
from bilevel_tune.world import Rules

from .conftest import TEST_THREAD_CAP

pytestmark = [pytest.mark.ray, pytest.mark.slow]
TIGHT = Rules(fixed_quota=0.95, min_demand_frac=0.0, max_demand_frac=0.35).as_dict()
LOOSE = Rules(fixed_quota=0.6, min_demand_frac=0.35, max_demand_frac=1.0).as_dict()


def census_over_resets(inner, generations=10):
    actor = make_policy_actor(inner)
    try:
        counts = []
        for g in range(generations):
            ray.get(actor.reset.remote([TIGHT, LOOSE], g))
            ray.get(actor.train.remote())
            counts.append(ray.get(actor.evaluate.remote([0]))["census"])
        return counts
    finally:
        ray.get(actor.stop.remote())
        ray.kill(actor)


def own_threads(c):
    """OS threads less gRPC's self-scaling pools, which come and go whatever our code does."""
    return c[M.THREADS_OS] - c[M.THREADS_GRPC]


def test_census_is_flat_over_resets_and_the_leaking_variant_grows(ray_cluster, tiny_inner):
    flat = census_over_resets(tiny_inner)
    assert max(c[M.LEARNER_THREADS] for c in flat) <= 1
    assert own_threads(flat[-1]) - own_threads(flat[0]) == 0
    leaking = census_over_resets(dataclasses.replace(tiny_inner, stop_mode="none"))
    assert leaking[-1][M.LEARNER_THREADS] == 10
    assert own_threads(leaking[-1]) - own_threads(leaking[0]) >= 9  # one learner thread a generation, at least


def test_by_hand_stop_ends_rllibs_own_learner_thread(ray_cluster, tiny_inner):
    algo = build_algorithm(tiny_inner, [Rules()], seed=0)
    try:
        algo.train()
        thread = learner_thread_of(algo)
        assert type(thread).__name__ == "_LearnerThread" and thread.is_alive()
        assert stop_learner_thread(thread, timeout=5.0)
        assert not thread.is_alive()
    finally:
        algo.stop()


def test_thread_caps_hold_inside_workers_and_the_actor(ray_cluster):
    @ray.remote(num_cpus=1)
    def pools():
        import torch
        from threadpoolctl import threadpool_info

        return {
            "torch": torch.get_num_threads(),
            "interop": torch.get_num_interop_threads(),
            "blas": {i["num_threads"] for i in threadpool_info()},
        }

    @ray.remote(num_cpus=1)
    class Probe:
        def read(self):
            return ray.get(pools.remote()) | {"self": __import__("torch").get_num_threads()}

    probe = Probe.remote()
    worker, actor = ray.get(pools.remote()), ray.get(probe.read.remote())
    assert worker == {"torch": TEST_THREAD_CAP, "interop": TEST_THREAD_CAP, "blas": {TEST_THREAD_CAP}}
    assert actor["self"] == TEST_THREAD_CAP
    ray.kill(probe)


def test_tight_quota_delivers_less_and_evaluation_is_repeatable(ray_cluster, tiny_inner):
    loop = PolicyLoop(dataclasses.replace(tiny_inner, horizon=30))
    try:
        loop.reset([TIGHT, LOOSE], seed=1)
        for _ in range(2):
            loop.train()
        first, again = loop.evaluate([5, 6]), loop.evaluate([5, 6])
        tight, loose = first["candidates"]
        assert tight["allowed_fraction"] < loose["allowed_fraction"]
        assert tight["delivered_m3"] < loose["delivered_m3"]
        assert first["candidates"] == again["candidates"]
        assert all(
            np.isfinite(c["objective"]) and c["objective"] <= c["upper_bound"] + 1e-12 for c in first["candidates"]
        )
    finally:
        assert loop.stop()
