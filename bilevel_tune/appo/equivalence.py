"""Does the population loop compute what RLlib's per-agent path computes? Its exactness checks, on any settings.

    report = update_equivalence(InnerLoopConfig(), rules, seed=3)
    report.equivalent, report.candidates
    parity = learning_parity(InnerLoopConfig(), rules, seeds=(1, 2, 3))
    parity.within_seed_noise, parity.rises

**Update equivalence.**
Both loops are built from the same settings and seed: the per-agent loop
(`appo-multiagent`: RLlib's stock APPO learner, one stock module per
candidate) and the population loop (`appo`). Their initial weights must
be equal bit for bit. One season is sampled by the per-agent loop and
converted into a `PopulationFragment`; the gradient clip is set between
the candidates' gradient norms, so at least one candidate is clipped and
one is not; then both learners take one update on that season. Compared
per candidate, after the update:

* the gradient it was updated with (clipped): Adam's first moment after
  one step is (1 − β₁)·g, read from both optimizers; equal within 1e-5 of
  each tensor's largest entry;
* its parameters: equal within 1e-5 relative plus a tenth of one Adam step
  (0.1·lr). Adam's first step moves each parameter by lr·g/(|g| + ε), so
  where a gradient entry is within float rounding of zero, a 1e-7
  difference of the loss sums (the stacked loss adds its rows in another
  order) becomes a visible share of that step — a few % at the weekend's
  network, measured; a wrong loss, clip or learning rate is a whole step off.

**Learning parity.** Both loops train the same rules from the same seeds
for K iterations; the farms' mean reward over fixed evaluation seasons,
before and after, per seed. Parity: the loops' mean gap is within the
study's seed-noise rule (2 × pooled seed SD, ddof 1 — docs/verdicts.md)
or below `PARITY_FLOOR`, a reward gap smaller than any effect the
weekend study reports; and the population loop's reward rises.
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

from bilevel_tune.appo.batch import PopulationFragment, population_rows
from bilevel_tune.appo.learner import clip_per_candidate
from bilevel_tune.appo.local_learner import drain_learner, local_learner, stop_algorithm
from bilevel_tune.appo.multiagent import build_multiagent_algorithm
from bilevel_tune.appo.population import build_population_algorithm
from bilevel_tune.appo.world_env import module_id
from bilevel_tune.appo.world_io import kinds_of
from bilevel_tune.inner import InnerLoopConfig

RTOL = 1e-5
STEP_SHARE = 0.1  # parameters may differ by this share of one Adam step (lr), see above
PARITY_FLOOR = 0.01  # mean reward; the weekend campaign's smallest reported effect is 0.013
UNUSED = "_old_encoder.critic_encoder."  # RLlib's target copy of the critic encoder: no loss term reads it


@dataclass(frozen=True)
class CandidateCheck:
    gradient_norm: float  # before clipping
    clipped: bool
    gradient_difference: float  # max |Δg| over a tensor / its largest |g|, worst tensor
    max_abs_difference: float  # of the parameters after the update, worst entry
    max_step_share: float  # the same in units of one Adam step (lr)
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


def update_equivalence(config: InnerLoopConfig, rules: Sequence, seed: int) -> EquivalenceReport:
    """One update of both loops on one season of the per-agent loop; at least two candidates. In a world of several
    kinds of agent every kind's module is checked, candidate by candidate."""
    if len(rules) < 2:
        raise ValueError("the check needs at least two candidates (one clipped, one not)")
    world = config.build_world(rules)
    kinds = kinds_of(world)
    reference, population = (
        build_multiagent_algorithm(config, rules, seed),
        build_population_algorithm(config, rules, seed),
    )
    try:
        identical = all(
            _same(_stacked(population, kinds, kind).candidate_parameters(j), stock_parameters(reference, j, kinds, kind))
            for kind in kinds
            for j in range(len(rules))
        )
        season = reference.env_runner.sample()
        fragments = fragments_of(season, len(rules), world, kinds)
        norms = gradient_norms(population, fragments, config.season_length)  # [kinds, N]
    finally:
        stop_algorithm(reference), stop_algorithm(population)
    grad_clip = float(np.sqrt(norms.min() * norms.max()))  # between them: some clipped, some not
    config = dataclasses.replace(config, grad_clip=grad_clip)
    reference, population = (
        build_multiagent_algorithm(config, rules, seed),
        build_population_algorithm(config, rules, seed),
    )
    try:
        one_update(reference, copy.deepcopy(season))  # RLlib's connectors extend the episodes in place
        one_update(population, fragments)
        checks = [
            _compare(population, reference, kinds, kind, j, float(norm), grad_clip, config.lr)
            for kind, per_candidate in zip(kinds, norms)
            for j, norm in enumerate(per_candidate)
        ]
    finally:
        stop_algorithm(reference), stop_algorithm(population)
    return EquivalenceReport(identical, grad_clip, tuple(checks))


