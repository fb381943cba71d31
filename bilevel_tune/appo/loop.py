"""What both APPO loops share: one Algorithm per generation, released leak-free, evaluated greedily.

Per generation its shard calls `reset(rules, seed, candidates)` — a fresh
APPO Algorithm for the block, each candidate's initial weights drawn from
`candidate_seed(seed, k)` of its global index k —, `train()` K times, then
`evaluate(seeds)` (explore off, fixed seeds, after every queued learner
update is applied) through the block's world. A subclass says how to
build the Algorithm and how to read its explore-off actions.
"""

from __future__ import annotations

import gc
from typing import Any, Callable, Sequence

import numpy as np

from bilevel_tune.appo.local_learner import drain_learner, learner_thread_class, stop_algorithm
from bilevel_tune.appo.rllib_config import quiet_rllib
from bilevel_tune.appo.world_io import acting_in
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.census import return_free_memory
from bilevel_tune.inner.evaluation import evaluate
from bilevel_tune.worlds.contract import Assessment
from bilevel_tune.worlds.lakes import LakeWorlds, evaluate_lakes, groups


class APPOLoop:
    """Owns one APPO Algorithm at a time; a shard actor running it is the design's PolicyActor (docs/glossary.md)."""

    def __init__(self, config: InnerLoopConfig):
        quiet_rllib()
        self.config = config
        self.algo = None
        self.rules: list[dict[str, float]] = []  # the block's rules, physical
        self._kept: list[Any] = []  # stop_mode "none" only: old algorithms stay referenced
        self._frozen = False
        self.stop_confirmed = True

    def new_algorithm(self, rules: Sequence[dict[str, float]], seed: int, candidates: Sequence[int]):
        """The block's APPO Algorithm."""
        raise NotImplementedError

    def greedy_actions(self) -> Callable[[np.ndarray], np.ndarray]:
        """Each candidate's explore-off raw actions: [N, D] (one observation per copy) → [N, A], [N, agents, D] →
        [N, agents, A]."""
        raise NotImplementedError

    def reset(self, rules: Sequence[dict[str, float]], seed: int, candidates: Sequence[int]) -> bool:
        """Fresh policies for these candidates' rules; False when the old learner's stop is unconfirmed."""
        return self.renew(rules, seed, candidates, self.new_algorithm)

    def renew(self, rules, seed: int, candidates: Sequence[int], build) -> bool:
        """The old Algorithm released, a new one built by `build(rules, seed, candidates)`; False when the old
        learner's stop is unconfirmed."""
        self.stop_confirmed = self._release()
        self.rules = [dict(r) for r in rules]
        self.algo = build(self.rules, seed, list(candidates))
        return self.stop_confirmed

    def train(self) -> dict[str, Any]:
        return self.algo.train()

    def evaluate(self, seeds: Sequence[int]) -> list[Assessment]:
        """Explore-off evaluation on fixed seeds, after every queued update is applied."""
        return self.evaluate_on(self.rules, seeds)

    def evaluate_on(self, rules: Sequence[dict[str, float]], seeds: Sequence[int]) -> list[Assessment]:
        """The block's policies, as trained, evaluated explore-off on a world under other rules (one set per
        candidate): what farms that formed their habits under the block's rules do under these (`frozen`)."""
        self.drain()
        world = self.config.build_world([dict(r) for r in rules])
        return evaluate(world, seeds, acting_in(world, self.greedy_actions()), self.config.objective_settings)

    def evaluate_lakes_on(self, rules: Sequence[dict[str, float]], seeds: Sequence[Sequence[int]]) -> list[Assessment]:
        """The block's policies evaluated explore-off under these rules, lake k on `seeds[k]`: consecutive lakes
        given one list play as one world (`worlds.lakes.evaluate_lakes`)."""
        if len(seeds) != len(rules):
            raise ValueError(f"{len(seeds)} lists of evaluation seeds for {len(rules)} lakes")
        self.drain()
        runs = groups([tuple(s) for s in seeds])
        config = self.config
        worlds = LakeWorlds(config.world_class, config.world_settings, [dict(r) for r in rules], [n for _, n in runs])
        act = acting_in(worlds, self.greedy_actions())
        return evaluate_lakes(worlds, [seeds[first] for first, _ in runs], act, config.objective_settings)

    def drain(self) -> None:
        """Every queued update applied (APPO's learner thread): the weights evaluation reads are the last ones."""
        drain_learner(self.algo)

    def stop_algorithm(self, algo) -> bool:
        """Stop an Algorithm, its learner thread confirmed gone (`local_learner.stop_algorithm`)."""
        return stop_algorithm(algo)

    def learner_thread_class(self) -> type | None:
        """What the shard's census counts as learner threads."""
        return learner_thread_class()

    def stop(self) -> bool:
        confirmed = self._release()
        self._kept.clear()
        gc.collect()
        return confirmed

    def _release(self) -> bool:
        algo, self.algo = self.algo, None
        if algo is None:
            return True
        if self.config.stop_mode == "none":
            self._kept.append(algo)
            return True
        confirmed = self.stop_algorithm(algo)
        del algo
        gc.collect()  # an Algorithm is a web of cycles; without this RSS creeps up between full collections
        return_free_memory()  # and without this the allocator keeps its freed pages: RSS creeps all the same
        if not self._frozen:
            # What is alive now (torch, the modules RLlib imports on its first build) lives as long as
            # the actor: freezing it lets every later collection scan only new objects (~1 ms, not ~0.3 s).
            gc.freeze()
            self._frozen = True
        return confirmed
