"""PopulationEnvRunner: RLlib's env runner for a population, stepping the block's world itself.

`sample()` plays one season of every candidate's copy of the world (any
world on the contract, docs/worlds.md; fresh water's copies are lakes):
each step one forward of the population module on the N copies'
observations (once per copy where all its agents see one observation,
`SamplingPolicy`), one draw of the Gaussian action per agent, one
`world.step` — and writes the season as one `PopulationFragment` at the
end, not per agent and step. Metrics are
logged once per season. Season seeds follow the per-agent env's rule: one
stream from (RLlib's seed, the env_config seed), one seed per season; the
exploration noise has a generator of its own, seeded from the same pair.

What RLlib asks of an env runner is here (`sample`, `get_metrics`,
`get_state`/`set_state` for the learner's weights, `get_spaces`); the
Algorithm, its learner and APPO's training step are RLlib's own.
"""

from __future__ import annotations

import math

import numpy as np
import ray
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_AGENT_ID, DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env import INPUT_ENV_SPACES
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.metrics import (
    EPISODE_LEN_MEAN,
    EPISODE_RETURN_MEAN,
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
    NUM_EPISODES_LIFETIME,
    NUM_MODULE_STEPS_SAMPLED,
    NUM_MODULE_STEPS_SAMPLED_LIFETIME,
    WEIGHTS_SEQ_NO,
)

from bilevel_tune.appo.batch import PopulationFragment
from bilevel_tune.appo.module import PopulationAPPOModule
from bilevel_tune.appo.world_io import agent_spaces, block_world, unsquash

EXPLORATION_STREAM = 1  # appended to the seed pair: the exploration noise's own stream
LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


