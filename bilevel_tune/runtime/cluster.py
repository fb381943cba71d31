"""The Ray cluster a study runs on: which one, its CPUs and nodes, and whether every node sees the results.

A study starts a Ray of its own unless it is told to join one: `--address
host:port`, `--address auto` (the cluster `ray start` last recorded on this
machine), or RAY_ADDRESS in the environment (as `ray job submit` sets it).
A named address is probed with a plain TCP connect first: `ray.init` on a
dead one retries for minutes.

On a cluster every node must see the results folder (docs/cluster.md): Tune
checkpoints there, and trials write their records there from whichever node
runs them. `check_shared_storage` writes a marker file and reads it back
from every alive node before anything else is written.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
from pathlib import Path
from typing import Any, Callable

NODE_TASK_TIMEOUT_S = 60.0
MARKER_PREFIX = ".bilevel-storage-check-"


class ClusterError(RuntimeError):
    """A cluster the study cannot use; the message is the one line the user sees."""


def requested_address(explicit: str | None) -> str | None:
    """The cluster to join: --address, else RAY_ADDRESS, else None (a Ray of the study's own)."""
    return explicit or os.environ.get("RAY_ADDRESS") or None


def address_label(explicit: str | None) -> str:
    """How the user asked for the cluster, for messages: '--address X' or 'RAY_ADDRESS=X'."""
    return f"--address {explicit}" if explicit else f"RAY_ADDRESS={os.environ.get('RAY_ADDRESS')}"


def _recorded_address() -> str:
    from bilevel_tune.runtime.ray_compat import ray_address_file

    path = ray_address_file()
    try:
        address = Path(path).read_text().strip()
    except OSError:
        raise ClusterError(f"--address auto: no running Ray cluster recorded on this machine ({path})") from None
    return address


def probe_address(address: str, label: str | None = None, timeout: float = 5.0) -> str:
    """host:port of `address` if something listens there; ClusterError otherwise ('auto' reads ray start's record)."""
    label = label or f"--address {address}"
    if address == "auto":
        address = _recorded_address()
        label = f"{label} ({address}, recorded by `ray start`)"
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or err
        raise ClusterError(
            f"{label}: cannot connect to a Ray cluster (nothing answers at {host}:{port}: {reason})"
        ) from None
    return address


def cluster_cpus() -> int:
    import ray

    return int(ray.cluster_resources().get("CPU", 0))


def alive_nodes() -> list[dict[str, Any]]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def node_label(node: dict[str, Any]) -> str:
    return f"{node.get('NodeManagerAddress', '?')} ({node['NodeID'][:12]})"


def on_every_node(fn: Callable, *args, skip: str | None = None) -> list[tuple[dict[str, Any], Any]]:
    """fn(*args) on each alive node but the one whose id is `skip`, pinned there and taking no CPU: [(node, result
    or the exception)]."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in alive_nodes() if n["NodeID"] != skip]
    if not nodes:
        return []
    remote = ray.remote(num_cpus=0, max_retries=0)(fn)
    refs = [
        remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(*args)
        for n in nodes
    ]
    out = []
    for node, ref in zip(nodes, refs):
        try:
            out.append((node, ray.get(ref, timeout=NODE_TASK_TIMEOUT_S)))
        except Exception as err:  # noqa: BLE001 - reported per node by the caller
            out.append((node, err))
    return out


def _no_answer(outcome) -> bool:
    """Is this outcome of a task on a node a node that did not answer (timed out, died, unreachable)?"""
    from ray import exceptions

    silent = (
        exceptions.GetTimeoutError,
        exceptions.NodeDiedError,
        exceptions.WorkerCrashedError,
        exceptions.TaskUnschedulableError,
        exceptions.LocalRayletDiedError,
    )
    return isinstance(outcome, silent)


def _read_marker(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def check_shared_storage(root: Path) -> None:
    """Every alive node must read back the marker this process writes under `root`; ClusterError names the first that cannot.

    The node of a Ray this process started is not asked: its workers are this process's own children, on its
    disk (asking costs a worker's start, seconds, on every run). Creates `root` if needed and leaves nothing
    behind either way (a folder it created is removed again when the check fails).
    """
    from bilevel_tune.runtime import ray_init

    created = [p for p in [root, *root.parents] if not p.exists()]
    root.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    marker = root / f"{MARKER_PREFIX}{token[:8]}"
    marker.write_text(token)
    try:
        for node, seen in on_every_node(_read_marker, str(marker), skip=ray_init.own_node()):
            if seen == token:
                continue
            if _no_answer(seen):  # the node, not the storage: Ray still lists a lost node until its health checks fail
                raise ClusterError(
                    f"--results {root}: node {node_label(node)} did not answer within {NODE_TASK_TIMEOUT_S:.0f} s "
                    "(lost or busy; Ray drops a dead node after its health checks) — nothing says the folder is "
                    "not shared; try again in a minute, or remove the node"
                )
            why = f"could not look ({seen})" if isinstance(seen, Exception) else "does not see it"
            raise ClusterError(
                f"--results {root} is not shared: node {node_label(node)} {why} — a marker written there just now; "
                "give --results a folder every node mounts (NFS or similar)"
            )
    except ClusterError:
        marker.unlink(missing_ok=True)
        for folder in created:  # innermost first
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    marker.unlink(missing_ok=True)


def _remove_tree(path: str) -> bool:
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.exists(path)


def remove_on_every_node(path: str) -> None:
    """Remove a node-local folder (the run's scratch space) on every alive node; best effort."""
    on_every_node(_remove_tree, path)
