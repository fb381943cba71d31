"""Packed trials: a stage's small-population trials share a lake pool, each getting what it would alone, the block's
CPU split by lakes; the pool waits for its members, but never for one that left or never came; which trials pack."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from bilevel_tune.inner import InnerLoopConfig, ShardedInnerLoop
from bilevel_tune.inner.lake_pool import PooledInnerLoop, pack_share, start_pool
from bilevel_tune.planning import packing
from bilevel_tune.planning.plan import CostModel, describe_plan, make_plan, simulate
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.worlds.fresh_water import Rules, WorldConfig
from bilevel_tune.worlds.lakes import Lake

LOOP = "tests.inner_loops:LakesLoop"
CONFIG = InnerLoopConfig(world_settings=WorldConfig(num_farms=3, horizon=20), streams="lake")
RULES = [Rules.at_unit({"min_demand_frac": u}).as_dict() for u in (0.1, 0.5, 0.9)]


def _lakes(seed: int, n: int) -> list[Lake]:
    return [Lake(RULES[k % len(RULES)], seed, k) for k in range(n)]


@pytest.mark.ray
def test_members_share_one_block_each_getting_its_own_lakes_and_its_share_of_the_cpu(ray_cluster):
    import ray

    pool = start_pool("test-pool-share", LOOP, CONFIG, ["a", "b"])
    a, b = _lakes(5, 1), _lakes(6, 3)
    futures = [pool.submit.remote("a", a, [[1, 2]], 1), pool.submit.remote("b", b, [[3, 4]] * 3, 1)]
    got_a, got_b = ray.get(futures)
    assert ray.get(pool.block_sizes.remote()) == [4]  # one block of both members' lakes
    with ShardedInnerLoop(LOOP, CONFIG) as alone:
        assert got_a.outcomes == alone.run_lakes(a, [[1, 2]]).outcomes
        assert got_b.outcomes == alone.run_lakes(b, [[3, 4]] * 3).outcomes
    assert got_b.cpu_s == pytest.approx(3 * got_a.cpu_s)  # the block's CPU seconds split by lakes
    ray.get(pool.close.remote())
    ray.kill(pool)


@pytest.mark.ray
def test_a_pool_waits_for_no_member_that_left_and_for_one_that_never_came_only_a_while(ray_cluster):
    import ray

    pool = start_pool("test-pool-wait", LOOP, CONFIG, ["a", "b", "c"], join_wait_s=1.0)
    ray.get(pool.leave.remote("b"))
    got = ray.get(pool.submit.remote("a", _lakes(5, 2), [[1]] * 2, 1), timeout=60)  # c never comes: a runs alone
    assert len(got.outcomes) == 2 and ray.get(pool.block_sizes.remote()) == [2]
    # a trial's handle: a generation is its candidates as lakes of the generation's seed, as its own loop runs it
    with PooledInnerLoop("test-pool-wait", "a", inner_iters=1) as pooled, ShardedInnerLoop(LOOP, CONFIG) as alone:
        assert pooled.run(RULES, 7, [4, 5]).outcomes == alone.run(RULES, 7, [4, 5]).outcomes
        assert pooled.cpu_s > 0
    ray.kill(pool)


@pytest.mark.ray
def test_a_member_stopped_while_it_waits_leaves_and_the_others_go_on(ray_cluster):
    import ray

    from bilevel_tune.inner.contract import InnerLoopStopped

    pool = start_pool("test-pool-stop", LOOP, CONFIG, ["a", "b"], join_wait_s=600)
    stop = threading.Event()
    with PooledInnerLoop("test-pool-stop", "a", stop_requested=stop.is_set) as pooled:
        timer = threading.Timer(0.5, stop.set)
        timer.start()
        with pytest.raises(InnerLoopStopped):
            pooled.run(RULES, 7, [4])  # b never comes and a is stopped: a leaves instead of waiting 600 s
    got = ray.get(pool.submit.remote("b", _lakes(6, 1), [[1]], 1), timeout=60)  # b alone now: a left
    assert len(got.outcomes) == 1
    ray.kill(pool)


def test_trials_of_one_population_pack_into_pools_of_32_lakes_and_the_plan_prices_each_as_one():
    study = _study(LOOP, populations=(1, 4, 16, 32), seeds=range(1, 21))
    cells = compile_design(study).trial_cells
    packs = packing.packs_of(study, cells, cpus=128)  # a CPU a pool and a trial alone: nothing rides along another
    sizes = sorted((p.cells[0].population, len(p.cells)) for p in packs)
    # population 1: 40 trials (2 mechanisms × 20 seeds) in pools of 32 and 8; population 4: 40 in pools of 8;
    # population 16: in pairs; population 32 is a block already
    assert sizes == sorted([(1, 32), (1, 8)] + [(4, 8)] * 5 + [(16, 2)] * 20)
    assert all(p.lakes <= packing.PACK_LAKES and p.share == pack_share(len(p.cells)) for p in packs)
    model = CostModel(0.1, 0.05, 0.01, 0.0, 0.01, 0.001)
    plan = make_plan(cells, study.budget, 4, model, packs=packs)
    member = next(t for t in plan.trials if t.packed == 32)
    assert member.cpus == pytest.approx(1 / 32) and member.shards == 1
    unit = next(p for p in packs if len(p.cells) == 32)  # a pack of one population: one trial of all its lakes
    assert member.seconds == pytest.approx(model.trial_s(replace(unit.cells[0], population=32), 1, study.budget))
    assert all(t.packed == 2 and t.shards == 1 for t in plan.trials if t.cell.population == 16)  # never two blocks of 8
    lines = []
    describe_plan(study, plan, lines.append)
    assert "packed ([runtime] pack = auto): 1 lake pool of 32 trials of population 1, 32 lakes a block, one CPU each " \
        "(1/n a trial: the shards column)" in lines  # fmt: skip
    # shares of a CPU that sum to it in all but their last bits still free it for a trial of two shards after them
    # (weekend-confirm's stage 1 in Tune's order: these durations ended in an IndexError before)
    shares = [1 / 6, 1 / 6, 2, 1, 1 / 6, 1 / 6, 1, 1, 1 / 6, 1 / 6, 1, 1]
    durations = [8.6, 7.822, 4.785, 3.33, 5.601, 4.644, 8.054, 3.73, 5.289, 6.25, 9.173, 5.542]
    starts = simulate(durations, shares, 2, None)
    assert all(start >= 0 for start in starts) and starts[2] >= max(durations[i] for i in (0, 1, 4, 5, 8, 9))
    off = _study(LOOP, populations=(1,), seeds=(1, 2), pack="off")
    assert packing.packs_of(off, compile_design(off).trial_cells, cpus=2) == []
    analytic = _study("analytic", populations=(1,), seeds=(1, 2))  # a loop that trains lake by lake: never packed
    assert packing.packs_of(analytic, compile_design(analytic).trial_cells, cpus=2) == []


def test_a_small_pool_rides_along_a_larger_one_while_the_session_has_more_pools_than_cpus():
    """weekend-confirm's stage 1 on 2 CPUs: its six population-1 trials (6 lakes a generation, 250 generations)
    ride along a pair of population 16 (32 lakes, 75 generations): 38 lakes a block for 75 generations, then 6;
    the two other pairs keep the other CPU busy."""
    study = load_study("weekend-confirm")
    study = replace(study, populations=(1, 16), seeds=(1206, 2026, 56), inner=LOOP)
    cells = compile_design(study).trial_cells
    packs = packing.packs_of(study, cells, cpus=2)
    assert sorted(sorted(c.population for c in p.cells) for p in packs) == [[1] * 6 + [16] * 2, [16] * 2, [16] * 2]
    mixed = next(p for p in packs if p.lakes == 38)
    assert [cells.index(c) for c in mixed.cells] == sorted(cells.index(c) for c in mixed.cells)  # Tune's order
    model = CostModel(0.1, 0.05, 0.01, 0.0, 0.01, 0.001)
    gens = {c.population: c.generations for c in mixed.cells}
    assert gens[1] > gens[16]
    phases = gens[16] * model.generation_s(38, study.budget.inner_iters, study.budget.eval_episodes) + (
        gens[1] - gens[16]) * model.generation_s(6, study.budget.inner_iters, study.budget.eval_episodes)  # fmt: skip
    fixed = model.trial_s(replace(mixed.cells[0], population=38, generations=0), 1, study.budget)
    assert mixed.seconds(model, study.budget) == pytest.approx(fixed + phases)
    plan = make_plan(cells, study.budget, 2, model, packs=packs)
    planned = {t.cell.key: t for t in plan.trials}
    by_population = {c.population: planned[c.key] for c in mixed.cells}
    assert by_population[16].seconds < by_population[1].seconds == pytest.approx(fixed + phases)
    assert all(t.packed == 8 for t in by_population.values())
    # the plan's core-seconds: each pool's one CPU until its last member is done (all 12 trials pack here)
    assert plan.core_s == pytest.approx(sum(p.seconds(model, study.budget) for p in packs))
    lines = []
    describe_plan(study, plan, lines.append)
    assert any(line.startswith("packed ([runtime] pack = auto): 1 lake pool of 6 trials of population 1 + 2 trials of "
                               "population 16, 38 lakes a block") for line in lines)  # fmt: skip
    # with a CPU a pool, none rides: four pools, the population-1 trials by themselves
    assert sorted(p.lakes for p in packing.packs_of(study, cells, cpus=4)) == [6, 32, 32, 32]


def _study(loop: str, populations, seeds, pack: str = "auto"):
    import dataclasses

    from bilevel_tune.base.sections import RuntimeSettings

    study = load_study("weekend")
    return dataclasses.replace(study, inner=loop, populations=tuple(populations), seeds=tuple(seeds),
                               budget=dataclasses.replace(study.budget, generations=10),
                               runtime=RuntimeSettings(pack=pack))  # fmt: skip


@pytest.mark.ray
@pytest.mark.slow
def test_a_packed_stage_survives_ctrl_c_and_resumes_to_the_scores_it_gets_unpacked(ray_cluster, tmp_path):
    """Three population-1 trials in one pool under real Tune: Ctrl-C mid-run, then --resume; every generation once,
    every trial to its end, each final the same as the same trial's with packing off."""
    import json
    import signal

    from bilevel_tune.cli.main import main
    from bilevel_tune.core import metrics

    from .study_helpers import interrupt, study_args, study_process, trial_records, wait_for

    generations = 40
    cells = dict(inner=LOOP, population=1, optimize_params="min_demand_frac", seed="1,2,3", outer_iters=generations,
                 wandb="disabled")  # fmt: skip
    assert main(study_args(tmp_path, "--quick", "--set", "runtime.pack=off", name="alone", **cells)) == 0
    proc = study_process(study_args(tmp_path, "--quick", name="packed", **cells))
    run = tmp_path / "packed"
    wait_for(lambda: sum(len(g) for g, _ in trial_records(run).values()) >= 6, timeout=240, interval=0.05)
    out = interrupt(proc, signal.SIGINT)
    assert proc.returncode == 130, out[-3000:]
    plan = json.loads((run / "study.json").read_text())["plan"]
    assert [t.get("packed") for t in plan["trials"]] == [3, 3, 3]  # one pool of the three
    assert main(["weekend", "--resume", "--name", "packed", "--results", str(tmp_path), "--wandb", "disabled"]) == 0

    def finals(name):
        records = trial_records(tmp_path / name)
        for generations_of, _ in records.values():
            assert [g[metrics.GENERATION] for g in generations_of] == list(range(generations))
        return sorted((g[0][metrics.SEED], final[metrics.FINAL_BEST]) for g, final in records.values())

    assert finals("packed") == finals("alone")
