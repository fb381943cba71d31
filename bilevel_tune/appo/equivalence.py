"""Is one population update N stock updates? The check behind `appo`'s exactness, on any settings.

    report = update_equivalence(InnerLoopConfig(), rules, seed=3)
    report.equivalent, report.candidates

Both loops are built from the same settings and seed: the per-agent loop
(`appo-multiagent`: RLlib's stock APPO learner, one stock module per
candidate) and the population loop (`appo`). Their initial weights must
be equal bit for bit. One season is sampled by the per-agent loop and
converted into a `PopulationFragment`; the gradient clip is set between
the candidates' gradient norms, so at least one candidate is clipped and
one is not; then both learners take one update on that season, and every
candidate's parameters are compared (|Δ| ≤ atol + rtol·|stock|).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.training_data import TrainingData

from bilevel_tune.appo.algorithm import local_learner, stop_algorithm
from bilevel_tune.appo.batch import PopulationFragment, population_rows
from bilevel_tune.appo.learner import clip_per_candidate
from bilevel_tune.appo.multiagent import build_algorithm
from bilevel_tune.appo.population import build_population_algorithm
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.world import Rules
from bilevel_tune.world.env import module_for_agent, module_id

RTOL, ATOL = 1e-5, 1e-7
UNUSED = "_old_encoder.critic_encoder."  # RLlib's target copy of the critic encoder: no loss term reads it


@dataclass(frozen=True)
class CandidateCheck:
    gradient_norm: float
    clipped: bool
    max_abs_difference: float  # after the update, over every parameter
    within_tolerance: bool


@dataclass(frozen=True)
class EquivalenceReport:
    initial_weights_identical: bool
    grad_clip: float
    candidates: tuple[CandidateCheck, ...]

    @property
    def equivalent(self) -> bool:
        return self.initial_weights_identical and all(c.within_tolerance for c in self.candidates)

    @property
    def clipped_and_not(self) -> bool:
        """Did the check cover a clipped and an unclipped candidate?"""
        return len({c.clipped for c in self.candidates}) == 2


def update_equivalence(config: InnerLoopConfig, rules: Sequence[Rules], seed: int) -> EquivalenceReport:
    """One update of both loops on one season of the per-agent loop; at least two candidates."""
    if len(rules) < 2:
        raise ValueError("the check needs at least two candidates (one clipped, one not)")
    reference, population = build_algorithm(config, rules, seed), build_population_algorithm(config, rules, seed)
    try:
        identical = all(
            _same(_stacked(population).candidate_parameters(j), stock_parameters(reference, j))
            for j in range(len(rules))
        )
        season = reference.env_runner.sample()
        fragment = fragment_of(season, len(rules), config.num_farms)
        norms = gradient_norms(population, fragment, config.horizon)
    finally:
        stop_algorithm(reference), stop_algorithm(population)
    grad_clip = float(np.sqrt(norms.min() * norms.max()))  # between them: some clipped, some not
    config = dataclasses.replace(config, grad_clip=grad_clip)
    reference, population = build_algorithm(config, rules, seed), build_population_algorithm(config, rules, seed)
    try:
        one_update(reference, copy.deepcopy(season))  # RLlib's connectors extend the episodes in place
        one_update(population, [fragment])
        checks = []
        for j, norm in enumerate(norms):
            mine = _stacked(population).candidate_parameters(j)
            gaps = [
                ((mine[name] - value).abs() - RTOL * value.abs()).max().item()
                for name, value in stock_parameters(reference, j).items()
            ]
            difference = max((mine[n] - v).abs().max().item() for n, v in stock_parameters(reference, j).items())
            checks.append(CandidateCheck(float(norm), bool(norm + 1e-6 > grad_clip), difference, max(gaps) <= ATOL))
    finally:
        stop_algorithm(reference), stop_algorithm(population)
    return EquivalenceReport(identical, grad_clip, tuple(checks))


def fragment_of(ma_episodes, population: int, farms: int) -> PopulationFragment:
    """The per-agent loop's season as the population loop's fragment.

    RLlib's learner connectors walk a multi-agent episode's agents in the
    order of a set of agent ids (string hashes: it varies per process); the
    farms of each lake are listed in that order, so both batches hold the
    same rows in the same places. Farms are interchangeable in this world.
    """
    (episode,) = ma_episodes
    order = list(episode.agent_ids)
    agents = [
        [episode.agent_episodes[a] for a in order if module_for_agent(a) == module_id(k)] for k in range(population)
    ]
    if any(len(row) != farms for row in agents):
        raise ValueError(f"the season does not hold {farms} farms for each of {population} candidates")
    for row in agents:  # all farms of a lake see its observation: the fragment keeps one per lake
        if not all(np.array_equal(a.get_observations(), row[0].get_observations()) for a in row):
            raise ValueError("farms of one lake saw different observations")
    per_farm = lambda get: np.stack([np.stack([get(a) for a in row], -1) for row in agents], 1)  # noqa: E731
    return PopulationFragment(
        observations=np.stack([row[0].get_observations() for row in agents], 1).astype(np.float32),
        actions=per_farm(lambda a: a.get_actions()[:, 0]).astype(np.float32),
        action_logp=per_farm(lambda a: a.get_extra_model_outputs(Columns.ACTION_LOGP)).astype(np.float32),
        rewards=per_farm(lambda a: np.asarray(a.get_rewards())).astype(np.float32),
    )


def gradient_norms(algo, fragment: PopulationFragment, chunk: int) -> np.ndarray:
    """Each candidate's global gradient norm on this fragment (no update applied)."""
    learner = local_learner(algo)
    rows = population_rows([fragment], chunk)
    batch = {DEFAULT_MODULE_ID: {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in rows.items()}}
    loss = learner.compute_losses(fwd_out=learner.module.forward_train(batch), batch=batch)
    return clip_per_candidate(list(learner.compute_gradients(loss).values()), float("inf")).numpy()


def one_update(algo, episodes) -> None:
    """One synchronous learner update, as APPO's learner thread runs it."""
    Learner.update(
        local_learner(algo), training_data=TrainingData(episodes=episodes), timesteps={}, _no_metrics_reduce=True
    )


def stock_parameters(algo, j: int) -> dict[str, torch.Tensor]:
    """Candidate j's stock module's parameters, less the one copy APPO never reads."""
    module = local_learner(algo).module[module_id(j)]
    return {name: p.detach().clone() for name, p in module.named_parameters() if not name.startswith(UNUSED)}


def _same(mine: dict[str, torch.Tensor], stock: dict[str, torch.Tensor]) -> bool:
    return mine.keys() == stock.keys() and all(torch.equal(mine[name], value) for name, value in stock.items())


def _stacked(algo):
    return local_learner(algo).module[DEFAULT_MODULE_ID].unwrapped()
