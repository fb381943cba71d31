"""The RLlib shell over any world (`appo.world_env.WorldEnv`) and its own check; a world's physics is its contract
check's (RLlib imported by the tests, not at collection)."""

import pickle

import numpy as np
import pytest

from bilevel_tune.appo import env_check as check
from bilevel_tune.worlds import WorldError, load_world
from bilevel_tune.worlds.check import check_world

pytestmark = pytest.mark.rllib


@pytest.fixture(scope="module")
def world_env():
    from bilevel_tune.appo import world_env

    return world_env


@pytest.mark.parametrize("world", ["fresh-water", "fishery"])
def test_the_shell_keeps_its_contract_on_every_built_in_world(world):
    check.check_env(check.env_config(world, 2), seed=3)


def test_check_cli_exit_codes(capsys):
    assert check.main(["--world", "fishery", "--copies", "2"]) == 0
    assert "keeps its contract" in capsys.readouterr().out
    assert check.main(["--world", "fishy"]) == 2
    assert "world 'fishy' is unknown" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        check.main(["--copies", "0"])
    assert err.value.code == 2


def test_the_world_check_catches_a_broken_water_balance(monkeypatch):
    from bilevel_tune.worlds.fresh_water import hydrology

    real = hydrology.step_lake

    def leaky(volume, inflow, requested, release_share):
        day = real(volume, inflow, requested, release_share)
        return hydrology.LakeDay(day.delivered_share, day.withdrawal, day.release, day.spill, day.volume + 10.0)

    monkeypatch.setattr(hydrology, "step_lake", leaky)
    with pytest.raises(WorldError, match="fresh-water: the water balance does not close on day 0"):
        check_world(load_world("fresh-water"))


def test_agents_map_to_their_candidate_module_named_by_the_world(world_env):
    env = world_env.WorldEnv({"world": "fresh-water", "num_farms": 3, "rules": [{}, {}, {}]})
    assert env.agents[:4] == ["c0/farm0", "c0/farm1", "c0/farm2", "c1/farm0"]
    assert {world_env.module_for_agent(a) for a in env.agents} == {"cand0", "cand1", "cand2"}
    assert world_env.module_for_agent(world_env.agent_id(12, 4, "farm")) == "cand12"
    fishery = world_env.WorldEnv({"world": "fishery", "rules": [{}]})
    assert fishery.agents[0] == "c0/agent0" and fishery.world.name == "fishery"


def test_observation_carries_the_candidate_rules(world_env):
    env = world_env.WorldEnv({"num_farms": 1, "rules": [{"min_demand_frac": 0.0}, {"min_demand_frac": 0.35}]})
    obs, _ = env.reset(seed=0)
    assert env.world.name == "fresh-water"  # an env_config naming no world: the default one
    assert obs["c0/farm0"][6] == pytest.approx(0.0) and obs["c1/farm0"][6] == pytest.approx(1.0)
    assert obs["c0/farm0"].dtype == np.float32


def test_unknown_env_config_key_is_named(world_env):
    with pytest.raises(ValueError, match=r"unknown env_config key\(s\) \['farms'\]"):
        world_env.WorldEnv({"farms": 3})
    with pytest.raises(ValueError, match="unknown rule 'quota'"):
        world_env.WorldEnv({"rules": [{"quota": 0.9}]})


def test_env_pickles_before_reset(world_env):
    env = pickle.loads(pickle.dumps(world_env.WorldEnv({"num_farms": 2})))
    obs, _ = env.reset(seed=1)
    assert len(obs) == 2
