"""A population's season as sampled (`PopulationFragment`) and as APPO's learner reads it (`population_rows`).

The env runner writes one fragment per season in bulk: each copy's
observation per step (or each agent's, in a world whose agents see
different ones), and each agent's raw action, its log-probability and its
reward. (Fresh water's words: a copy is a lake, an agent a farm, a step a
day.) The learner connector `PopulationBatch` lays it out exactly as
RLlib's default pipeline lays out the per-agent loop's episodes for one
module per candidate, so APPO's loss sees the same rows:

* one episode per (fragment, agent) of each candidate, in that order, each
  of T + 1 rows — the T steps, then RLlib's appended bootstrap step
  (`AddOneTsToEpisodesAndTruncate`: the last observation, action and
  log-probability repeated, reward 0). Its per-row flags (loss mask,
  terminated, truncated) are read off that connector itself, run once on
  a three-step episode (`bootstrap_flags`): Ray 2.53 marks the appended
  step terminated, 2.60 gates it through the loss mask instead;
* candidate k's rows form block k, padded to a multiple of the rollout
  fragment length with masked copies of its last row. APPO's loss cuts
  its rows into time-major chunks of that length (`make_time_major`);
  padding each block makes every chunk start where it starts in the stock
  per-candidate batch, so V-trace sees the same sequences. A padded row is
  masked out of every loss term and cannot reach a real row (the appended
  step before it has discount 0).

Where every agent of a copy sees one observation, `LAKE_ROW` names, for
each row, the row of the same copy and step in the candidate's first
episode of that fragment: the module encodes only those. Where each agent
sees its own, every row is encoded.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from bilevel_tune.appo.module import LAKE_ROW


@dataclass
class PopulationFragment:
    """One season of a block of N candidates' copies of a world, F agents of one kind each: what APPO learns from."""

    # [T + 1, N, D] float32: each copy's observation (all its agents see it), final one included;
    # or [T + 1, N, F, D]: each agent's own
    observations: np.ndarray
    actions: np.ndarray  # [T, N, F, A] float32: each agent's raw Gaussian action; int64 indices for a categorical
    action_logp: np.ndarray  # [T, N, F] float32: its log-probability under the sampling policy
    rewards: np.ndarray  # [T, N, F] float32
    module_id: str = DEFAULT_MODULE_ID  # the module of this kind of agent
    alive: np.ndarray | None = None  # [T, N, F] bool: the agent acted at that step (None: all did, to the end)

    def __len__(self) -> int:
        """Env steps: one step advances every copy, as one step of the per-agent loop's env does."""
        return self.actions.shape[0]

    def env_steps(self) -> int:
        return len(self)

    def agent_steps(self) -> int:
        return int(self.rewards.size if self.alive is None else self.alive.sum())

    @property
    def population(self) -> int:
        return self.actions.shape[1]

    @property
    def agents(self) -> int:
        """Agents per copy (fresh water's farms)."""
        return self.action_logp.shape[2]

    @property
    def shared_observation(self) -> bool:
        return self.observations.ndim == 3