@dataclass(frozen=True)
class ParityReport:
    """The evaluated score (fresh water: mean farm reward; another world: its objective), per seed, before (K = 0)
    and after K iterations, per loop."""

    inner_iters: int
    before: dict[str, tuple[float, ...]]
    after: dict[str, tuple[float, ...]]

    @property
    def gap(self) -> float:
        """The population loop's mean after training minus the per-agent loop's."""
        return float(np.mean(self.after["appo"]) - np.mean(self.after["appo-multiagent"]))

    @property
    def pooled_sd(self) -> float:
        return float(np.sqrt(np.mean([np.var(v, ddof=1) for v in self.after.values()])))

    @property
    def within_seed_noise(self) -> bool:
        return abs(self.gap) <= max(2 * self.pooled_sd, PARITY_FLOOR)

    @property
    def rises(self) -> bool:
        """Does training raise the population loop's reward beyond its seed noise?"""
        after, before = self.after["appo"], self.before["appo"]
        return float(np.mean(after) - np.mean(before)) > 2 * float(np.std(after, ddof=1))

    def summary(self) -> str:
        parts = [
            f"{loop}: K=0 {np.mean(self.before[loop]):.4f}, K={self.inner_iters} {np.mean(after):.4f} ± {np.std(after, ddof=1):.4f}"
            for loop, after in self.after.items()
        ]
        return "; ".join(parts) + f"; gap {self.gap:+.4f}, 2 × pooled SD {2 * self.pooled_sd:.4f}"


def learning_parity(
    config: InnerLoopConfig, rules: Sequence, seeds: Sequence[int], inner_iters: int = 50, eval_seeds=(100, 101),
    runs=None,
) -> ParityReport:
    """Train both loops K iterations per seed at fixed rules; their evaluated score before and after.

    The score: fresh water's farms' mean reward; another world's objective (its `Assessment` holds no reward).

    Each iteration's batch is applied before the next season is sampled: both loops take the same updates
    whatever their speeds, and the population loop's run repeats exactly. Left to RLlib's learner thread,
    timing decides how stale the weights a season is sampled with are (the per-agent loop's slow update),
    and on Ray 2.53 which batches are applied at all. The population loop on Ray ≥ 2.54 scores the same
    either way.

    `runs` carries out the (loop, seed) runs, each `parity_run`'s arguments: one after another in this process
    by default, or e.g. as Ray tasks of one CPU each (a callable from the list of argument tuples to their
    (before, after) pairs, in order).
    """
    physical = [r.as_dict() if hasattr(r, "as_dict") else dict(r) for r in rules]
    jobs = [(name, config, physical, seed, inner_iters, tuple(eval_seeds)) for name in PARITY_LOOPS for seed in seeds]
    results = runs(jobs) if runs is not None else [parity_run(*job) for job in jobs]
    before: dict[str, list[float]] = {name: [] for name in PARITY_LOOPS}
    after: dict[str, list[float]] = {name: [] for name in PARITY_LOOPS}
    for (name, *_), (first, last) in zip(jobs, results):
        before[name].append(first)
        after[name].append(last)
    freeze = lambda d: {k: tuple(v) for k, v in d.items()}  # noqa: E731
    return ParityReport(inner_iters, freeze(before), freeze(after))


