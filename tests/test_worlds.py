"""The world contract: both built-in worlds keep it, fresh water through it is the basin bit for bit, broken worlds
are refused in one line, and the fishery's dynamics are the surplus-production model they claim to be."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bilevel_tune.base.knobs import knob
from bilevel_tune.worlds import BUILTIN_WORLDS, load_world
from bilevel_tune.worlds.check import check_world
from bilevel_tune.worlds.contract import RuleSpec, WorldError, play_seasons
from bilevel_tune.worlds.fishery import Fishery, FisheryObjective, FisherySettings, stock
from bilevel_tune.worlds.fresh_water import Basin, Rules, WorldConfig, stack_days
from bilevel_tune.worlds.fresh_water.objective import ObjectiveSettings, ObjectiveWeights, assess
from bilevel_tune.worlds.fresh_water.world import FreshWater, myopic_best_response


@pytest.mark.parametrize("name", sorted(BUILTIN_WORLDS))
def test_every_built_in_world_keeps_the_contract(name):
    check_world(load_world(name))


@pytest.mark.parametrize(
    "world", [WorldConfig(horizon=40), WorldConfig(horizon=40, release_share=1.0, rain_probability=0.0)]
)
def test_fresh_water_through_the_contract_is_the_basin_stepped_by_hand_bit_for_bit(world):
    rng = np.random.default_rng(3)
    rules = [Rules.at_unit({"min_demand_frac": u, "fixed_quota": v}) for u, v in rng.random((5, 2))]
    # by hand: the basin stepped day by day with the myopic fractions, its days assessed
    basin, policy, episodes = Basin(world, rules), myopic_best_response(rules), []
    for seed in (11, 12):
        obs, days = basin.reset(np.random.default_rng(seed)), []
        while not basin.done:
            days.append(basin.step(np.repeat(policy(obs)[:, None], world.num_farms, axis=1)))
            obs = basin.observe()
        episodes.append(stack_days(days))
    direct = assess(episodes, rules, ObjectiveWeights(1.0, 0.5), basin.failed, world.smoothing)

    fresh = FreshWater(world, [r.as_dict() for r in rules])
    seasons, failed = play_seasons(fresh, [11, 12], fresh.myopic_actions)
    through = fresh.assess(seasons, failed, ObjectiveSettings(econ_weight=1.0, sus_weight=0.5))

    assert [d.as_dict() for d in direct] == [t.as_dict() for t in through]
    bound = fresh.reward_bound(seasons[0])
    assert bound.shape == (40, 5) and (seasons[0]["reward"].max(axis=2) <= bound + 1e-12).all()


# -- broken worlds: refused in one line naming the promise -----------------------------------------------
class WrongShape(Fishery):
    def observe(self):
        return super().observe()[:, :3]


@dataclasses.dataclass(frozen=True)
class CalmSettings(FisherySettings):
    calm: bool = knob(False, "no process noise (σ 0): a boolean setting, as a user writes one")


class CalmFishery(Fishery):
    """The fishery with a boolean setting: calm seasons have no process noise."""

    settings_class = CalmSettings

    def __init__(self, settings, rules):
        super().__init__(dataclasses.replace(settings, noise=0.0) if settings.calm else settings, rules)


@dataclasses.dataclass(frozen=True)
class RaisingSettings(FisherySettings):
    def __post_init__(self):
        raise RuntimeError("the user's own bug")


class RaisingFishery(Fishery):
    settings_class = RaisingSettings


class NaNRewards(Fishery):
    def step(self, actions):
        step = super().step(actions)
        rewards = step.rewards.copy()
        rewards[0, 0] = np.nan
        return dataclasses.replace(step, rewards=rewards)


class RuleOutOfRange(Fishery):
    rule_specs = (
        *Fishery.rule_specs[:-1],
        RuleSpec("restoration_subsidy", 0.0, 0.5, 0.9, "paid per effort", "subsidy"),
    )


class Unseeded(Fishery):
    def reset(self, rng):
        return super().reset(np.random.default_rng())  # ignores the season's rng


class EndsEarly(Fishery):
    @property
    def done(self):
        return self.t >= self.horizon - 1


class NoMyopicResponse(Fishery):
    myopic_actions = None  # the optional hook not offered


class NotABound(Fishery):
    def reward_bound(self, season):
        return super().reward_bound(season) - 0.5


@pytest.mark.parametrize(
    "world, says",
    [
        (WrongShape, "an observation has shape (4, 3); the contract asks (4, 8)"),
        (NaNRewards, "step() gave non-finite rewards (NaN or inf) for actions within the bounds"),
        (RuleOutOfRange, "rule 'restoration_subsidy': its default 0.9 is outside its range [0, 0.5]"),
        (Unseeded, "two seasons under one seed differ"),
        (EndsEarly, "done after 99 steps; its horizon is 100"),
        (NotABound, "reward_bound() lies below a reward an agent earned"),
    ],
)
def test_a_broken_world_is_refused_in_one_line_naming_the_broken_promise(world, says):
    with pytest.raises(WorldError) as err:
        check_world(world)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_world_that_does_not_import_or_is_not_a_world_is_refused_by_name():
    with pytest.raises(WorldError, match=r"world 'no_such_module:World' cannot be imported"):
        load_world("no_such_module:World")
    with pytest.raises(
        WorldError, match=r"world 'bilevel_tune.worlds.fresh_water:Rules' is not a world: it lacks name, settings_class"
    ):
        load_world("bilevel_tune.worlds.fresh_water:Rules")
    with pytest.raises(WorldError, match=r"world 'lake' is unknown; allowed: fresh-water, fishery, or module:Class"):
        load_world("lake")


def test_the_check_command_exits_2_with_one_line_on_a_broken_world(tmp_path):
    (tmp_path / "broken_world.py").write_text(
        "from bilevel_tune.worlds.fishery import Fishery\n\n"
        "class Tragedy(Fishery):\n    def observe(self):\n        return super().observe()[:, :2]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "bilevel_tune.worlds.check", "broken_world:Tragedy"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "bilevel_tune.worlds.check: error: fishery: an observation has shape (4, 2); the contract asks (4, 8)"
    )


# -- the fishery is the model it claims to be ------------------------------------------------------------
def test_logistic_growth_msy_and_the_rate_that_holds_it():
    assert stock.b_msy(5000.0, 1.0) == 2500.0 and stock.msy(0.3, 5000.0, 1.0) == pytest.approx(375.0)
    assert stock.f_msy(0.3, 1.0) == pytest.approx(0.15)
    assert stock.growth(2500.0, 0.3, 5000.0, 1.0) == pytest.approx(375.0)  # growth peaks at MSY
    # at B_msy, fishing F_msy·B_msy takes exactly the growth: the stock stays
    assert stock.next_stock(2500.0, 375.0, 0.0, 0.0, 0.3, 5000.0, 1.0, 0.02) == pytest.approx(2500.0)
    assert stock.next_stock(100.0, 1e6, 0.0, 0.0, 0.3, 5000.0, 1.0, 0.02) == 0.0  # never below zero


def test_catches_beyond_the_stock_are_cut_pro_rata_and_paid_as_landed():
    settings = FisherySettings(fishers=2, initial_stock=100.0, catch_multiple=20.0, noise=0.0)  # m·F_msy = 3
    world = Fishery(settings, [{"fine": 0.0}])
    world.reset(np.random.default_rng(0))
    step = world.step(np.array([[[1.0, 0.0], [0.5, 0.0]]]))  # asks 150 + 75 of a stock of 100
    cut = step.diagnostics["cut"][0]
    assert cut == pytest.approx(100.0 / 225.0) and step.diagnostics["catch"][0] == pytest.approx(100.0)
    assert step.rewards[0] == pytest.approx([cut, 0.5 * cut])


def test_the_rules_decide_whether_myopic_fishers_deplete_the_stock():
    lenient, strict = {"fine": 0.0}, {"fine": 2.0, "quota_max": 0.2}
    world = Fishery(FisherySettings(), [lenient, strict])
    seasons, failed = play_seasons(world, [1, 2], world.myopic_actions)
    a_lenient, a_strict = world.assess(seasons, failed, FisheryObjective())
    assert a_lenient.diagnostics["stock_share"] < 0.2 < 0.7 < a_strict.diagnostics["stock_share"]
    assert a_strict.objective > a_lenient.objective and not failed.any()
    assert set(a_strict.terms) == {"harvest_over_msy", "stock_above_threshold"} and a_strict.upper_bound is None


# -- a world of one's own, written for one copy ----------------------------------------------------------
def docs_module(tmp_path, module: str, first_line: str) -> Path:
    """A python block of docs/worlds.md saved as the page says, as `<module>.py`: the block that opens with
    `first_line`."""
    page = (Path(__file__).parent.parent / "docs" / "worlds.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    (tmp_path / f"{module}.py").write_text(next(b for b in blocks if b.startswith(first_line)))
    return tmp_path / f"{module}.py"


def docs_example(tmp_path) -> type:
    """docs/worlds.md's example world, saved as the page says: tragedy.py, a plain module."""
    docs_module(tmp_path, "tragedy", '"""Herders')
    sys.path.insert(0, str(tmp_path))
    try:
        return load_world("tragedy:Tragedy")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("tragedy", None)


