"""Both APPO loops on any world on the contract: the fishery (two actions, one observation per copy) and the docs'
example world (written for one copy, an observation per agent) — the stacked update is still RLlib's per-agent one,
untrained policies act alike, and a study on the fishery runs end to end with real APPO."""

import dataclasses
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.worlds import load_world

from .test_worlds import docs_example, leaving_world, mpe_world

pytestmark = pytest.mark.rllib  # RLlib is imported by the tests, not at collection


def tiny_config(kind: str, **settings) -> InnerLoopConfig:
    world = load_world(kind)
    known = {f.name for f in dataclasses.fields(world.settings_class)}
    settings = {k: v for k, v in settings.items() if k in known}  # a world without a horizon setting keeps its own
    return InnerLoopConfig(
        hidden=(8,),
        world_kind=kind,
        world_settings=world.settings_class(**settings),
        objective_settings=world.objective_class(),
    )


WORLDS = ("fishery", "example", "mpe-spread", "mpe-adversary", "walkers")


@pytest.fixture(params=WORLDS)
def kind(request, tmp_path, monkeypatch):
    """The fishery; the docs' example world (`tragedy:Tragedy`, as a study run from its folder); MPE2's
    simple_spread (a Discrete action) and simple_adversary (two kinds of agent), as docs/worlds.md declares them;
    walkers that leave one by one (a Dict observation, a MultiDiscrete action)."""
    if request.param == "fishery":
        yield "fishery"
        return
    monkeypatch.syspath_prepend(str(tmp_path))
    if request.param == "example":
        docs_example(tmp_path)
        yield "tragedy:Tragedy"
    elif request.param == "walkers":
        leaving_world(tmp_path, monkeypatch)
        yield "dwindle:Walk"
    else:
        name = {"mpe-spread": "Spread", "mpe-adversary": "Adversary"}[request.param]
        mpe_world(tmp_path, name)
        yield f"mpe_worlds:{name}"
    for module in ("tragedy", "mpe_worlds", "dwindle"):
        sys.modules.pop(module, None)


def far_apart(world) -> list[dict[str, float]]:
    """Three rule sets far apart (the first rule at its default, high and low end): one clipped, one not."""
    first = world.rule_specs[0]
    return [{}, {first.name: first.high}, {first.name: first.low}]


# -- the batch: per-agent observations, vector actions --------------------------------------------------
def test_a_season_of_observations_per_agent_is_encoded_row_by_row_with_its_actions_whole():
    from ray.rllib.core.columns import Columns

    from bilevel_tune.appo.batch import PopulationFragment, population_rows
    from bilevel_tune.appo.module import LAKE_ROW

    steps, copies, agents, size, actions = 3, 2, 2, 4, 2
    rng = np.random.default_rng(0)
    fragment = PopulationFragment(
        observations=rng.random((steps + 1, copies, agents, size), dtype=np.float32),
        actions=rng.random((steps, copies, agents, actions), dtype=np.float32),
        action_logp=rng.random((steps, copies, agents), dtype=np.float32),
        rewards=rng.random((steps, copies, agents), dtype=np.float32),
    )
    rows = population_rows([fragment], chunk=steps + 1)
    assert LAKE_ROW not in rows and not fragment.shared_observation
    block = agents * (steps + 1)  # candidate-major: candidate 1's rows start here
    # candidate 1, agent 1, step 2: its own observation and its whole action vector
    assert np.array_equal(rows[Columns.OBS][block + (steps + 1) + 2], fragment.observations[2, 1, 1])
    assert np.array_equal(rows[Columns.ACTIONS][block + (steps + 1) + 2], fragment.actions[2, 1, 1])
    assert rows[Columns.ACTIONS].shape == (copies * block, actions)


def test_a_raw_action_lands_in_the_world_s_bounds_as_rllib_unsquashes_it():
    import gymnasium as gym
    from ray.rllib.utils.spaces.space_utils import unsquash_action

    from bilevel_tune.appo.module import farm_fraction
    from bilevel_tune.appo.world_io import unsquash

    raw = np.random.default_rng(1).normal(0, 2, (50, 2)).astype(np.float32)
    low, high = np.array([0.0, -1.0], np.float32), np.array([1.0, 3.0], np.float32)
    assert np.array_equal(unsquash(raw, low, high), unsquash_action(raw, gym.spaces.Box(low, high)))
    assert np.array_equal(unsquash(raw[:, :1], 0.0, 1.0), farm_fraction(raw[:, :1]))  # fresh water's, bit for bit


# -- both loops on both worlds -------------------------------------------------------------------------
@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("kind", [w for w in WORLDS if w != "walkers"], indirect=True)
def test_one_update_equals_separate_stock_updates_on_another_world(ray_cluster, kind):
    """Every world but the walkers: an agent that leaves ends its own episode in RLlib's batch, where the stacked
    batch keeps its place, masked (docs/worlds.md), so their rows do not line up one for one."""
    from bilevel_tune.appo.equivalence import update_equivalence

    report = update_equivalence(tiny_config(kind, horizon=12), far_apart(load_world(kind)), seed=3)
    assert report.initial_weights_identical and report.clipped_and_not, report
    assert report.equivalent, report


