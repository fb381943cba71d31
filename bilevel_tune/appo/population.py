"""The population APPO loop (`appo`): one RLlib APPO Algorithm whose single module is the whole block.

RLlib's own extension points carry it (docs/inner-loop.md): the module is
a `PopulationAPPOModule` (stacked per-candidate parameters, one batched
forward per step), sampling is a `PopulationEnvRunner` (`env_runner_cls`:
the block's world stepped directly, a season written in bulk), the learner
connector `PopulationBatch` lays the season out as the per-agent loop's
episodes would be, and `PopulationAPPOLearner` (`learner_class`) sums the
candidates' APPO losses and clips each candidate's gradient alone.
`Algorithm.train()`, APPO's training step, its learner thread, loss, target
network and Adam are RLlib's.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Sequence

from bilevel_tune.appo.batch import PopulationBatch
from bilevel_tune.appo.env_runner import PopulationEnvRunner
from bilevel_tune.appo.learner import PopulationAPPOLearner
from bilevel_tune.appo.local_learner import trained_module
from bilevel_tune.appo.loop import APPOLoop
from bilevel_tune.appo.module import HIDDEN, INIT_SEEDS, POPULATION, PopulationAPPOModule
from bilevel_tune.appo.rllib_config import algorithm_from, appo_config
from bilevel_tune.appo.world_env import kind_seed
from bilevel_tune.appo.world_io import block_env_config, kinds_of
from bilevel_tune.inner import InnerLoopConfig, candidate_seed
from bilevel_tune.inner.contract import LAKE_STREAMS
from bilevel_tune.worlds.contract import Assessment
from bilevel_tune.worlds.lakes import Lake


class CouplingSettingError(ValueError):
    """An APPO setting the stacked module cannot honour for each candidate alone; one line for the user."""


def refuse_coupling_settings(algo_config) -> None:
    """Raise for an APPO setting that would make candidates of one block depend on each other.

    The stacked update equals N independent ones only when every part of it is per candidate
    or elementwise (docs/inner-loop.md); these are not.
    """
    alternative = "; the per-agent loop (--inner appo-multiagent) honours it"
    if getattr(algo_config, "use_kl_loss", False):
        raise CouplingSettingError(
            "APPO's use_kl_loss adapts one KL coefficient per module: in the population module it would "
            "follow the block's mean KL, not each candidate's" + alternative
        )
    if algo_config.grad_clip and algo_config.grad_clip_by == "norm":
        raise CouplingSettingError(
            "APPO's grad_clip_by='norm' clips each parameter tensor by its norm: a stacked tensor's norm "
            "mixes the candidates" + alternative
        )
    if getattr(algo_config, "minibatch_size", None):
        raise CouplingSettingError(
            "APPO's minibatch_size slices the training rows: the slices would not follow the candidates' "
            "blocks" + alternative
        )


def build_population_algorithm(
    config: InnerLoopConfig,
    rules: Sequence,
    seed: int,
    candidates: Sequence[int] = (),
    lakes: Sequence[Lake] = (),
    method: Callable | None = None,
):
    """APPO over one PopulationAPPOModule for the block — one per kind of agent, where the world declares kinds —
    (`candidates`, default 0, 1, …, seed their initial weights). A block of `lakes`: each lake's initial weights
    from its own (seed, index), and its world's streams too (`env_runner.PerLake`). `method(config, seed)` gives
    another algorithm's config, its learner and connector set (`ppo.population_ppo_config`)."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    candidates = list(candidates) or list(range(len(rules)))
    lakes = list(lakes) or [Lake(r, seed, k) for r, k in zip(rules, candidates)]
    kinds = kinds_of(config.build_world(rules))
    modules = {
        kind.name: RLModuleSpec(
            module_class=PopulationAPPOModule,
            observation_space=kind.observation_space,
            action_space=kind.action_space,
            model_config={
                POPULATION: len(rules),
                HIDDEN: list(config.hidden),
                INIT_SEEDS: [kind_seed(candidate_seed(lake.seed, lake.index), kind, kinds) for lake in lakes],
            },
        )
        for kind in kinds
    }
    first = kinds[0]
    algo_config = (
        (method or population_appo_config)(config, seed)
        .environment(
            env_config=block_env_config(config, rules, seed, lakes if config.streams == LAKE_STREAMS else ()),
            observation_space=first.observation_space,
            action_space=first.action_space,
            # the runner maps raw actions into the world's bounds itself (world_io.unsquash)
            normalize_actions=False,
            clip_actions=False,
        )
        .env_runners(env_runner_cls=PopulationEnvRunner)
    )
    if len(kinds) == 1:  # every agent of one kind: RLlib's default module
        algo_config = algo_config.rl_module(rl_module_spec=modules[first.name])
    else:  # a module per kind: RLlib's multi-module path, each kind's fragments its module's rows
        algo_config = algo_config.multi_agent(policies=set(modules)).rl_module(
            rl_module_spec=MultiRLModuleSpec(rl_module_specs=modules)
        )
    return algorithm_from(algo_config)


def population_appo_config(config: InnerLoopConfig, seed: int):
    """The study's APPO settings, learnt by `PopulationAPPOLearner` from `PopulationBatch`'s rows."""
    algo_config = appo_config(config, seed).learners(
        learner_class=PopulationAPPOLearner,
        learner_connector=partial(PopulationBatch, chunk=config.season_length),
        add_default_connectors_to_learner_pipeline=False,
    )
    refuse_coupling_settings(algo_config)
    return algo_config


class PopulationPolicyLoop(APPOLoop):
    """The population APPO loop: the whole block in one module, one env runner, one learner.

    With lake streams (`InnerLoopConfig.streams`), it trains any block of lakes — several seeds' — as one
    (`reset_lakes`, `evaluate_lakes`): each lake draws from its own (seed, index), so its numbers do not depend
    on which lakes share its block.
    """

    def algorithm_config(self, config: InnerLoopConfig, seed: int):
        """The RLlib algorithm's config, its learner and connector set, before the block's env and module."""
        return population_appo_config(config, seed)

    def new_algorithm(self, rules, seed, candidates):
        return build_population_algorithm(self.config, rules, seed, candidates, method=self.algorithm_config)

    def reset_lakes(self, lakes: Sequence[Lake]) -> bool:
        """Fresh policies for a block of lakes, each under its own rules and seed."""
        lakes = list(lakes)
        build = lambda rules, seed, candidates: build_population_algorithm(  # noqa: E731
            self.config, rules, seed, lakes=lakes, method=self.algorithm_config
        )
        return self.renew([lake.rules for lake in lakes], lakes[0].seed, [lake.index for lake in lakes], build)

    def evaluate_lakes(self, seeds: Sequence[Sequence[int]]) -> list[Assessment]:
        """Explore-off evaluation, lake k on `seeds[k]` (a group of consecutive lakes given one list plays its
        seasons as one world: a search's candidates on its evaluation seeds, bit for bit `evaluate`)."""
        return self.evaluate_lakes_on(self.rules, seeds)

    def greedy_actions(self):
        from ray.rllib.core import DEFAULT_MODULE_ID

        kinds = kinds_of(self.config.build_world(self.rules))
        ids = [DEFAULT_MODULE_ID] if len(kinds) == 1 else [kind.name for kind in kinds]
        modules = [trained_module(self.algo, module_id).unwrapped() for module_id in ids]
        return lambda per_kind: [module.greedy_actions(obs) for module, obs in zip(modules, per_kind)]
