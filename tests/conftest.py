"""Shared fixtures: one small Ray cluster for the whole session (ray init costs ~8 s here)."""

import os

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

TEST_THREAD_CAP = 1


@pytest.fixture(scope="session")
def ray_cluster():
    from bilevel_tune import runtime

    runtime.init(runtime.RuntimeConfig(num_cpus=2, thread_cap=TEST_THREAD_CAP, log_to_driver=False))
    yield
    runtime.shutdown()


@pytest.fixture
def tiny_inner():
    """The smallest honest APPO inner loop: 2 farms, 10-day seasons, one 8-unit layer."""
    from bilevel_tune.inner import InnerLoopConfig

    return InnerLoopConfig(num_farms=2, horizon=10, hidden=(8,))
