"""The shared-storage check's verdicts, on stand-in nodes: a node that cannot see the folder, one that cannot look, one that does not answer."""

import pytest
from ray.exceptions import GetTimeoutError

from bilevel_tune.runtime import cluster

NODE = {"NodeManagerAddress": "10.0.0.7", "NodeID": "f" * 40}


@pytest.mark.parametrize(
    "outcome, says",
    [
        (None, "is not shared: node 10.0.0.7 (ffffffffffff) does not see it — a marker written there just now"),
        (
            RuntimeError("permission denied"),
            "is not shared: node 10.0.0.7 (ffffffffffff) could not look (permission denied)",
        ),
        (
            GetTimeoutError("60 s"),
            "node 10.0.0.7 (ffffffffffff) did not answer within 60 s (lost or busy; Ray drops a dead node after its "
            "health checks) — nothing says the folder is not shared",
        ),
    ],
)
def test_each_way_a_node_fails_the_check_has_its_own_line_and_leaves_nothing(tmp_path, monkeypatch, outcome, says):
    monkeypatch.setattr(cluster, "on_every_node", lambda fn, *args, skip: [(NODE, outcome)])
    root = tmp_path / "new" / "results"
    with pytest.raises(cluster.ClusterError) as err:
        cluster.check_shared_storage(root)
    assert says in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "new").exists()  # the folders it made are gone, marker and all


def test_every_node_seeing_the_marker_passes_and_leaves_no_marker(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "on_every_node", lambda fn, *args, skip: [(NODE, fn(*args))])
    cluster.check_shared_storage(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.ray
def test_the_node_of_a_ray_this_process_started_is_not_asked_and_every_other_node_is(ray_cluster):
    """The session's Ray was started here: its node is this process's own (its workers are our children) and the
    check sends it no task; asked without the skip, it answers from a worker of its own."""
    import os

    import ray

    from bilevel_tune.runtime import ray_init

    def pid() -> int:
        return os.getpid()

    own = ray.get_runtime_context().get_node_id()
    assert ray_init.own_node() == own
    assert cluster.on_every_node(pid, skip=own) == []
    ((node, answer),) = cluster.on_every_node(pid)
    assert node["NodeID"] == own and answer != os.getpid()
