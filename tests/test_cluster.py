"""A study on a real two-node Ray cluster built on this machine: placement, a lost node, a results folder not shared.

The worker node has a /tmp of its own (it is another machine, as far as
files go); the shared results root lives outside /tmp, in the repository's
`.pytest-shared/`, as an NFS mount would.
"""

import json
import re
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest

from bilevel_tune.core import metrics
from bilevel_tune.study_data.run_folder import STUDY_FILE

from .local_cluster import WORKER_IP, LocalCluster, can_make_nodes
from .study_helpers import command_process, study_args, study_process, trial_records, wait_for

WHY_NOT = can_make_nodes()  # None where a worker node can be started (root, as in CI)
pytestmark = [pytest.mark.ray, pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]
ANALYTIC = {"inner": "analytic", "wandb": "disabled"}


# The worker dies at generation 20 and the trial must still be mid-run when Ray notices: on a quiet machine it ran
# about 70 more first (with 100 it had finished).
GENERATIONS_TO_REPLAN = 300
SHARED = Path(__file__).resolve().parent.parent / ".pytest-shared"


@pytest.fixture
def cluster():
    nodes = LocalCluster(head_cpus=1)
    yield nodes
    nodes.stop()


@pytest.fixture
def tmp_path():
    """A folder both nodes see (pytest's own lives in the session's /tmp scratch, which the worker cannot see)."""
    SHARED.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=SHARED))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def nodes_of(rows) -> set[str]:
    return {shard[metrics.NODE] for row in rows for shard in row[metrics.SHARD_DETAIL]}


def run(args, timeout=600):
    proc = study_process(args)
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def test_trials_run_on_both_nodes_and_the_run_folder_is_complete(cluster, tmp_path):
    cluster.start_worker(cpus=2)
    # four trials, more than the 3 CPUs hold: the first three start at once, on both nodes
    four_trials = dict(population="1,2", optimize_params="min_demand_frac", seed="1,2", outer_iters=4)
    code, out = run(study_args(tmp_path, "--quick", "--dashboard", **ANALYTIC, address=cluster.address, **four_trials))
    assert code == 0, out[-3000:]
    # the live view on a joined cluster: TensorBoard is the study's, the Ray Dashboard the cluster's (it runs none)
    assert out.startswith("TensorBoard: http://127.0.0.1:")
    assert "Ray Dashboard: this cluster runs none" in out
    run_dir = tmp_path / "run"
    records = trial_records(run_dir)
    assert len(records) == 4 and all(final is not None for _, final in records.values())
    assert len(set().union(*(nodes_of(rows) for rows, _ in records.values()))) == 2, "trials on both nodes"
    addresses = {shard[metrics.NODE_IP] for rows, _ in records.values() for row in rows for shard in row[metrics.SHARD_DETAIL]}
    assert WORKER_IP in addresses and len(addresses) == 2, f"each shard records its node's address: {addresses}"
    assert all(list((run_dir / name).glob("checkpoint_*")) for name in records)
    assert (run_dir / "summary.md").is_file()
    plan = json.loads((run_dir / STUDY_FILE).read_text())["plan"]
    assert plan["cpus"] == 3 and len(plan["trials"]) == 4


def test_a_lost_worker_node_costs_a_retry_from_the_checkpoint_and_no_generation(cluster, tmp_path):
    cluster.start_worker(cpus=2)
    generations = 100  # the kill lands at 20: a trial on the worker is mid-run
    args = study_args(
        tmp_path, "--quick", **ANALYTIC, address=cluster.address, cpus_per_trial=1, population=16,
        optimize_params="min_demand_frac", seed="1,2", outer_iters=generations,
    )  # fmt: skip
    proc = study_process(args)

    def a_trial_is_well_under_way_on_the_worker():
        return any(
            len(rows) >= 20 and cluster.worker_node_id in nodes_of(rows)
            for rows, _ in trial_records(tmp_path / "run").values()
        )

    wait_for(a_trial_is_well_under_way_on_the_worker, timeout=240, interval=0.1)
    cluster.kill_worker()
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    records = trial_records(tmp_path / "run")
    for rows, final in records.values():
        assert [r[metrics.GENERATION] for r in rows] == list(range(generations)) and final is not None
    moved = [
        rows for rows, _ in records.values() if cluster.worker_node_id in nodes_of(rows) and len(nodes_of(rows)) == 2
    ]
    assert moved, "a trial of the lost node must have continued on the head"
    assert "2 finished, 0 errored, 0 interrupted of 2 trials" in out.strip().splitlines()[-1]
    failures = [line for line in out.splitlines() if "Trial task failed" in line]
    assert failures and all("traceback in its error.txt" in line for line in failures) and "Traceback" not in out


def test_a_results_folder_a_node_cannot_see_is_refused_before_anything_starts(cluster, tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    cluster.start_worker(cpus=2, private=(private,))
    results = private / "results"
    code, out = run(study_args(results, "--quick", **ANALYTIC, address=cluster.address))
    last = out.strip().splitlines()[-1]
    assert code == 2, out[-3000:]
    assert str(results) in last and re.search(r"node 127\.0\.0\.2 \([0-9a-f]{12}\)", last), last
    assert "Traceback" not in out and "Trial" not in out
    assert not results.exists() and list(private.iterdir()) == [], "nothing may be left behind"


def test_a_trial_that_no_longer_fits_stops_the_study_in_one_line_and_resume_replans_it(cluster, tmp_path):
    cluster.start_worker(cpus=2)
    args = study_args(
        tmp_path, "--quick", **ANALYTIC, address=cluster.address, cpus_per_trial=3, population=16,
        optimize_params="min_demand_frac", seed=1, outer_iters=GENERATIONS_TO_REPLAN, node_wait=2,
    )  # fmt: skip
    proc = study_process(args)
    wait_for(lambda: any(len(rows) >= 20 for rows, _ in trial_records(tmp_path / "run").values()), timeout=240)
    cluster.kill_worker()
    out, _ = proc.communicate(timeout=600)
    lines = out.strip().splitlines()
    assert proc.returncode == 1, out[-3000:]
    assert any(re.search(r"stopped: trial \S+ needs 3 CPUs but the cluster has 1 left", line) for line in lines)
    assert "0 finished, 0 errored, 1 interrupted of 1 trials" in lines[-1] and "resume with:" in lines[-1]
    resume = shlex.split(lines[-1].split("resume with: ", 1)[1])
    assert "--cpus-per-trial" in resume
    resume[resume.index("--cpus-per-trial") + 1] = "1"  # the head has one CPU now
    done = command_process(resume)
    out, _ = done.communicate(timeout=600)
    assert done.returncode == 0, out[-3000:]
    ((rows, final),) = trial_records(tmp_path / "run").values()
    assert [r[metrics.GENERATION] for r in rows] == list(range(GENERATIONS_TO_REPLAN)) and final is not None
    assert rows[0][metrics.SHARDS] == 3 and rows[-1][metrics.SHARDS] == 1, (
        "the resumed trial runs with the shards it was re-planned to"
    )
