"""The PPO loop (`ppo`): RLlib PPO through RLlib's per-agent path, a held-out learner (docs/verdicts.md).

The same env shell as the per-agent APPO loop (`WorldEnv`: the block's copies of the world, every agent of
candidate k — of each kind — sharing module `cand{k}`), RLlib's default PPO module per candidate, its initial
weights drawn from `candidate_seed(seed, k)` as APPO's are, and the study's network and budget: K train()
calls a generation, each on one season of the block (`fragments_per_batch` of them), the study's learning rate,
discount, entropy coefficient and gradient clip. PPO's own method otherwise (RLlib's defaults: GAE with λ 1,
the clipped surrogate, its KL term), with one epoch over one minibatch, so that a train() call learns from as
much as an APPO one does. Evaluation is the shared one: explore off, the world's assessment.
"""

from __future__ import annotations

from typing import Sequence

from bilevel_tune.appo.local_learner import trained_module
from bilevel_tune.appo.loop import APPOLoop
from bilevel_tune.appo.multiagent import per_agent_greedy_actions
from bilevel_tune.appo.rllib_config import algorithm_from
from bilevel_tune.appo.seeded import INIT_SEED, seeded_module_class
from bilevel_tune.appo.world_env import WorldEnv, kind_seed, module_id
from bilevel_tune.appo.world_io import block_env_config, kinds_of
from bilevel_tune.inner import InnerLoopConfig, candidate_seed


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


def build_ppo_algorithm(config: InnerLoopConfig, rules: Sequence, seed: int, candidates: Sequence[int] = ()):
    """PPO, multi-agent: one module per candidate (and kind), its weights seeded as the APPO loops' are."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    candidates = list(candidates) or list(range(len(rules)))
    module_class = seeded_module_class("PPO")
    env = WorldEnv(block_env_config(config, rules, seed))
    kinds = env.kinds
    modules = {
        module_id(j, None if len(kinds) == 1 else kind.name): RLModuleSpec(
            module_class=module_class,
            observation_space=None if len(kinds) == 1 else kind.observation_space,
            action_space=None if len(kinds) == 1 else kind.action_space,
            model_config={"fcnet_hiddens": list(config.hidden), INIT_SEED: kind_seed(candidate_seed(seed, k), kind, kinds)},
        )
        for j, k in enumerate(candidates)
        for kind in kinds
    }
    algo_config = (
        ppo_config(config, seed)
        .environment(WorldEnv, env_config=block_env_config(config, rules, seed))
        .multi_agent(policies=set(modules), policy_mapping_fn=env.policy_mapping())
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=modules))
    )
    return algorithm_from(algo_config)


class PPOPolicyLoop(APPOLoop):
    """RLlib PPO, per agent: a WorldEnv of the block's copies, one module per candidate (and kind)."""

    def new_algorithm(self, rules, seed, candidates):
        return build_ppo_algorithm(self.config, rules, seed, candidates)

    def greedy_actions(self):
        kinds = kinds_of(self.config.build_world(self.rules))
        by_kind = [
            [trained_module(self.algo, module_id(j, None if len(kinds) == 1 else kind.name)) for j in range(len(self.rules))]
            for kind in kinds
        ]
        return lambda per_kind: [per_agent_greedy_actions(modules, obs) for modules, obs in zip(by_kind, per_kind)]

    def drain(self) -> None:
        """PPO learns inside its train() call: nothing is queued."""

    def stop_algorithm(self, algo) -> bool:
        algo.stop()  # no learner thread: PPO's local learner runs in the caller's
        return True

    def learner_thread_class(self) -> type | None:
        return None  # PPO learns in its own train() call: no learner thread to count
