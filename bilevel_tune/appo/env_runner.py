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
A block of lakes (`world_io.LAKES_KEY`: streams "lake") draws per lake
instead: each group of one seed's lakes its seasons from (seed, seed), each
lake its exploration from (seed, seed, stream, index) — a lake's draws are
the same whichever lakes share its block.

What RLlib asks of an env runner is here (`sample`, `get_metrics`,
`get_state`/`set_state` for the learner's weights, `get_spaces`); the
Algorithm, its learner and APPO's training step are RLlib's own.
"""

from __future__ import annotations

import math

import gymnasium as gym
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
from bilevel_tune.appo.world_io import block_world, kind_observations, kinds_of, world_actions
from bilevel_tune.worlds.lakes import LakeWorlds

EXPLORATION_STREAM = 1  # appended to the seed pair: the exploration noise's own stream
LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


class SamplingPolicy:
    """The module's actor as numpy views of its parameters: the env runner's forward, once a step.

    A season is sequential (each step's observation follows from the last
    step's actions), so a step's forward is small; numpy runs it at a
    fraction of torch's per-op dispatch cost (measured: 17 µs against 83 µs
    at one candidate). The views share the parameters' memory, and RLlib
    loads new weights into those tensors in place; a policy is taken afresh
    each season all the same. Actions are RLlib's: for a Box a diagonal
    Gaussian, a draw per agent and dimension from N(mean, exp(log std)),
    scored as torch's Normal.log_prob summed over the dimensions; for a
    Discrete or MultiDiscrete a categorical per choice, drawn by inverting
    its CDF at a uniform, scored as its log-softmax (summed over choices).
    """

    def __init__(self, module: PopulationAPPOModule):
        layers = [*module.trunk.layers, module.pi]
        self.weights = [layer.weight.detach().numpy().transpose(0, 2, 1) for layer in layers]  # [N, in, out]
        self.biases = [layer.bias.detach().numpy()[:, None, :] for layer in layers]
        self.log_std_clip = module.log_std_clip
        self.gaussian = module.gaussian
        space = module.action_space
        self.choices = [int(space.n)] if hasattr(space, "n") else [int(n) for n in getattr(space, "nvec", ())]
        self.discrete = hasattr(space, "n")

    def _head(self, obs: np.ndarray) -> np.ndarray:
        """The policy head's outputs [N, R, out]: R = 1 for one observation per copy [N, D], R = agents for one per
        agent [N, agents, D]."""
        x = obs[:, None, :] if obs.ndim == 2 else obs
        for weight, bias in zip(self.weights[:-1], self.biases[:-1]):
            x = np.tanh(np.matmul(x, weight) + bias)
        return np.matmul(x, self.weights[-1]) + self.biases[-1]

    def _mean_and_log_std(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = self._head(obs)
        size = out.shape[-1] // 2
        return out[..., :size], np.clip(out[..., size:], -self.log_std_clip, self.log_std_clip)

    def _log_softmax(self, obs: np.ndarray, agents: int) -> list[np.ndarray]:
        """Each choice's log-probabilities [N, agents, n]."""
        out = self._head(obs)
        out = np.broadcast_to(out, (out.shape[0], agents, out.shape[-1]))
        parts, start = [], 0
        for n in self.choices:
            logits = out[..., start : start + n]
            top = logits.max(axis=-1, keepdims=True)
            parts.append(logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True)))
            start += n
        return parts

    def sample(self, obs: np.ndarray, agents: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Each agent's raw action [N, agents, A] (float32; a Discrete's [N, agents] indices) and its
        log-probability [N, agents]."""
        if not self.gaussian:
            return self._sample_categorical(obs, agents, rng)
        mean, log_std = self._mean_and_log_std(obs)
        std = np.exp(log_std)
        noise = rng.standard_normal((len(obs), agents, mean.shape[-1]), dtype=np.float32)
        actions = (mean + std * noise).astype(np.float32)
        logp = -((actions - mean) ** 2) / (2 * std**2) - np.log(std) - LOG_SQRT_2PI
        return actions, logp.sum(axis=-1)

    def _sample_categorical(self, obs, agents, rng) -> tuple[np.ndarray, np.ndarray]:
        parts = self._log_softmax(obs, agents)
        uniform = rng.random((len(obs), agents, len(parts)))
        choices, logp = [], np.zeros((len(obs), agents))
        for j, log_probs in enumerate(parts):
            cdf = np.cumsum(np.exp(log_probs), axis=-1)
            index = np.minimum((uniform[..., j : j + 1] >= cdf).sum(axis=-1), log_probs.shape[-1] - 1)
            choices.append(index)
            logp += np.take_along_axis(log_probs, index[..., None], axis=-1)[..., 0]
        actions = choices[0] if self.discrete else np.stack(choices, axis=-1)
        return actions.astype(np.int64), logp.astype(np.float32)

    def greedy(self, obs: np.ndarray, agents: int) -> np.ndarray:
        """Explore off: every agent acts its mean [N, agents, A] (a categorical: its most likely choice)."""
        if not self.gaussian:
            choices = [p.argmax(axis=-1) for p in self._log_softmax(obs, agents)]
            return (choices[0] if self.discrete else np.stack(choices, axis=-1)).astype(np.int64)
        mean, _ = self._mean_and_log_std(obs)
        return np.broadcast_to(mean, (len(obs), agents, mean.shape[-1]))


class PerLake:
    """Exploration noise drawn lake by lake: row k of every draw from lake k's own generator (what
    `SamplingPolicy.sample` asks of a generator: `standard_normal` and `random`, with the lakes' axis first)."""

    def __init__(self, generators: list[np.random.Generator]):
        self.generators = generators

    def standard_normal(self, shape, dtype=np.float64):
        return np.concatenate([g.standard_normal((1, *shape[1:]), dtype=dtype) for g in self.generators])

    def random(self, shape):
        return np.concatenate([g.random((1, *shape[1:])) for g in self.generators])