def mpe_world(tmp_path, name: str) -> type:
    """One of docs/worlds.md's MPE2 worlds (`Spread`, `Adversary`), saved as the page says: mpe_worlds.py."""
    docs_module(tmp_path, "mpe_worlds", '"""MPE2')
    sys.path.insert(0, str(tmp_path))
    try:
        return load_world(f"mpe_worlds:{name}")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mpe_worlds", None)


def test_the_docs_example_world_keeps_the_contract_with_an_observation_per_agent(tmp_path):
    world = docs_example(tmp_path)
    check_world(world)
    instance = world(world.settings_class(), [{}, {"tax": 0.9}])
    (observation,) = instance.reset(np.random.default_rng(0))  # one kind of agent: the herders
    assert [kind.name for kind in world.kinds] == ["herder"] and observation.shape == (2, 3, 3)
    instance.step([np.array([[[1.0], [0.0], [0.5]]] * 2, dtype=np.float32)])
    took = instance.observe()[0][0, :, 1]
    assert took[0] > took[2] > took[1] == 0.0  # each herder sees its own take


BROKEN_ENV = '''
import functools
import numpy as np
from gymnasium.spaces import Box
from pettingzoo import ParallelEnv
from bilevel_tune.worlds.contract import RuleSpec
from bilevel_tune.worlds.pettingzoo import ParallelEnvWorld


class Deaf(ParallelEnv):
    """A ParallelEnv whose reset takes no options: PettingZoo's own test refuses it."""

    metadata = {"name": "deaf_v0"}
    possible_agents = ["a"]

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return Box(0.0, 1.0, (1,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return Box(0.0, 1.0, (1,), np.float32)

    def reset(self, seed=None):
        self.agents = list(self.possible_agents)
        return {"a": np.zeros(1, np.float32)}, {"a": {}}

    def step(self, actions):
        return {"a": np.zeros(1, np.float32)}, {"a": 0.0}, {"a": False}, {"a": False}, {"a": {}}


class Broken(ParallelEnvWorld):
    name = "broken"
    horizon = 5
    rule_specs = (RuleSpec("tax", 0.0, 1.0, 0.0, "a tax", "tax"),)
    searched_by_default = ("tax",)

    @staticmethod
    def make_env(settings, rules):
        return Deaf()

    @staticmethod
    def season_objective(season, objective):
        return {"objective": 0.0}
'''


