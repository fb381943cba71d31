"""Shared fixtures: one small Ray cluster for the whole session (ray init costs ~8 s here), and no debris.

The session runs in a scratch TMPDIR of its own (removed at the end), and
so do pytest's own folders: what in-process studies, Ray workers, W&B and
the tests leave behind never lands in /tmp, and two sessions at once never
share a folder. Calibration probes go to a session store, not ~/.cache.
"""

import os
import shutil
import tempfile

import pytest

from bilevel_tune.runtime.lifecycle import Scratch

from . import lanes

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

TEST_THREAD_CAP = 1
_SCRATCH = Scratch().__enter__()  # before any test imports Ray or W&B: they read TMPDIR once
os.environ["BILEVEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="calibration-", dir=_SCRATCH.path)


def pytest_addoption(parser):
    parser.addoption("--lane", choices=lanes.LANES, help="one of make test's two lanes (tests/lanes.py)")


def pytest_collection_modifyitems(config, items):
    lane = config.getoption("--lane")
    if lane:
        items[:], deselected = lanes.select(items, lane)
        config.hook.pytest_deselected(items=deselected)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if config.option.basetemp is None:  # before pytest's tmp_path factory reads it
        config.option.basetemp = os.path.join(_SCRATCH.path, "pytest")


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(os.environ["BILEVEL_CACHE_DIR"], ignore_errors=True)
    _SCRATCH.__exit__(None, None, None)


@pytest.fixture(scope="session")
def scratch() -> Scratch:
    return _SCRATCH


@pytest.fixture(scope="session")
def ray_cluster(scratch):
    from bilevel_tune.runtime import ray_init

    config = ray_init.RuntimeConfig(
        num_cpus=2, thread_cap=TEST_THREAD_CAP, log_to_driver=False, extra_env=tuple(scratch.env().items())
    )
    ray_init.init(config)
    yield
    ray_init.shutdown()


@pytest.fixture
def tiny_inner():
    """The smallest honest APPO inner loop: 2 farms, 10-day seasons, one 8-unit layer."""
    from bilevel_tune.inner import InnerLoopConfig
    from bilevel_tune.worlds.fresh_water import WorldConfig

    return InnerLoopConfig(world_settings=WorldConfig(num_farms=2, horizon=10), hidden=(8,))
