"""`make test`'s two lanes, run at once: pytest --lane shared | --lane own.

Measured on 2 cores (docs/benchmarks.md, "make test"): alone, the tests that start Ray keep the CPUs about two
thirds busy, mostly waiting on processes, Tune and Ray's own start. So the numpy tier shares its lane with the
Ray tests that run in this process — loops and studies on the session's Ray, real APPO included — or run a study
to its end in one of its own, and the other lane keeps the tests that own more of the machine: a study's process
stopped by a signal (Ctrl-C, SIGTERM, SIGKILL), extra Ray nodes, a second session racing the first, the live
view. Its last file watches /tmp itself (a second Ctrl-C leaves nothing there), so it runs last, when the
shared lane has ended or nearly.

A new test file joins the own lane unless it is named here; the test of lanes keeps these files free of what
the own lane is for.
"""

from __future__ import annotations

LANES = ("shared", "own")
NUMPY_TIER = ("ray", "slow", "rllib", "long")  # a test with none of these markers is the numpy tier's

# The Ray and RLlib tests beside the numpy tier: loops and studies in this process, or a study run to its end.
SHARED_RAY_FILES = frozenset(
    {
        "test_appo.py",
        "test_appo_worlds.py",
        "test_calibration.py",
        "test_decide.py",
        "test_declared.py",
        "test_env.py",
        "test_heldout.py",
        "test_notebook.py",
        "test_pilot.py",
        "test_population.py",
        "test_ppo.py",
        "test_ray_compat.py",
        "test_rescoring.py",
        "test_scan.py",
        "test_storage_check.py",
        "test_study_appo.py",
        "test_study_cli.py",
        "test_tracking.py",
        "test_world_settings.py",
    }
)
LAST_IN_OWN_LANE = "test_lifecycle.py"  # it watches /tmp


def lane_of(item) -> str:
    numpy_tier = not any(item.get_closest_marker(name) for name in NUMPY_TIER)
    return "shared" if numpy_tier or item.path.name in SHARED_RAY_FILES else "own"


def select(items: list, lane: str) -> tuple[list, list]:
    """(the lane's tests in the order they run, the others): the own lane's /tmp watcher last."""
    kept = [item for item in items if lane_of(item) == lane]
    kept.sort(key=lambda item: item.path.name == LAST_IN_OWN_LANE)  # stable: the rest keep pytest's order
    return kept, [item for item in items if lane_of(item) != lane]
