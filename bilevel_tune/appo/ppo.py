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

from bilevel_tune.appo.multiagent import MultiAgentPolicyLoop, build_multiagent_algorithm
from bilevel_tune.inner import InnerLoopConfig


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


class PPOPolicyLoop(MultiAgentPolicyLoop):
    """RLlib PPO, per agent: the per-agent APPO loop's env, modules and greedy actions, PPO's algorithm."""

    def new_algorithm(self, rules, seed, candidates):
        return build_multiagent_algorithm(self.config, rules, seed, candidates, algorithm=ppo_config)

    def drain(self) -> None:
        """PPO learns inside its train() call: nothing is queued."""

    def stop_algorithm(self, algo) -> bool:
        algo.stop()  # no learner thread: PPO's local learner runs in the caller's
        return True

    def learner_thread_class(self) -> type | None:
        return None  # PPO learns in its own train() call: no learner thread to count
