"""Which trials of a session share a lake pool ([runtime] pack; `inner.lake_pool`, docs/inner-loop.md).

A trial of a small population pays a block's fixed price — a fresh Algorithm, a train step's overhead — for one or
two lakes a generation: 5–6 times a population-16 trial's price per evaluation on the shipped runs. A block costs
about a fixed part and a part per lake, up to about 40 lakes (`benchmarks/packing.py --blocks`). With
`pack = "auto"`, trials whose lakes can share a block — one inner loop that trains lakes as one (lake streams, a
loop with `reset_lakes`), one world and network, one K — share pools:
- trials of one population and one number of generations, `PACK_LAKES // population` of them a pool (population
  16's in pairs), their searches in step throughout;
- then, while the session has more pools than CPUs, a pool of at most `PACK_LAKES // 2` lakes (or a trial left
  alone) rides along another, its lakes in the same blocks for as long as both run, up to `MAX_BLOCK_LAKES` lakes
  a block: its fixed price is paid once for both. Never below one pool a CPU: a ride that left a CPU idle would
  save core-seconds at the cost of the wall.
A population of `PACK_LAKES` or more is a block already, and a scan runs its grid in blocks of its own: neither is
packed. Plain Python (the loop class is imported to ask whether it packs).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Sequence

from bilevel_tune.inner.contract import LAKE_STREAMS, InnerLoopConfig, load_loop_class
from bilevel_tune.inner.lake_pool import MAX_BLOCK_LAKES, pack_share
from bilevel_tune.study_data.run_folder import Cell
from bilevel_tune.study_data.trial_plan import TrialPlan

PACK_LAKES = 32  # a pool's lakes a generation: two population-16 trials' (benchmarks/packing.py)
AUTO = "auto"


@dataclass(frozen=True)
class Pack:
    """Trials (by cell, in Tune's order) whose lakes one pool trains as one block each generation."""

    name: str  # its pool actor's
    cells: tuple[Cell, ...]
    members: tuple[str, ...]  # their trials' names: how the pool knows them
    loop: str
    config: InnerLoopConfig
    inner_iters: int

    @property
    def share(self) -> float:
        """Each member's bundle: its share of the pool's one CPU."""
        return pack_share(len(self.cells))

    @property
    def lakes(self) -> int:
        """Lakes a generation."""
        return sum(c.population for c in self.cells)

    def seconds(self, model, budget, until: int | None = None) -> float:
        """The pool on its one CPU, as the planner prices it: one trial's overheads and final, and its members'
        generations in step — every member's lakes a block while all run, fewer as the shorter searches end —;
        `until` a member's generations: the pool's seconds until that member is done."""
        total, done = model.trial_s(replace(self.cells[0], population=self.lakes, generations=0), 1, budget), 0
        for generation in sorted({c.generations for c in self.cells if until is None or c.generations <= until}):
            lakes = sum(c.population for c in self.cells if c.generations >= generation)
            total += (generation - done) * model.generation_s(lakes, budget.inner_iters, budget.eval_episodes)
            done = generation
        return total


def packs_of(study, cells: Sequence[Cell], cpus: int) -> list[Pack]:
    """The session's packs on `cpus` CPUs: its cells (Tune's order) that pack, in pools (the module's docstring);
    a pool of one trial is no pack. Each pack's cells in Tune's order."""
    order = {cell.key: i for i, cell in enumerate(cells)}
    pools: list[tuple[str, list[TrialPlan]]] = []  # (what its trials' lakes share: `_key`, its trials)
    groups = _groups([TrialPlan.of(study, cell) for cell in cells], _key)
    for key, group in groups.items():
        if key is None:
            continue
        for together in _groups(group, lambda plan: (plan.cell.population, plan.cell.generations)).values():
            size = max(1, PACK_LAKES // together[0].cell.population)
            pools += [(key, together[first : first + size]) for first in range(0, len(together), size)]
    _ride_along(pools, cpus, others=len(groups.get(None, [])))
    run = uuid.uuid4().hex[:8]  # names unique on a cluster that runs several studies
    packs = []
    for _, pool in pools:
        if len(pool) > 1:
            pool = sorted(pool, key=lambda plan: order[plan.cell.key])
            packs.append(Pack(f"bilevel-lakes-{run}-{len(packs)}", tuple(p.cell for p in pool),
                              tuple(p.name for p in pool), pool[0].loop, pool[0].inner_config, pool[0].inner_iters))  # fmt: skip
    return packs


def _groups(plans: Sequence[TrialPlan], key) -> dict:
    groups: dict = {}
    for plan in plans:
        groups.setdefault(key(plan), []).append(plan)
    return groups


def _ride_along(pools: list[tuple[str, list[TrialPlan]]], cpus: int, others: int) -> None:
    """Small pools (a trial alone among them) ride along others of their kind, in place, while the session has more
    pools, `others` trials that do not pack counted in, than CPUs: the smallest first, each along the pool it
    shares the most generations with (then the fullest) whose blocks stay within `MAX_BLOCK_LAKES`."""
    lakes = lambda pool: sum(p.cell.population for p in pool[1])  # noqa: E731
    generations = lambda pool: max(p.cell.generations for p in pool[1])  # noqa: E731

    def hosts(small) -> list:
        return [pool for pool in pools if pool is not small and pool[0] == small[0]
                and lakes(pool) + lakes(small) <= MAX_BLOCK_LAKES]  # fmt: skip

    while len(pools) + others > cpus:
        rides = ((small, hosts(small)) for small in sorted(pools, key=lakes) if lakes(small) <= PACK_LAKES // 2)
        small, can_host = next(((small, found) for small, found in rides if found), (None, []))
        if small is None:
            return
        host = max(can_host, key=lambda pool: (min(generations(pool), generations(small)), lakes(pool)))
        host[1].extend(small[1])
        pools[:] = [pool for pool in pools if pool is not small]


def packable(plan: TrialPlan) -> bool:
    """Would this trial share a pool: packing on, a search (not a scan) of a population below `PACK_LAKES`, its
    loop one that trains lakes as one, on lake streams?"""
    if plan.settings.get("runtime.pack", AUTO) != AUTO or plan.cell.scan or plan.cell.population >= PACK_LAKES:
        return False
    if plan.inner_config.streams != LAKE_STREAMS:
        return False
    return callable(getattr(load_loop_class(plan.loop), "reset_lakes", None))


def _key(plan: TrialPlan) -> str | None:
    """What trials of one pool share: their loop and its config (world, network, streams), and K; None for a trial
    that does not pack."""
    if not packable(plan):
        return None
    config = json.dumps(asdict(plan.inner_config), sort_keys=True, default=str)
    return json.dumps([plan.loop, config, plan.inner_iters])