def population_rows(fragments: Sequence[PopulationFragment], chunk: int) -> dict[str, np.ndarray]:
    """Flat training rows of these fragments, candidate-major, each candidate's block padded to a multiple of `chunk`."""
    n = {f.population for f in fragments}
    if len(n) != 1:
        raise ValueError(f"fragments of different populations {sorted(n)} cannot share a batch")
    per_fragment = [_episode_rows(f) for f in fragments]  # each: column → [N, F, T + 1, ...]
    columns = {
        key: np.concatenate(
            [rows[key].reshape(rows[key].shape[0], -1, *rows[key].shape[3:]) for rows in per_fragment], 1
        )
        for key in per_fragment[0]
    }
    population, real = columns[Columns.LOSS_MASK].shape[:2]
    block = -(-real // chunk) * chunk
    shared = all(f.shared_observation for f in fragments)
    if shared:
        columns[LAKE_ROW] = np.broadcast_to(_lake_rows(fragments), (population, real))
    padded = {}
    for key, values in columns.items():
        pad = np.repeat(values[:, -1:], block - real, axis=1)  # copies of the last row: finite, and masked below
        padded[key] = np.concatenate([values, pad], axis=1)
    if shared:
        padded[LAKE_ROW] = padded[LAKE_ROW] + (np.arange(population) * block)[:, None]
    for key in bootstrap_flags():  # padding is masked, and ends nothing: it cannot reach a real row
        padded[key][:, real:] = False
    padded[Columns.REWARDS][:, real:] = 0.0
    return {key: values.reshape(population * block, *values.shape[2:]) for key, values in padded.items()}


def _lake_rows(fragments: Sequence[PopulationFragment]) -> np.ndarray:
    """Each row's lake row: the same step in the fragment's first agent, as an index into a candidate's block."""
    starts, lake = 0, []
    for f in fragments:
        steps = len(f) + 1
        lake.append(np.tile(starts + np.arange(steps), f.agents))
        starts += f.agents * steps
    return np.concatenate(lake)


@functools.lru_cache(maxsize=1)
def bootstrap_flags() -> dict[str, tuple[bool, bool, bool]]:
    """RLlib's flag columns for a truncated episode extended by its bootstrap step: column → (inside, last day, appended).

    Read off RLlib's own `AddOneTsToEpisodesAndTruncate`, so the rows follow the installed release's convention.
    """
    from ray.rllib.connectors.learner import AddOneTsToEpisodesAndTruncate
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    days = 3
    episode = SingleAgentEpisode(
        observations=[np.zeros(1)] * (days + 1),
        actions=[np.zeros(1)] * days,
        rewards=[0.0] * days,
        truncated=True,
        len_lookback_buffer=0,
    )
    batch = AddOneTsToEpisodesAndTruncate()(rl_module=None, batch={}, episodes=[episode], shared_data={})
    flags = {}
    for column, per_episode in batch.items():
        (rows,) = per_episode.values()
        rows = [bool(x) for x in rows]
        if len(rows) != days + 1 or len(set(rows[: days - 1])) != 1:
            raise RuntimeError(f"RLlib's bootstrap step writes {column!r} as {rows}; PopulationBatch cannot mirror it")
        flags[column] = (rows[0], rows[days - 1], rows[days])
    if Columns.LOSS_MASK not in flags:
        raise RuntimeError("RLlib's bootstrap step no longer writes a loss mask; PopulationBatch cannot mirror it")
    return flags


def _episode_rows(f: PopulationFragment) -> dict[str, np.ndarray]:
    """One fragment's rows per candidate and agent episode: column → [N, F, T + 1, ...] (RLlib's +1 bootstrap step)."""
    steps, population, agents = f.action_logp.shape
    # [T, N, F, ...] → [N, F, T, ...]; then the appended step repeats the last action and log-probability
    with_last = lambda x: np.moveaxis(np.concatenate([x, x[-1:]], axis=0), 0, 2)  # noqa: E731
    if f.shared_observation:  # [T + 1, N, D] → [N, F, T + 1, D]: every agent sees its copy's
        size = f.observations.shape[-1]
        obs = np.broadcast_to(f.observations.transpose(1, 0, 2)[:, None], (population, agents, steps + 1, size))
    else:  # [T + 1, N, F, D] → [N, F, T + 1, D]
        obs = np.moveaxis(f.observations, 0, 2)
    actions = with_last(f.actions)
    rows = {
        Columns.OBS: np.ascontiguousarray(obs, dtype=np.float32),
        Columns.ACTIONS: actions if np.issubdtype(actions.dtype, np.integer) else actions.astype(np.float32),
        Columns.ACTION_LOGP: with_last(f.action_logp).astype(np.float32),
        Columns.REWARDS: np.moveaxis(np.concatenate([f.rewards, np.zeros_like(f.rewards[:1])], axis=0), 0, 2).astype(
            np.float32
        ),
    }
    for column, (inside, last, appended) in bootstrap_flags().items():  # seasons end by truncation
        per_step = np.array([inside] * (steps - 1) + [last, appended], dtype=bool)
        rows[column] = np.broadcast_to(per_step, (population, agents, steps + 1)).copy()
    if f.alive is not None:
        _agents_that_left(rows, np.moveaxis(f.alive, 0, 2))
    return rows


def _agents_that_left(rows: dict[str, np.ndarray], alive: np.ndarray) -> None:
    """An agent that left before the end: its episode terminates at its last step (no bootstrap past it), and the
    rows after it — no action, no reward — are masked out of every loss term. `alive` [N, F, T]."""
    acted = np.concatenate([alive, np.zeros_like(alive[..., :1])], axis=-1)  # [N, F, T + 1]
    left = alive & ~acted[..., 1:]  # its last step, where a later one exists to leave before
    left[..., -1] = False  # the season's last step ends by truncation, as every agent's
    rows[Columns.LOSS_MASK] &= acted
    rows[Columns.TERMINATEDS][..., :-1] |= left
    if Columns.TRUNCATEDS in rows:
        rows[Columns.TRUNCATEDS][~acted] = False


class PopulationBatch(ConnectorV2):
    """The learner connector of the population loop: fragments → one module's training rows (torch)."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, chunk: int, **kwargs):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.chunk = int(chunk)

    def __call__(self, *, rl_module, batch: dict[str, Any], episodes, explore=None, shared_data=None, **kwargs):
        import torch

        by_module: dict[str, list[PopulationFragment]] = {}
        for fragment in episodes:  # a fragment per kind of agent and season: each kind's module its rows
            by_module.setdefault(fragment.module_id, []).append(fragment)
        for module_id, fragments in by_module.items():
            rows = population_rows(fragments, self.chunk)
            batch[module_id] = {key: torch.from_numpy(np.ascontiguousarray(v)) for key, v in rows.items()}
        return batch
