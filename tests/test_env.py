"""The RLlib env shell and its shipped contract check (RLlib imported by the tests, not at collection)."""

import pickle

import numpy as np
import pytest

from bilevel_tune.world import check

pytestmark = pytest.mark.rllib


@pytest.fixture(scope="module")
def env_module():
    from bilevel_tune.world import env

    return env


def test_contract_holds_for_a_small_population():
    check.check_env({"num_farms": 2, "horizon": 40, "rules": [{}, {"fixed_quota": 0.95}]}, seed=3)


def test_check_cli_exit_codes(capsys):
    assert check.main(["--horizon", "20", "--population", "2"]) == 0
    assert "contract holds" in capsys.readouterr().out
    with pytest.raises(SystemExit) as err:
        check.main(["--num-farms", "0"])
    assert err.value.code == 2


def test_the_check_catches_a_broken_water_balance(monkeypatch):
    from bilevel_tune.world import hydrology

    real = hydrology.step_lake

    def leaky(volume, inflow, requested, release_share):
        day = real(volume, inflow, requested, release_share)
        return hydrology.LakeDay(day.delivered_share, day.withdrawal, day.release, day.spill, day.volume + 10.0)

    monkeypatch.setattr(hydrology, "step_lake", leaky)
    with pytest.raises(check.ContractError, match="water balance"):
        check.check_env({"num_farms": 1, "horizon": 5})


def test_agents_map_to_their_candidate_module(env_module):
    FreshWaterEnv, agent_id, module_for_agent = (
        env_module.FreshWaterEnv,
        env_module.agent_id,
        env_module.module_for_agent,
    )
    env = FreshWaterEnv({"num_farms": 3, "rules": [{}, {}, {}]})
    assert env.agents[:4] == ["c0/farm0", "c0/farm1", "c0/farm2", "c1/farm0"]
    assert {module_for_agent(a) for a in env.agents} == {"cand0", "cand1", "cand2"}
    assert module_for_agent(agent_id(12, 4)) == "cand12"


def test_observation_carries_the_candidate_rules(env_module):
    env = env_module.FreshWaterEnv({"num_farms": 1, "rules": [{"min_demand_frac": 0.0}, {"min_demand_frac": 0.35}]})
    obs, _ = env.reset(seed=0)
    assert obs["c0/farm0"][6] == pytest.approx(0.0) and obs["c1/farm0"][6] == pytest.approx(1.0)
    assert obs["c0/farm0"].dtype == np.float32


def test_unknown_env_config_key_is_named(env_module):
    with pytest.raises(ValueError, match=r"unknown env_config key\(s\) \['farms'\]"):
        env_module.FreshWaterEnv({"farms": 3})
    with pytest.raises(ValueError, match="unknown rule 'quota'"):
        env_module.FreshWaterEnv({"rules": [{"quota": 0.9}]})


def test_env_pickles_before_reset(env_module):
    env = pickle.loads(pickle.dumps(env_module.FreshWaterEnv({"num_farms": 2})))
    obs, _ = env.reset(seed=1)
    assert len(obs) == 2