@pytest.mark.ray
@pytest.mark.slow
def test_untrained_policies_act_alike_in_both_loops_and_training_runs_on_another_world(ray_cluster, kind):
    from bilevel_tune.appo.multiagent import MultiAgentPolicyLoop
    from bilevel_tune.appo.population import PopulationPolicyLoop

    config = tiny_config(kind, horizon=10)
    rules = far_apart(load_world(kind))
    untrained, trained = {}, {}
    for loop_class in (MultiAgentPolicyLoop, PopulationPolicyLoop):
        loop = loop_class(config)
        try:
            loop.reset(rules, seed=11, candidates=range(len(rules)))
            untrained[loop_class] = loop.evaluate([4, 5])
            for _ in range(2):
                loop.train()
            trained[loop_class] = loop.evaluate([4, 5])
        finally:
            loop.stop()
    assert untrained[PopulationPolicyLoop] == untrained[MultiAgentPolicyLoop]  # Assessments, every term
    assert len({a.objective for a in untrained[PopulationPolicyLoop]}) == len(rules)
    for outcomes in trained.values():
        assert all(np.isfinite(a.objective) and not a.failed for a in outcomes)
        assert set(outcomes[0].terms) == set(untrained[PopulationPolicyLoop][0].terms)


@pytest.mark.ray
@pytest.mark.slow
def test_the_fishery_study_runs_with_real_appo_and_a_summary(ray_cluster, tmp_path):
    import pandas as pd

    from bilevel_tune.cli.main import main

    args = ["fishery", "--quick", "--population", "2", "--seed", "42", "--optimize-params", "quota_max"]
    assert main([*args, "--set", "world.horizon=10", "--wandb", "disabled", "--results", str(tmp_path)]) == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    (trial,) = pd.read_csv(run / "trials.csv").to_dict("records")
    assert trial["status"] == "complete" and trial["generations"] == 3 and trial["final_objective"] > 0
    assert trial["diag_harvest_over_msy"] > 0
    summary = (run / "summary.md").read_text()
    assert summary.startswith("# Study fishery (budget quick, inner loop appo)")
    assert "[world] fishers 5, horizon 10" in summary


# -- MPE2, as a user brings it: the docs' recipe, from an empty folder ---------------------------------------------
def docs_study(tmp_path, world: str) -> None:
    """docs/worlds.md's MPE2 study (spread.toml; the adversary's as the page says to change it), beside
    mpe_worlds.py, in an empty folder."""
    import re

    from .test_worlds import docs_module

    docs_module(tmp_path, "mpe_worlds", '"""MPE2')
    page = (Path(__file__).parent.parent / "docs" / "worlds.md").read_text()
    spread = next(b for b in re.findall(r"```toml\n(.*?)```", page, re.S) if 'name = "spread"' in b)
    if world == "adversary":
        spread = spread.replace('name = "spread"', 'name = "adversary"').replace("mpe_worlds:Spread", "mpe_worlds:Adversary")
        spread = re.sub(r"optimize_params = .*", 'optimize_params = [["bounty"]]', spread)
    (tmp_path / f"{world}.toml").write_text(spread)


MPE_STUDIES = {
    "spread-discrete": ("spread", []),
    "spread-continuous": ("spread", ["--set", "world.actions=continuous", "--optimize-params", "fine"]),
    "adversary": ("adversary", []),
}


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("case", MPE_STUDIES)
def test_an_mpe2_study_runs_with_real_appo_from_an_empty_folder_and_warns_of_nothing(tmp_path, case):
    """simple_spread_v3 with its default Discrete(5) actions and with a Box(0, 1, (5,)) float32, and
    simple_adversary_v3 (agents of two kinds): the world checked, then a quick study with real APPO — every action in its space's
    dtype, so PettingZoo warns of none (a float64 action in that Box: 231 warnings in one such run's log)."""
    world, extra = MPE_STUDIES[case]
    import subprocess

    import pandas as pd

    docs_study(tmp_path, world)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(tmp_path), "PYTHONWARNINGS": "default"}
    check = subprocess.run([sys.executable, "-m", "bilevel_tune.worlds.check", f"mpe_worlds:{world.title()}"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0 and "keeps the world contract" in check.stdout, check.stderr
    run = subprocess.run(
        [sys.executable, "-m", "bilevel_tune.study", f"{world}.toml", "--quick", *extra, "--wandb", "disabled"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "outside action space" not in log and "UserWarning" not in log
    (folder,) = (tmp_path / "results").iterdir()
    trials = pd.read_csv(folder / "trials.csv")
    assert (trials["status"] == "complete").all() and np.isfinite(trials["final_objective"]).all()
    if case != "adversary":
        return
    # the folder reads with the package alone: its study.json keeps the world's portrait, so with mpe_worlds.py gone
    # the summary rebuilds to the same answers and settings, and --status reads it (once per world kind is enough)
    before = {name: (folder / name).read_text() for name in ("summary.md", "trials.csv")}
    (tmp_path / "mpe_worlds.py").unlink()
    bare = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    for command in (["bilevel_tune.summary", str(folder), "--no-plots"], ["bilevel_tune.study", "--status", str(folder)]):
        read = subprocess.run([sys.executable, "-m", *command], cwd=Path(__file__).resolve().parents[1], env=bare, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert read.returncode == 0, read.stdout[-2000:] + read.stderr[-2000:]
    assert (folder / "trials.csv").read_text() == before["trials.csv"]
    settings = [[line for line in text.splitlines() if re.match(r"\[(world|objective|rules)\] ", line)]
                for text in (before["summary.md"], (folder / "summary.md").read_text())]  # fmt: skip
    assert settings[1][0].startswith("[world] ") and settings[1][-1].startswith("[rules] ")
    assert settings[0] == settings[1], "the portrait gives the world's settings as its module did"
