"""The PPO loop (`ppo`): RLlib PPO, a held-out learner (docs/verdicts.md) — batched as APPO is, or per agent.

With lake streams (every run begun since lakes) `PPOPolicyLoop` trains the whole block — several final seeds'
lakes — as one population module (`ppo_learner`: each candidate's GAE, minibatches, loss, KL coefficient and
gradient clip its own), sampled by the population env runner. A run begun before keeps RLlib's per-agent path
(`PerAgentPPOLoop`), on which it began: the per-agent APPO loop's env (`WorldEnv`, module `cand{k}` per
candidate), RLlib's default PPO module. Either way each candidate's initial weights are drawn from
`candidate_seed(seed, k)` as APPO's are, with the study's network and budget: K train() calls a generation, each
on one season of the block (`fragments_per_batch` of them), the study's learning rate, discount, entropy
coefficient and gradient clip. PPO's own method otherwise (RLlib's defaults: GAE with λ 1, the clipped
surrogate, its adaptive KL term), one epoch of minibatches of one season's rows of a candidate.
Evaluation is the shared one: explore off, the world's assessment.
"""

from __future__ import annotations

from functools import partial

from bilevel_tune.appo.multiagent import MultiAgentPolicyLoop, build_multiagent_algorithm
from bilevel_tune.appo.population import PopulationPolicyLoop
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.contract import LAKE_STREAMS


def ppo_config(config: InnerLoopConfig, seed: int):
    """RLlib's PPOConfig with the study's network-independent settings: new API stack, torch, in-process."""
    from ray.rllib.algorithms.ppo import PPOConfig

    batch = config.season_length * config.fragments_per_batch
    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=config.season_length)
        .learners(num_learners=0)
        .training(
            gamma=config.discount,
            lr=config.lr,
            entropy_coeff=config.entropy_coeff,
            grad_clip=config.grad_clip,
            train_batch_size_per_learner=batch,
            minibatch_size=batch,
            num_epochs=1,
        )
        .reporting(min_time_s_per_iteration=0, metrics_num_episodes_for_smoothing=1)
        .debugging(seed=int(seed), log_level="ERROR", log_sys_usage=False)
    )


def population_ppo_config(config: InnerLoopConfig, seed: int):
    """PPO's settings, learnt by `PopulationPPOLearner` (which cuts its own minibatches) from `PopulationPPOBatch`."""
    from bilevel_tune.appo.ppo_learner import PopulationPPOBatch, PopulationPPOLearner

    algo_config = ppo_config(config, seed)
    return algo_config.training(minibatch_size=None, shuffle_batch_per_epoch=False).learners(
        learner_class=PopulationPPOLearner,
        learner_connector=partial(PopulationPPOBatch, gamma=algo_config.gamma, lambda_=algo_config.lambda_),
        add_default_connectors_to_learner_pipeline=False,
    )


class PPOLearnsInItsCall:
    """PPO learns inside its train() call: nothing is queued, no learner thread to stop or count."""

    def drain(self) -> None:
        pass

    def stop_algorithm(self, algo) -> bool:
        algo.stop()  # PPO's local learner runs in the caller's thread
        return True

    def learner_thread_class(self) -> type | None:
        return None


class PerAgentPPOLoop(PPOLearnsInItsCall, MultiAgentPolicyLoop):
    """RLlib PPO, per agent: the per-agent APPO loop's env, modules and greedy actions, PPO's algorithm."""

    def new_algorithm(self, rules, seed, candidates):
        return build_multiagent_algorithm(self.config, rules, seed, candidates, algorithm=ppo_config)


class PPOPolicyLoop(PPOLearnsInItsCall, PopulationPolicyLoop):
    """RLlib PPO on the population module; a run begun before lakes (block streams) gets `PerAgentPPOLoop`."""

    def __new__(cls, config: InnerLoopConfig):
        if config.streams != LAKE_STREAMS:
            return PerAgentPPOLoop(config)  # the path such a run began on: its numbers as they were
        return super().__new__(cls)

    def algorithm_config(self, config: InnerLoopConfig, seed: int):
        return population_ppo_config(config, seed)