def test_a_parallel_env_that_fails_pettingzoos_own_test_is_refused_in_one_line(tmp_path, capsys):
    from bilevel_tune.cli.main import main

    (tmp_path / "deaf.py").write_text(BROKEN_ENV)
    study = tmp_path / "deaf.toml"
    study.write_text(
        'name = "deaf"\n[world]\nkind = "deaf:Broken"\n[grid]\npopulation = [2]\noptimize_params = [["tax"]]\n'
        "seed = [1]\n[budget]\ngenerations = 2\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        assert main([str(study), "--results", str(tmp_path / "r"), "--wandb", "disabled"]) == 2
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("deaf", None)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "world 'broken' fails PettingZoo's parallel_api_test" in err, err
    assert not (tmp_path / "r").exists()


def test_the_docs_example_is_a_real_parallel_env_stepped_one_environment_per_copy(tmp_path):
    from pettingzoo import ParallelEnv

    world = docs_example(tmp_path)
    assert isinstance(world.one(world.settings_class(), {"tax": 0.0, "rest_pay": 0.0}).env, ParallelEnv)
    copies = world(world.settings_class(), [{}, {"tax": 0.5}, {"tax": 1.0}])
    space = world.kinds[0].observation_space
    assert len({id(env) for env in copies.envs}) == 3 and (space.low.min(), space.high.max()) == (0.0, 1.0)


def test_copies_of_a_one_copy_world_are_its_instances_run_one_by_one(tmp_path):
    world = docs_example(tmp_path)
    rules = [{"tax": 0.2}, {"tax": 0.7, "rest_pay": 0.4}]
    copies = world(world.settings_class(), rules)
    rng = np.random.default_rng(5)
    actions = rng.random((copies.horizon, 2, 3, 1)).astype(np.float32)
    copies.reset(np.random.default_rng(9))
    seed = int(np.random.default_rng(9).integers(2**31 - 1))  # the one seed every copy is reset with
    together = [copies.step([a]).rewards for a in actions]
    for k, rule in enumerate(rules):
        alone = world.one(world.settings_class(), {"tax": 0.0, "rest_pay": 0.0, **rule})
        alone.reset(seed=seed)
        for t, a in enumerate(actions):
            rewards = alone.step({agent: a[k, i] for i, agent in enumerate(alone.possible_agents)})[1]
            assert [rewards[agent] for agent in alone.possible_agents] == together[t][k].tolist()


def test_the_default_search_of_the_fishery_has_an_interior_optimum_for_myopic_fishers():
    quotas = np.linspace(0.1, 1.0, 10)  # quota_max over its range, the other rules at their defaults (fine 1.5)
    world = Fishery(FisherySettings(), [{"quota_max": q} for q in quotas])
    seasons, failed = play_seasons(world, [1, 2, 3], world.myopic_actions)
    objective = np.array([a.objective for a in world.assess(seasons, failed, FisheryObjective())])
    best = int(np.argmax(objective))
    assert 0 < best < len(quotas) - 1 and objective[best] > objective[-1] + 0.3  # 1.84 at 0.3 against 1.30 at 1


# -- PettingZoo environments as their users write them: MPE2's, kinds, spaces, agents that leave ----------------
def test_mpe2_environments_keep_the_contract_with_discrete_actions_and_two_kinds_of_agent(tmp_path):
    spread, adversary = mpe_world(tmp_path, "Spread"), mpe_world(tmp_path, "Adversary")
    check_world(spread)
    check_world(adversary)
    (agents,) = spread(spread.settings_class(), [{}]).kinds
    assert agents.name == "agent" and agents.agents == (0, 1, 2) and agents.action_space.n == 5
    two = adversary(adversary.settings_class(), [{}, {"bounty": 1.0}])
    assert [(k.name, k.agents, k.observation_space.shape) for k in two.kinds] == [
        ("adversary", (0,), (8,)), ("agent", (1, 2), (10,))
    ]
    observations = two.reset(np.random.default_rng(0))
    assert [o.shape for o in observations] == [(2, 1, 8), (2, 2, 10)] and np.isfinite(observations[1]).all()
    step = two.step([np.array([[1], [2]]), np.array([[0, 4], [3, 3]])])  # Discrete indices, as the space's dtype
    assert step.rewards.shape == (2, 3) and set(step.diagnostics) == {"own_reward", "alive"}


MPE2_KINDS = {  # every environment MPE2 ships: its kinds as the adapter groups them (agents, observation size, choices)
    "collect_treasure_v1": [("collector", 6, 86, 5), ("deposit", 2, 84, 5)],
    "simple_adversary_v3": [("adversary", 1, 8, 5), ("agent", 2, 10, 5)],
    "simple_crypto_v3": [("eve", 1, 4, 4), ("bob_alice", 2, 8, 4)],
    "simple_formation_v1": [("agent", 4, 6, 5)],
    "simple_line_v1": [("agent", 4, 8, 5)],
    "simple_push_v3": [("adversary", 1, 8, 5), ("agent", 1, 19, 5)],
    "simple_reference_v3": [("agent", 2, 21, 50)],  # a move and a word: a Box of 5 + 10 when continuous
    "simple_speaker_listener_v4": [("speaker", 1, 3, 3), ("listener", 1, 11, 5)],
    "simple_spread_v3": [("agent", 3, 18, 5)],
    "simple_tag_v3": [("adversary", 3, 16, 5), ("agent", 1, 14, 5)],
    "simple_v3": [("agent", 1, 4, 5)],
    "simple_world_comm_v3": [("leadadversary", 1, 34, 20), ("adversary", 3, 34, 5), ("agent", 2, 28, 5)],
}
MPE2_BOX = {"simple_reference_v3": [15], "simple_world_comm_v3": [9, 5, 5]}  # else a Box of as many as the choices


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_every_mpe2_environment_keeps_the_contract_under_a_rule_with_its_kinds(continuous):
    """Not one environment written here: each of MPE2's, under a regulator's rule (a reward scale), passes the
    check with its kinds — up to three (simple_world_comm), of one agent or several, Discrete(3…50) or Box."""
    import importlib

    from pettingzoo.utils import BaseParallelWrapper

    from bilevel_tune.worlds.pettingzoo import ParallelEnvWorld, as_world

    class Scaled(BaseParallelWrapper):
        def __init__(self, env, scale):
            super().__init__(env)
            self.scale = scale

        def step(self, actions):
            observations, rewards, terminations, truncations, _ = self.env.step(actions)
            infos = {agent: {"own_reward": reward} for agent, reward in rewards.items()}
            rewards = {agent: reward * self.scale for agent, reward in rewards.items()}
            return observations, rewards, terminations, truncations, infos

    for name, kinds in MPE2_KINDS.items():
        module = importlib.import_module(f"mpe2.{name}")

        class Declared(ParallelEnvWorld):
            horizon = 5
            rule_specs = (RuleSpec("scale", 0.5, 1.0, 1.0, "what a reward counts", "scale"),)
            searched_by_default = ("scale",)

            @staticmethod
            def make_env(settings, rules, module=module):
                env = module.parallel_env(max_cycles=5, continuous_actions=continuous)
                return Scaled(env, rules["scale"])

            @staticmethod
            def season_objective(season, objective):
                return {"objective": float(season["own_reward"].mean())}

        Declared.name = name
        world = as_world(Declared)
        check_world(world)
        assert [(k.name, len(k.agents), *k.observation_space.shape) for k in world.kinds] == [k[:3] for k in kinds]
        box = MPE2_BOX.get(name, [choices for *_, choices in kinds])
        for kind, (*_, choices), size in zip(world.kinds, kinds, box):
            space = kind.action_space
            assert space.dtype == np.float32 and space.shape == (size,) if continuous else space.n == choices, name


def test_a_setting_that_changes_the_spaces_gives_the_kinds_of_the_environments_built(tmp_path):
    spread = mpe_world(tmp_path, "Spread")
    continuous = spread(spread.settings_class(actions="continuous"), [{}])
    (agents,) = continuous.kinds
    assert agents.action_space.shape == (5,) and agents.action_space.dtype == np.float32


LEAVING_ENV = '''
import functools
import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, MultiDiscrete
from pettingzoo import ParallelEnv
from bilevel_tune.worlds.contract import RuleSpec
from bilevel_tune.worlds.pettingzoo import ParallelEnvWorld


class Dwindle(ParallelEnv):
    """Walkers leave one by one (walker_i at step i + 1); observations a Dict, actions a MultiDiscrete."""

    metadata = {"name": "dwindle_v0"}

    def __init__(self, toll=0.0):
        self.possible_agents = ["walker_0", "walker_1", "walker_2"]
        self.toll = toll

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return Dict({"step": Discrete(6), "where": Box(-1.0, 1.0, (2,), np.float32)})

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return MultiDiscrete([3, 2])

    def _observe(self):
        return {a: {"step": self.t, "where": np.zeros(2, np.float32)} for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), "an action for every agent still in, none for one that left"
        self.t += 1
        rewards = {a: float(actions[a][0]) - self.toll for a in self.agents}
        leaving = {a: a == f"walker_{self.t - 1}" for a in self.agents}
        infos = {a: {"step": self.t} for a in self.agents}
        observations = self._observe()
        self.agents = [a for a in self.agents if not leaving[a]]
        return observations, rewards, leaving, dict.fromkeys(leaving, False), infos


class Walk(ParallelEnvWorld):
    name = "walk"
    horizon = 5
    rule_specs = (RuleSpec("toll", 0.0, 1.0, 0.0, "paid a step", "toll"),)
    searched_by_default = ("toll",)

    @staticmethod
    def make_env(settings, rules):
        return Dwindle(rules["toll"])

    @staticmethod
    def season_objective(season, objective):
        return {"objective": float(season["reward"].sum(axis=1).mean())}
'''


def leaving_world(tmp_path, monkeypatch) -> type:
    (tmp_path / "dwindle.py").write_text(LEAVING_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "dwindle", raising=False)
    return load_world("dwindle:Walk")


def test_agents_that_leave_are_asked_nothing_more_and_their_last_reward_counts(tmp_path, monkeypatch):
    world = leaving_world(tmp_path, monkeypatch)
    check_world(world)  # the environment itself asserts that no action reaches an agent that left
    (kind,) = world.kinds
    assert kind.observation_space.__class__.__name__ == "Dict"
    copies = world(world.settings_class(), [{}, {"toll": 0.5}])
    (first,) = copies.reset(np.random.default_rng(0))
    assert first.shape == (2, 3, 6 + 2)  # the Dict flattened: its Discrete one-hot, then its Box
    rewards, alive = [], []
    for _ in range(copies.horizon):
        step = copies.step([np.full((2, 3, 2), [2, 1])])
        rewards.append(step.rewards[0])
        alive.append(step.diagnostics["alive"][0])
    assert np.array_equal(np.array(alive), [[1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
    assert np.array_equal(np.array(rewards)[:, 2], [2, 2, 2, 0, 0])  # walker_2 earns at its last step, then nothing
    assert not copies.alive.any() and copies.done


SPURIOUS = '''
import functools
import numpy as np
from gymnasium.spaces import Box, Graph, Discrete
from pettingzoo import ParallelEnv
from bilevel_tune.worlds.contract import RuleSpec
from bilevel_tune.worlds.pettingzoo import ParallelEnvWorld


class Net(ParallelEnv):
    metadata = {"name": "net_v0"}
    possible_agents = ["node_0"]

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return Graph(node_space=Box(0.0, 1.0, (2,)), edge_space=Discrete(2))

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: self.observation_space(a).sample() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        over = {a: True for a in self.agents}
        obs = {a: self.observation_space(a).sample() for a in self.agents}
        self.agents = []
        return obs, dict.fromkeys(over, 0.0), dict.fromkeys(over, False), over, dict.fromkeys(over, {})


class Networked(ParallelEnvWorld):
    name = "networked"
    horizon = 1
    rule_specs = (RuleSpec("tax", 0.0, 1.0, 0.0, "a tax", "tax"),)
    searched_by_default = ("tax",)

    @staticmethod
    def make_env(settings, rules):
        return Net()

    @staticmethod
    def season_objective(season, objective):
        return {"objective": 0.0}
'''


def test_a_space_the_adapter_cannot_carry_is_one_line_naming_the_agent_and_the_space(tmp_path, capsys):
    from bilevel_tune.worlds.check import main as check_main

    (tmp_path / "networked.py").write_text(SPURIOUS)
    sys.path.insert(0, str(tmp_path))
    try:
        assert check_main(["networked:Networked"]) == 2
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("networked", None)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "agent 'node_0': its observation space Graph(" in err, err
    assert "allowed: Box, Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of them" in err


# -- settings of every kind, and a user's code that raises ------------------------------------------------------------
def test_a_boolean_setting_is_a_setting_like_any_other(tmp_path, capsys):
    from bilevel_tune.cli.main import main
    from bilevel_tune.worlds.check import main as check_main

    assert check_main(["tests.test_worlds:CalmFishery"]) == 0
    assert CalmFishery(CalmSettings(calm=True), [{}]).settings.noise == 0.0
    study = tmp_path / "calm.toml"
    fishery = (Path(__file__).resolve().parent.parent / "studies" / "fishery.toml").read_text()
    study.write_text(fishery.replace('kind = "fishery"', 'kind = "tests.test_worlds:CalmFishery"\ncalm = true'))
    capsys.readouterr()
    assert main([str(study), "--inner", "analytic", "--dry-run", "--results", str(tmp_path / "r")]) == 0
    assert "[world] fishers 5, horizon 100, growth_rate 0.3" in (out := capsys.readouterr().out) and "calm true" in out
    for argv, message in [
        (["--set", "world.calm=maybe"], "--set: world.calm='maybe' must be true or false"),
        (["--set", "world.calm=1"], "--set: world.calm='1' must be true or false"),
    ]:
        assert main([str(study), "--inner", "analytic", "--dry-run", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    study.write_text(fishery.replace('kind = "fishery"', 'kind = "tests.test_worlds:CalmFishery"\ncalm = 1'))
    assert main([str(study), "--inner", "analytic", "--dry-run"]) == 2
    assert "calm=1 must be true or false" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_world_whose_own_code_raises_is_one_line_naming_where(tmp_path, capsys):
    from bilevel_tune.cli.main import main
    from bilevel_tune.worlds.check import main as check_main

    assert check_main(["tests.test_worlds:RaisingFishery"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "RuntimeError in your code, test_worlds.py:" in err and "(__post_init__): the user's own bug" in err
    study = tmp_path / "raising.toml"
    fishery = (Path(__file__).resolve().parent.parent / "studies" / "fishery.toml").read_text()
    study.write_text(fishery.replace('kind = "fishery"', 'kind = "tests.test_worlds:RaisingFishery"'))
    assert main([str(study), "--inner", "analytic", "--dry-run", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError in your code, test_worlds.py:" in err
    assert not (tmp_path / "r").exists()