class PopulationEnvRunner(EnvRunner, Checkpointable):
    """Samples whole seasons of a block of candidates' copies of the world for one PopulationAPPOModule."""

    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        self.world, seed = block_world(config.env_config)
        self.kinds = kinds_of(self.world)
        if isinstance(self.world, LakeWorlds):  # a block of lakes: every stream the lake's own
            self._season_seeds = [np.random.default_rng([s, s]) for s in self.world.seeds]
            self._exploration = PerLake(
                [np.random.default_rng([s, s, EXPLORATION_STREAM, k]) for s, k in self.world.lakes]
            )
        else:
            # as WorldEnv: RLlib's seed and env_config's seed together make the stream of season seeds
            entropy = [s for s in (self._seed, seed) if s is not None]
            self._season_seeds = np.random.default_rng(entropy or None)
            self._exploration = np.random.default_rng([*entropy, EXPLORATION_STREAM] if entropy else None)
        self._weights_seq_no = 0
        self.module = None
        self.make_module()

    # -- RLlib's EnvRunner API ------------------------------------------------------------
    def make_module(self):
        if self._one_kind:  # RLlib's default module (a world of one flat Box)
            spec: RLModuleSpec = self.config.get_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        else:  # a module per kind of agent
            spec = self.config.get_multi_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()

    @property
    def _one_kind(self) -> bool:
        """Every agent of one kind: RLlib's default module is the block's."""
        return len(self.kinds) == 1

    def _module_of(self, kind) -> PopulationAPPOModule:
        return self.module if self._one_kind else self.module[kind.name]

    def get_spaces(self):
        spaces = {kind.name: (kind.observation_space, kind.action_space) for kind in self.kinds}
        first = spaces[self.kinds[0].name]
        if self._one_kind:
            return {INPUT_ENV_SPACES: first, DEFAULT_MODULE_ID: first}
        return {INPUT_ENV_SPACES: first, **spaces}

    def assert_healthy(self):
        assert self.world is not None and self.module is not None

    def sample(
        self, *, explore: bool | None = None, random_actions: bool = False, **kwargs
    ) -> list[PopulationFragment]:
        """One season of every copy of the block (the rollout fragment is the season)."""
        explore = self.config.explore if explore is None else explore
        fragments = self._season(explore)
        self._log_season(fragments)
        return fragments

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
                if self._one_kind and isinstance(module_state, dict) and DEFAULT_MODULE_ID in module_state:
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
    def _season(self, explore: bool) -> list[PopulationFragment]:
        """One season of every copy: a fragment per kind of agent (one for a world of one flat Box)."""
        world, kinds = self.world, self.kinds
        steps, copies = world.horizon, world.copies
        first = kind_observations(world, world.reset(self._season_rng()))
        seasons = [_KindSeason(kind, steps, copies, obs) for kind, obs in zip(kinds, first)]
        policies = [SamplingPolicy(self._module_of(kind)) for kind in kinds]
        alive = getattr(world, "alive", None)
        for t in range(steps):
            raw = []
            for season, policy in zip(seasons, policies):
                agents = len(season.kind.agents)
                if alive is not None:
                    season.alive[t] = alive[:, season.kind.agents]
                if explore:
                    season.actions[t], season.logp[t] = policy.sample(season.observations[t], agents, self._exploration)
                else:
                    season.actions[t], season.logp[t] = policy.greedy(season.observations[t], agents), 0.0
                raw.append(season.actions[t])
            # the runner maps raw actions into the world's own itself, as RLlib's normalize_actions would
            rewards = world.step(world_actions(world, kinds, raw)).rewards
            for season, obs in zip(seasons, kind_observations(world, world.observe())):
                season.rewards[t] = rewards if self._one_kind else rewards[:, season.kind.agents]
                season.observations[t + 1] = obs
        module_of = (lambda kind: DEFAULT_MODULE_ID) if self._one_kind else (lambda kind: kind.name)  # noqa: E731
        return [season.fragment(module_of(season.kind)) for season in seasons]

    def _season_rng(self):
        """The next season's generator (a block of lakes: one per group, each from its own stream)."""
        if isinstance(self._season_seeds, list):
            return [np.random.default_rng(stream.integers(2**63)) for stream in self._season_seeds]
        return np.random.default_rng(self._season_seeds.integers(2**63))

    def _log_season(self, fragments: list[PopulationFragment]) -> None:
        steps = fragments[0].env_steps()
        agent_steps = sum(f.agent_steps() for f in fragments)
        self.num_env_steps_sampled_lifetime += steps
        m = self.metrics
        m.log_value(NUM_ENV_STEPS_SAMPLED, steps, reduce="sum")
        m.log_value((NUM_AGENT_STEPS_SAMPLED, DEFAULT_AGENT_ID), agent_steps, reduce="sum")
        m.log_value(NUM_EPISODES, 1, reduce="sum")
        m.log_value(NUM_ENV_STEPS_SAMPLED_LIFETIME, steps, reduce="lifetime_sum", with_throughput=True)
        m.log_value((NUM_AGENT_STEPS_SAMPLED_LIFETIME, DEFAULT_AGENT_ID), agent_steps, reduce="lifetime_sum")
        for f in fragments:
            m.log_value((NUM_MODULE_STEPS_SAMPLED, f.module_id), f.agent_steps(), reduce="sum")
            m.log_value((NUM_MODULE_STEPS_SAMPLED_LIFETIME, f.module_id), f.agent_steps(), reduce="lifetime_sum")
        m.log_value(NUM_EPISODES_LIFETIME, 1, reduce="lifetime_sum")
        window = self.config.metrics_num_episodes_for_smoothing
        m.log_value(EPISODE_LEN_MEAN, steps, window=window)
        # the episode's return as RLlib's multi-agent episode counts it: every agent's rewards summed
        m.log_value(EPISODE_RETURN_MEAN, float(sum(f.rewards.sum() for f in fragments)), window=window)

    def stop(self):
        self.world = None


class _KindSeason:
    """One kind's season being sampled, step by step, into the arrays of its fragment."""

    def __init__(self, kind, steps: int, copies: int, first_observation: np.ndarray):
        self.kind = kind
        agents, width = len(kind.agents), kind.action_width
        self.observations = np.empty((steps + 1, *first_observation.shape), dtype=np.float32)
        self.observations[0] = first_observation
        discrete = isinstance(kind.action_space, gym.spaces.Discrete)  # one index an agent: no action axis
        shape = (steps, copies, agents) if discrete else (steps, copies, agents, width)
        self.actions = np.empty(shape, dtype=kind.raw_dtype())
        self.logp = np.empty((steps, copies, agents), dtype=np.float32)
        self.rewards = np.empty((steps, copies, agents), dtype=np.float32)
        self.alive = np.ones((steps, copies, agents), dtype=bool)

    def fragment(self, module_id: str) -> PopulationFragment:
        alive = None if self.alive.all() else self.alive  # every agent in to the end: the plain layout
        return PopulationFragment(self.observations, self.actions, self.logp, self.rewards, module_id, alive)
