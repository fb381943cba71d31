"""One real-APPO study end to end under Tune: two cells, two generations, a final re-evaluation."""

import json

import numpy as np
import pandas as pd
import pytest

import bilevel_tune
from bilevel_tune.cli.main import main
from bilevel_tune.core import metrics

from .study_helpers import kill_inner_actor_after, study_args, trial_records

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_real_appo_study_two_cells_two_generations(ray_cluster, tmp_path, capsys):
    args = study_args(tmp_path, "--quick", wandb="offline", population=2, seed=42, outer_iters=2, inner_iters=2)
    assert main(args) == 0
    records = trial_records(tmp_path / "run")
    assert len(records) == 2
    for generations, final in records.values():
        assert [g[metrics.GENERATION] for g in generations] == [0, 1]
        for g in generations:
            objectives = [o["objective"] for o in g["outcomes"]]
            assert len(objectives) == 2 and all(np.isfinite(objectives))
            assert all(o["objective"] <= o["upper_bound"] + 1e-12 for o in g["outcomes"])
            assert g[metrics.LEARNER_THREADS] <= 1
            # CPU seconds the OS measured: the trial's own process and its shard's, this generation (APPO trains)
            shard = sum(d[metrics.SHARD_CORE_S] for d in g[metrics.SHARD_DETAIL])
            assert 0 < shard <= g[metrics.CORE_S]
        assert np.isfinite(final[metrics.FINAL + "best"]) and final[metrics.FINAL + "seeds"] == 2
        assert final[metrics.CORE_S_FINAL] > 0
    record = json.loads((tmp_path / "run" / "study.json").read_text())
    assert record["study"]["inner"] == "appo"
    # two trials of population 2: one lake pool ([runtime] pack = auto), a block of 4 lakes a generation on 1 CPU
    assert [t.get("packed") for t in record["plan"]["trials"]] == [2, 2]
    details = [d for generations, _ in records.values() for g in generations for d in g[metrics.SHARD_DETAIL]]
    assert len({d[metrics.NODE] + str(d[metrics.SEC_TRAIN]) for d in details}) == 2  # both trials' blocks, shared
    assert list((tmp_path / "run").glob("*/wandb/offline-run-*")), "W&B offline runs belong in the run folder"
    assert "2 finished, 0 errored, 0 interrupted of 2 trials" in capsys.readouterr().out
    costs = bilevel_tune.open(tmp_path / "run").costs  # trials.csv's core_s, each trial's sum: measured, not priced
    trials = pd.read_csv(tmp_path / "run" / "trials.csv")
    assert (trials["core_s"] > 0).all() and costs["core_s_measured"].all() and len(costs) == 2


def test_a_killed_policy_actor_retries_from_the_checkpoint(ray_cluster, tmp_path):
    generations = 5
    args = study_args(
        tmp_path,
        "--quick",
        wandb="disabled",
        population=2,
        seed=42,
        optimize_params="min_demand_frac",
        outer_iters=generations,
        inner_iters=2,
    )
    killer, killed = kill_inner_actor_after(tmp_path / "run", generations=2, timeout=300)
    assert main(args) == 0
    killer.join(timeout=5)
    ((rows, final),) = trial_records(tmp_path / "run").values()
    assert [r[metrics.GENERATION] for r in rows] == list(range(generations)) and final is not None
    pids = {r[metrics.PID] for r in rows}
    assert killed["pid"] in pids and len(pids) == 2