class SamplingPolicy:
    """The module's actor as numpy views of its parameters: the env runner's forward, once a step.

    A season is sequential (each step's observation follows from the last
    step's actions), so a step's forward is small; numpy runs it at a
    fraction of torch's per-op dispatch cost (measured: 17 µs against 83 µs
    at one candidate). The views share the parameters' memory, and RLlib
    loads new weights into those tensors in place; a policy is taken afresh
    each season all the same. Actions are RLlib's diagonal Gaussian: a draw
    per agent and action dimension from N(mean, exp(log std)), scored as
    torch's Normal.log_prob summed over the dimensions.
    """

    def __init__(self, module: PopulationAPPOModule):
        layers = [*module.trunk.layers, module.pi]
        self.weights = [layer.weight.detach().numpy().transpose(0, 2, 1) for layer in layers]  # [N, in, out]
        self.biases = [layer.bias.detach().numpy()[:, None, :] for layer in layers]
        self.log_std_clip = module.log_std_clip

    def _mean_and_log_std(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[N, R, A] each: R = 1 for one observation per copy [N, D], R = agents for one per agent [N, agents, D]."""
        x = obs[:, None, :] if obs.ndim == 2 else obs
        for weight, bias in zip(self.weights[:-1], self.biases[:-1]):
            x = np.tanh(np.matmul(x, weight) + bias)
        out = np.matmul(x, self.weights[-1]) + self.biases[-1]
        size = out.shape[-1] // 2
        return out[..., :size], np.clip(out[..., size:], -self.log_std_clip, self.log_std_clip)

    def sample(self, obs: np.ndarray, agents: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Each agent's raw action [N, agents, A] (float32) and its log-probability [N, agents]."""
        mean, log_std = self._mean_and_log_std(obs)
        std = np.exp(log_std)
        noise = rng.standard_normal((len(obs), agents, mean.shape[-1]), dtype=np.float32)
        actions = (mean + std * noise).astype(np.float32)
        logp = -((actions - mean) ** 2) / (2 * std**2) - np.log(std) - LOG_SQRT_2PI
        return actions, logp.sum(axis=-1)

    def greedy(self, obs: np.ndarray, agents: int) -> np.ndarray:
        """Explore off: every agent acts its mean [N, agents, A]."""
        mean, _ = self._mean_and_log_std(obs)
        return np.broadcast_to(mean, (len(obs), agents, mean.shape[-1]))


class PopulationEnvRunner(EnvRunner, Checkpointable):
    """Samples whole seasons of a block of candidates' copies of the world for one PopulationAPPOModule."""

    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        self.world, seed = block_world(config.env_config)
        # as WorldEnv: RLlib's seed and env_config's seed together make the stream of season seeds
        entropy = [s for s in (self._seed, seed) if s is not None]
        self._season_seeds = np.random.default_rng(entropy or None)
        self._exploration = np.random.default_rng([*entropy, EXPLORATION_STREAM] if entropy else None)
        self._weights_seq_no = 0
        self.module = None
        self.make_module()

    # -- RLlib's EnvRunner API ------------------------------------------------------------
    def make_module(self):
        spec: RLModuleSpec = self.config.get_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()

    def get_spaces(self):
        spaces = agent_spaces(self.world)
        return {INPUT_ENV_SPACES: spaces, DEFAULT_MODULE_ID: spaces}

    def assert_healthy(self):
        assert self.world is not None and self.module is not None

    def sample(
        self, *, explore: bool | None = None, random_actions: bool = False, **kwargs
    ) -> list[PopulationFragment]:
        """One season of every copy of the block (the rollout fragment is the season)."""
        explore = self.config.explore if explore is None else explore
        fragment = self._season(explore)
        self._log_season(fragment)
        return [fragment]

    def get_metrics(self):
        return self.metrics.reduce()

    def get_state(self, components=None, *, not_components=None, **kwargs):
        state = {NUM_ENV_STEPS_SAMPLED_LIFETIME: self.num_env_steps_sampled_lifetime}
        if self._check_component(COMPONENT_RL_MODULE, components, not_components):
            state[COMPONENT_RL_MODULE] = self.module.get_state(
                components=self._get_subcomponents(COMPONENT_RL_MODULE, components),
                not_components=self._get_subcomponents(COMPONENT_RL_MODULE, not_components),
                **kwargs,
            )
            state[WEIGHTS_SEQ_NO] = self._weights_seq_no
        return state

    def set_state(self, state):
        """The learner's weights (RLlib syncs them after updates) and the lifetime step count."""
        if COMPONENT_RL_MODULE in state:
            seq_no = state.get(WEIGHTS_SEQ_NO, 0)
            if seq_no == 0 or self._weights_seq_no < seq_no:
                module_state = state[COMPONENT_RL_MODULE]
                if isinstance(module_state, ray.ObjectRef):
                    module_state = ray.get(module_state)
                if isinstance(module_state, dict) and DEFAULT_MODULE_ID in module_state:
                    module_state = module_state[DEFAULT_MODULE_ID]
                self.module.set_state(module_state)
            if seq_no > 0:
                self._weights_seq_no = seq_no
        if NUM_ENV_STEPS_SAMPLED_LIFETIME in state:
            self.num_env_steps_sampled_lifetime = state[NUM_ENV_STEPS_SAMPLED_LIFETIME]

    def get_ctor_args_and_kwargs(self):
        return (), {"config": self.config}

    def get_checkpointable_components(self):
        return [(COMPONENT_RL_MODULE, self.module)]

    # -- one season -------------------------------------------------------------------------
    def _season(self, explore: bool) -> PopulationFragment:
        world = self.world
        steps, agents, copies = world.horizon, world.agents, world.copies
        obs = world.reset(np.random.default_rng(self._season_seeds.integers(2**63)))
        observations = np.empty((steps + 1, *obs.shape), dtype=np.float32)
        actions = np.empty((steps, copies, agents, world.action_size), dtype=np.float32)
        logp = np.empty((steps, copies, agents), dtype=np.float32)
        rewards = np.empty((steps, copies, agents), dtype=np.float32)
        observations[0] = obs
        policy = SamplingPolicy(self.module)
        for t in range(steps):
            if explore:
                actions[t], logp[t] = policy.sample(observations[t], agents, self._exploration)
            else:
                actions[t], logp[t] = policy.greedy(observations[t], agents), 0.0
            # the runner maps raw actions into the world's bounds itself, as RLlib's normalize_actions would
            rewards[t] = world.step(unsquash(actions[t], world.action_low, world.action_high)).rewards
            observations[t + 1] = world.observe()
        return PopulationFragment(observations, actions, logp, rewards)

    def _log_season(self, fragment: PopulationFragment) -> None:
        steps, agent_steps = fragment.env_steps(), fragment.agent_steps()
        self.num_env_steps_sampled_lifetime += steps
        m = self.metrics
        m.log_value(NUM_ENV_STEPS_SAMPLED, steps, reduce="sum")
        m.log_value((NUM_AGENT_STEPS_SAMPLED, DEFAULT_AGENT_ID), agent_steps, reduce="sum")
        m.log_value((NUM_MODULE_STEPS_SAMPLED, DEFAULT_MODULE_ID), agent_steps, reduce="sum")
        m.log_value(NUM_EPISODES, 1, reduce="sum")
        m.log_value(NUM_ENV_STEPS_SAMPLED_LIFETIME, steps, reduce="lifetime_sum", with_throughput=True)
        m.log_value((NUM_AGENT_STEPS_SAMPLED_LIFETIME, DEFAULT_AGENT_ID), agent_steps, reduce="lifetime_sum")
        m.log_value((NUM_MODULE_STEPS_SAMPLED_LIFETIME, DEFAULT_MODULE_ID), agent_steps, reduce="lifetime_sum")
        m.log_value(NUM_EPISODES_LIFETIME, 1, reduce="lifetime_sum")
        window = self.config.metrics_num_episodes_for_smoothing
        m.log_value(EPISODE_LEN_MEAN, steps, window=window)
        # the episode's return as RLlib's multi-agent episode counts it: every agent's rewards summed
        m.log_value(EPISODE_RETURN_MEAN, float(fragment.rewards.sum()), window=window)

    def stop(self):
        self.world = None
