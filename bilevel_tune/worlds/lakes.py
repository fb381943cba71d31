"""A block of lakes: world copies each under its own rules *and its own seed*, stepped together as one world.

A *lake* is one rule set under one seed (`Lake`): its copy of the world, and every random stream it draws from —
the season's weather, the farms' initial weights and exploration (`bilevel_tune.appo`) — come from its (seed,
index) alone. A world instance's copies share one random stream (common random numbers: the candidates of one
generation are compared on the same season), so lakes of one seed share theirs, and a block of lakes of several
seeds — a trial's final seeds, several trials' populations — is a world per *group* of consecutive lakes of one
seed (`groups`), stepped in lock step by `LakeWorlds` as one world of all their copies: the same contract, its
observations, actions, rewards and failures along one axis of copies. A world that draws per copy
(`copy_streams`: its `reset` takes a generator per copy; fresh water's) is one instance for the whole block
instead, each group's generator given to its copies: one step a day for every lake, whatever its seed.

With one group a `LakeWorlds` is its world, bit for bit: a population's block is one group.

Plain numpy: no Ray, no RLlib.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from bilevel_tune.worlds.contract import Assessment, Step, has_kinds, stack_steps


@dataclass(frozen=True)
class Lake:
    """One rule set under one seed: what the inner loop trains and evaluates as a unit."""

    rules: Mapping[str, float]  # physical values, the world's rules
    seed: int  # its streams' seed: a generation's seed for a search's candidates, a final seed for its re-evaluation
    index: int  # its index among its seed's lakes: a candidate's global index (its initial weights' stream)


def groups(keys: Sequence[Hashable]) -> list[tuple[int, int]]:
    """(first, size) of each run of equal consecutive keys: the groups of a block of lakes."""
    out: list[tuple[int, int]] = []
    for i, key in enumerate(keys):
        if out and keys[out[-1][0]] == key:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


def seed_lakes(rules: Sequence[Mapping[str, float]], seeds: Sequence[int]) -> tuple[list[Lake], list[list[int]]]:
    """Rule sets retrained on each seed — a trial's final re-evaluation, a held-out job — as one block of lakes,
    seed by seed (rule set k at index k: its initial weights a trial's k-th), each evaluated on its own seed; with
    the evaluation seeds of each lake."""
    lakes = [Lake(dict(r), int(seed), k) for seed in seeds for k, r in enumerate(rules)]
    return lakes, [[lake.seed] for lake in lakes]


class LakeWorlds:
    """Lakes of one world class and settings, grouped by seed, stepped together as one world of all their copies.

    Its parts are one instance for every lake where the world draws per copy (`whole`), else one per group; what a
    world declares (its agents, spaces, horizon, kinds) is the first part's: every part is the same world under
    other rules. `reset` takes one random generator per group; `group_steps` are the last step's per part, for a
    part's own `assess`.
    """

    def __init__(self, world_class: type, settings: Any, rules: Sequence[Mapping[str, float]], sizes: Sequence[int]):
        if sum(sizes) != len(rules) or not sizes or min(sizes) < 1:
            raise ValueError(f"group sizes {list(sizes)} do not split {len(rules)} lakes")
        self.sizes = tuple(int(s) for s in sizes)
        # one instance that draws per copy, or an instance per group: the parts stepped together
        self.whole = len(self.sizes) > 1 and bool(getattr(world_class, "copy_streams", False))
        part_sizes = (len(rules),) if self.whole or len(self.sizes) == 1 else self.sizes
        bounds = np.cumsum([0, *part_sizes])
        self.worlds = [world_class(settings, list(rules[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]
        self.part_sizes = part_sizes
        self.copies = len(rules)
        self.group_steps: list[Step] = []  # the last step, per part
        self.lakes: tuple[tuple[int, int], ...] = ()  # `of`: each copy's (seed, index)
        self.seeds: tuple[int, ...] = ()  # `of`: each group's seed

    @classmethod
    def of(cls, world_class: type, settings: Any, lakes: Sequence[Lake]) -> "LakeWorlds":
        """The lakes' worlds, a group per run of one seed: each group's season drawn from its seed's stream."""
        runs = groups([lake.seed for lake in lakes])
        worlds = cls(world_class, settings, [lake.rules for lake in lakes], [size for _, size in runs])
        worlds.lakes = tuple((int(lake.seed), int(lake.index)) for lake in lakes)
        worlds.seeds = tuple(int(lakes[first].seed) for first, _ in runs)
        return worlds

    def __getattr__(self, name: str):
        # what a world declares, as its first group's (only reached for names this class does not hold)
        if name == "worlds":
            raise AttributeError(name)
        return getattr(self.worlds[0], name)

    # -- along the axis of copies ----------------------------------------------------------
    def _joined(self, parts: Sequence[Any]):
        """Per-group arrays (or, for a world of kinds, per-group lists of one array per kind) as one."""
        if len(parts) == 1:
            return parts[0]
        if has_kinds(self.worlds[0]):
            return [np.concatenate(per_kind) for per_kind in zip(*parts)]
        return np.concatenate(parts)

    def _split(self, joined) -> list[Any]:
        """One array along the copies (or one per kind) as each group's part."""
        if len(self.worlds) == 1:
            return [joined]
        cuts = np.cumsum(self.part_sizes)[:-1]
        if has_kinds(self.worlds[0]):
            per_kind = [np.split(np.asarray(a), cuts) for a in joined]
            return [list(parts) for parts in zip(*per_kind)]
        return np.split(np.asarray(joined), cuts)

    def reset(self, rngs: Sequence[np.random.Generator]):
        """A new season, group g's weather from `rngs[g]`."""
        if len(rngs) != len(self.sizes):
            raise ValueError(f"{len(rngs)} random generators for {len(self.sizes)} groups of lakes")
        if self.whole:  # every copy its group's generator: copies of one group share its draws
            return self.worlds[0].reset([rng for rng, size in zip(rngs, self.sizes) for _ in range(size)])
        return self._joined([world.reset(rng) for world, rng in zip(self.worlds, rngs)])

    def step(self, actions) -> Step:
        self.group_steps = [world.step(a) for world, a in zip(self.worlds, self._split(actions))]
        if len(self.worlds) == 1:
            return self.group_steps[0]
        return Step(rewards=np.concatenate([np.asarray(s.rewards) for s in self.group_steps]))

    def observe(self):
        return self._joined([world.observe() for world in self.worlds])

    @property
    def done(self) -> bool:
        return all(world.done for world in self.worlds)

    @property
    def failed(self) -> np.ndarray:
        return np.concatenate([np.asarray(world.failed) for world in self.worlds])

    @property
    def alive(self):
        alive = [getattr(world, "alive", None) for world in self.worlds]
        return None if alive[0] is None else np.concatenate(alive)


def evaluate_lakes(
    worlds: LakeWorlds, seeds: Sequence[Sequence[int]], act, objective
) -> list[Assessment]:
    """One season per seed of each group's list (`seeds[g]`, every group as many), the groups played together, every
    agent acting `act(observation)`; the `Assessment`s of the copies, by the world of each part, in lake order."""
    episodes = {len(s) for s in seeds}
    if len(seeds) != len(worlds.sizes) or len(episodes) != 1:
        raise ValueError(f"evaluation seeds {[list(s) for s in seeds]} do not give each of {len(worlds.sizes)} "
                         "groups as many seasons")  # fmt: skip
    seasons: list[list[dict]] = [[] for _ in worlds.worlds]
    failed = [np.zeros(size, dtype=bool) for size in worlds.part_sizes]
    for e in range(episodes.pop()):
        observation = worlds.reset([np.random.default_rng(int(s[e])) for s in seeds])
        steps: list[list[Step]] = [[] for _ in worlds.worlds]
        while not worlds.done:
            worlds.step(act(observation))
            for per_group, step in zip(steps, worlds.group_steps):
                per_group.append(step)
            observation = worlds.observe()
        for g, world in enumerate(worlds.worlds):
            seasons[g].append(stack_steps(steps[g]))
            failed[g] |= world.failed
    return [
        outcome
        for world, group_seasons, group_failed in zip(worlds.worlds, seasons, failed)
        for outcome in world.assess(group_seasons, group_failed, objective)
    ]