PARITY_LOOPS = ("appo", "appo-multiagent")


def parity_run(name: str, config: InnerLoopConfig, physical: list, seed: int, inner_iters: int, eval_seeds) -> tuple:
    """One loop, one seed: (its evaluated score untrained, after K iterations applied in lockstep)."""
    from bilevel_tune.appo.multiagent import MultiAgentPolicyLoop
    from bilevel_tune.appo.population import PopulationPolicyLoop

    score = lambda outcome: outcome.objective  # noqa: E731 - fresh water's econ 1, sus 0: its mean reward, bit for bit
    loop = {"appo": PopulationPolicyLoop, "appo-multiagent": MultiAgentPolicyLoop}[name](config)
    try:
        loop.reset(physical, seed, range(len(physical)))
        first = float(np.mean([score(o) for o in loop.evaluate(list(eval_seeds))]))
        for _ in range(inner_iters):
            loop.train()
            drain_learner(loop.algo)  # in lockstep: see learning_parity
        return first, float(np.mean([score(o) for o in loop.evaluate(list(eval_seeds))]))
    finally:
        loop.stop()


def _compare(population, reference, kinds, kind, j: int, norm: float, grad_clip: float, lr: float) -> CandidateCheck:
    mine, theirs = _stacked(population, kinds, kind).candidate_parameters(j), stock_parameters(reference, j, kinds, kind)
    moments_mine = _first_moments(population, _population_id(kinds, kind), j)
    moments_theirs = _first_moments(reference, _reference_id(kinds, kind, j), None)
    gradient_difference = max(
        ((moments_mine[n] - m).abs().max() / m.abs().max().clamp(min=1e-30)).item() for n, m in moments_theirs.items()
    )
    within = all(
        bool(((mine[n] - value).abs() <= RTOL * value.abs() + STEP_SHARE * lr).all()) for n, value in theirs.items()
    )
    difference = max((mine[n] - v).abs().max().item() for n, v in theirs.items())
    return CandidateCheck(
        gradient_norm=norm,
        clipped=norm + 1e-6 > grad_clip,
        gradient_difference=gradient_difference,
        max_abs_difference=difference,
        max_step_share=difference / lr,
        within_tolerance=within and gradient_difference <= RTOL,
    )


def _population_id(kinds, kind) -> str:
    """The population loop's module of a kind: RLlib's default one where every agent is of one kind."""
    return DEFAULT_MODULE_ID if len(kinds) == 1 else kind.name


def _reference_id(kinds, kind, j: int) -> str:
    """The per-agent loop's module of candidate j's agents of a kind."""
    return module_id(j, None if len(kinds) == 1 else kind.name)


def _first_moments(algo, mid: str, candidate: int | None) -> dict[str, torch.Tensor]:
    """Adam's first moment of every trained parameter of module `mid` (candidate's slice), by stock name."""
    learner = local_learner(algo)
    module = learner.module[mid].unwrapped()
    states = {}
    for _, optimizer in learner.get_optimizers_for_module(mid):
        for group in optimizer.param_groups:
            for p in group["params"]:
                if "exp_avg" in optimizer.state.get(p, {}):
                    states[id(p)] = optimizer.state[p]["exp_avg"]
    if candidate is None:
        return {n: states[id(p)] for n, p in module.named_parameters() if id(p) in states}
    out = {}
    for name, layer in module.stock_layers().items():
        for part in ("weight", "bias"):
            p = getattr(layer, part)
            if id(p) in states:
                out[f"{name}.{part}"] = states[id(p)][candidate]
    return out


