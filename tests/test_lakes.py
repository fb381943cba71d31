"""A block of lakes: each lake under its own rules and seed. One group is its world bit for bit; a lake's numbers do
not depend on which lakes share its block (its world's here, its training's with real APPO below); a run from before
lakes keeps drawing as it drew."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bilevel_tune.inner.evaluation import evaluate
from bilevel_tune.worlds import load_world
from bilevel_tune.worlds.fresh_water import Rules, WorldConfig
from bilevel_tune.worlds.lakes import Lake, LakeWorlds, evaluate_lakes, groups, seed_lakes

WORLD = WorldConfig(num_farms=3, horizon=20)
RULES = [Rules.at_unit({"min_demand_frac": u}).as_dict() for u in (0.1, 0.5, 0.9)]


def myopic(world):
    """The world's own myopic best response, whichever world (a block's or a group's) observes."""
    return lambda observation: world.myopic_actions(observation)


def test_groups_are_runs_of_equal_consecutive_keys_and_seed_lakes_go_seed_by_seed():
    assert groups([5, 5, 9, 9, 9, 5]) == [(0, 2), (2, 3), (5, 1)]
    lakes, eval_seeds = seed_lakes(RULES[:2], [7, 8])
    assert [(lake.seed, lake.index) for lake in lakes] == [(7, 0), (7, 1), (8, 0), (8, 1)]
    assert eval_seeds == [[7], [7], [8], [8]]


def test_one_group_is_its_world_bit_for_bit():
    world_class = load_world("fresh-water")
    alone = world_class(WORLD, RULES)
    expected = evaluate(alone, [3, 4], myopic(alone), world_class.objective_class())
    block = LakeWorlds(world_class, WORLD, RULES, [len(RULES)])
    found = evaluate_lakes(block, [[3, 4]], myopic(block.worlds[0]), world_class.objective_class())
    assert found == expected


def test_a_lakes_season_is_its_own_whichever_lakes_share_its_block():
    world_class = load_world("fresh-water")
    objective = world_class.objective_class()
    lakes = [Lake(RULES[0], 11, 0), Lake(RULES[1], 11, 1), Lake(RULES[2], 12, 0)]
    block = LakeWorlds.of(world_class, WORLD, lakes)
    assert block.sizes == (2, 1) and block.seeds == (11, 12) and block.copies == 3
    assert block.whole and len(block.worlds) == 1  # fresh water draws per copy: one world steps every lake

    found = evaluate_lakes(block, [[11, 21], [12, 22]], myopic(world_class(WORLD, RULES)), objective)
    for (first, size), seeds in zip(groups([lake.seed for lake in lakes]), ([11, 21], [12, 22])):
        alone = world_class(WORLD, [lake.rules for lake in lakes[first : first + size]])
        assert found[first : first + size] == evaluate(alone, seeds, myopic(alone), objective)


def test_a_world_that_draws_for_all_its_copies_at_once_is_a_world_per_seed():
    """The fishery draws one number a day for every copy: a block of two seeds is two fisheries, stepped as one."""
    world_class = load_world("fishery")
    objective = world_class.objective_class()
    rules = [{}, {}, {}]
    block = LakeWorlds(world_class, world_class.settings_class(), rules, [1, 2])
    assert not block.whole and [w.copies for w in block.worlds] == [1, 2]
    still = lambda observation: np.zeros((len(observation), block.agents, block.action_size))  # noqa: E731
    found = evaluate_lakes(block, [[5], [6]], still, objective)
    for rules_part, seeds, part in ((rules[:1], [5], found[:1]), (rules[1:], [6], found[1:])):
        alone = world_class(world_class.settings_class(), rules_part)
        assert part == evaluate(alone, seeds, still, objective)


def test_uneven_evaluation_seeds_are_refused_in_one_line():
    world_class = load_world("fresh-water")
    block = LakeWorlds(world_class, WORLD, RULES, [1, 2])
    with pytest.raises(ValueError, match="as many seasons"):
        evaluate_lakes(block, [[1], [2, 3]], myopic(block.worlds[0]), world_class.objective_class())


def test_a_study_draws_per_lake_and_a_run_from_before_lakes_draws_as_it_began():
    from bilevel_tune.inner import InnerLoopConfig
    from bilevel_tune.study_data.definition import Study, load_study

    study = load_study("weekend")
    assert study.streams == "lake" and InnerLoopConfig.from_study(study).streams == "lake"
    record = study.to_dict()
    assert Study.from_dict(record).streams == "lake"
    del record["streams"]  # study.json of a run begun before lakes
    assert Study.from_dict(record).streams == "block"
    plan = {k: v for k, v in dataclasses.asdict(InnerLoopConfig.from_study(study)).items() if k != "streams"}
    assert InnerLoopConfig.from_record(plan).streams == "block"  # a trial's plan from before lakes
    with pytest.raises(ValueError, match="streams='pond' is unknown; allowed: lake, block"):
        InnerLoopConfig(streams="pond")


# -- with real APPO -----------------------------------------------------------------------------------
TINY = dict(world_settings=WorldConfig(num_farms=2, horizon=10), hidden=(8,))


def _objectives(loop: str, streams: str, block: list[Lake], inner_iters: int) -> list[float]:
    """Each lake's objective, the block trained and evaluated (each lake on its own seed) by one shard."""
    from bilevel_tune.inner import InnerLoopConfig
    from bilevel_tune.inner.shards import Shard

    shard = Shard(loop, InnerLoopConfig(**TINY, streams=streams))
    try:
        report = shard.lakes(block, [[b.seed] for b in block], 0, inner_iters)
    finally:
        shard.stop()
    return [o.objective for o in report.outcomes]


def _lake_objective(streams: str, block: list[Lake], lake: Lake, inner_iters: int) -> float:
    return _objectives("appo", streams, block, inner_iters)[block.index(lake)]


@pytest.mark.rllib
@pytest.mark.ray
@pytest.mark.slow
def test_a_trained_lake_is_the_same_beside_any_block_mates_and_a_final_block_untrained_is_seed_by_seeds(ray_cluster):
    lake = Lake(RULES[0], 5, 0)
    mates = [Lake(RULES[1], 9, 0), Lake(RULES[2], 9, 1), Lake(Rules().as_dict(), 9, 2)]
    alone = _lake_objective("lake", [lake], lake, 10)
    # lake streams: its numbers are its own, up to the last bits of the batched matmul (docs/inner-loop.md)
    for block in ([*mates[:1], lake], [*mates, lake], [lake, *mates]):
        assert abs(_lake_objective("lake", block, lake, 10) - alone) < 1e-6
    # batched PPO too: each lake's GAE, minibatch order, loss, KL coefficient and clip its own
    ppo_alone = _objectives("ppo", "lake", [lake], 10)[0]
    assert abs(_objectives("ppo", "lake", [*mates, lake], 10)[-1] - ppo_alone) < 1e-6
    # block streams (a run from before lakes): one exploration stream for a block, so a block-mate moves it
    same_seed_mate = Lake(RULES[1], 5, 1)
    legacy = [_lake_objective("block", block, lake, 10) for block in ([lake], [lake, same_seed_mate])]
    assert abs(legacy[0] - legacy[1]) > 1e-4
    # untrained, a block of final lakes scores each seed's pair exactly as seed by seed (block streams) does
    lakes, _ = seed_lakes(RULES[:2], [3, 4, 5])
    for loop in ("appo", "frozen", "ppo"):  # ppo: the batched module starts where RLlib's per-agent PPO does
        assert _objectives(loop, "lake", lakes, 0) == _objectives(loop, "block", lakes, 0), loop
