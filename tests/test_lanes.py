"""make test's lanes (tests/lanes.py): the shared lane's Ray files exist and own nothing of the machine."""

from pathlib import Path

from . import lanes

TESTS = Path(__file__).parent
OWNS_THE_MACHINE = ("send_signal", "interrupt(", "killpg", "SIGKILL", "LocalCluster", '"/tmp"')


def test_the_shared_lanes_ray_files_exist_signal_no_process_start_no_node_and_watch_no_tmp():
    for name in sorted(lanes.SHARED_RAY_FILES):
        text = (TESTS / name).read_text()
        assert not [word for word in OWNS_THE_MACHINE if word in text], f"{name} belongs in the own lane"
    assert '"/tmp"' in (TESTS / lanes.LAST_IN_OWN_LANE).read_text() and lanes.LAST_IN_OWN_LANE not in lanes.SHARED_RAY_FILES