def fragments_of(ma_episodes, population: int, world, kinds) -> list[PopulationFragment]:
    """The per-agent loop's season as the population loop's fragments, one per kind of agent.

    RLlib's learner connectors walk a multi-agent episode's agents in the
    order of a set of agent ids (string hashes: it varies per process); the
    agents of each copy are listed in that order, so both batches hold the
    same rows in the same places. Agents of one kind are interchangeable in
    the built-in worlds. Where every agent of a copy sees one observation,
    the fragment keeps one per copy.
    """
    (episode,) = ma_episodes
    order = list(episode.agent_ids)
    names = list(getattr(world, "agent_ids", [])) if len(kinds) > 1 else []
    kind_of = {names[i]: kind.name for kind in kinds for i in kind.agents} if names else {}
    fragments = []
    for kind in kinds:
        rows = [
            [episode.agent_episodes[a] for a in order if _candidate(a) == k and kind_of.get(_name(a), kind.name) == kind.name]
            for k in range(population)
        ]
        if any(len(row) != len(kind.agents) for row in rows):
            raise ValueError(f"the season does not hold {len(kind.agents)} {kind.name} agents for each candidate")
        per_agent = lambda get, rows=rows: np.stack([np.stack([get(a) for a in row], 1) for row in rows], 1)  # noqa: E731
        observations = per_agent(lambda a: a.get_observations())  # [T + 1, N, F, D]
        if kind.shared_observation and all(
            np.array_equal(observations[:, :, i], observations[:, :, 0]) for i in range(len(kind.agents))
        ):
            observations = observations[:, :, 0]
        actions = per_agent(lambda a: a.get_actions())  # a Gaussian's values, or a categorical's indices
        fragments.append(
            PopulationFragment(
                observations=observations.astype(np.float32),
                actions=actions if np.issubdtype(actions.dtype, np.integer) else actions.astype(np.float32),
                action_logp=per_agent(lambda a: a.get_extra_model_outputs(Columns.ACTION_LOGP)).astype(np.float32),
                rewards=per_agent(lambda a: np.asarray(a.get_rewards())).astype(np.float32),
                module_id=_population_id(kinds, kind),
            )
        )
    return fragments


def _candidate(agent: str) -> int:
    return int(agent.split("/", 1)[0][1:])


def _name(agent: str) -> str:
    return agent.split("/", 1)[1]


def gradient_norms(algo, fragments: list[PopulationFragment], chunk: int) -> np.ndarray:
    """Each kind's candidates' global gradient norms on these fragments (no update applied): [kinds, N]."""
    learner = local_learner(algo)
    batch = {}
    for fragment in fragments:
        rows = population_rows([fragment], chunk)
        batch[fragment.module_id] = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in rows.items()}
    loss = learner.compute_losses(fwd_out=learner.module.forward_train(batch), batch=batch)
    gradients = learner.compute_gradients(loss)
    out = []
    for fragment in fragments:
        module = learner.module[fragment.module_id]
        mine = [gradients[p] for p in module.parameters() if p in gradients]
        out.append(clip_per_candidate(mine, float("inf")).numpy())
    return np.stack(out)


def one_update(algo, episodes) -> None:
    """One synchronous learner update, as APPO's learner thread runs it."""
    Learner.update(
        local_learner(algo), training_data=TrainingData(episodes=episodes), timesteps={}, _no_metrics_reduce=True
    )


def stock_parameters(algo, j: int, kinds=None, kind=None) -> dict[str, torch.Tensor]:
    """Candidate j's stock module's parameters (of a kind's agents), less the one copy APPO never reads."""
    mid = module_id(j) if kinds is None else _reference_id(kinds, kind, j)
    module = local_learner(algo).module[mid]
    return {name: p.detach().clone() for name, p in module.named_parameters() if not name.startswith(UNUSED)}


def _same(mine: dict[str, torch.Tensor], stock: dict[str, torch.Tensor]) -> bool:
    return mine.keys() == stock.keys() and all(torch.equal(mine[name], value) for name, value in stock.items())


def _stacked(algo, kinds=None, kind=None):
    mid = DEFAULT_MODULE_ID if kinds is None else _population_id(kinds, kind)
    return local_learner(algo).module[mid].unwrapped()
