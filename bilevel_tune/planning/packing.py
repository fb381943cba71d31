"""Which trials of a session share a lake pool ([runtime] pack; `inner.lake_pool`, docs/inner-loop.md).

A trial of a small population pays a block's fixed price — a fresh Algorithm, a train step's overhead — for one or
two lakes a generation: 5–6 times a population-16 trial's price per evaluation on the shipped runs; and a block of
32 lakes costs a lake 0.81× one of 16, measured in one process (docs/benchmarks.md). With `pack = "auto"`, trials whose
lakes can share a block — one inner loop that trains lakes as one (lake streams, a loop with `reset_lakes`), one
world and network, one K, one population and one number of generations, so that their searches run in step — go
to one pool, `PACK_LAKES // population` of them a pool (population 16's in pairs): a block of about `PACK_LAKES`
lakes a generation, on one CPU. A population of `PACK_LAKES` or more is a block already, and a scan runs its grid
in blocks of its own: neither is packed. Plain Python (the loop class is imported to ask whether it packs).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Sequence

from bilevel_tune.inner.contract import LAKE_STREAMS, InnerLoopConfig, load_loop_class
from bilevel_tune.inner.lake_pool import pack_share
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

    @property
    def unit(self) -> Cell:
        """The pack as the planner prices it: one trial of all its lakes, on one CPU."""
        return replace(self.cells[0], population=self.lakes)


def packs_of(study, cells: Sequence[Cell]) -> list[Pack]:
    """The session's packs: its cells (Tune's order) that pack, grouped and cut to `PACK_LAKES` lakes a pool; a
    group of one is no pack."""
    plans = [TrialPlan.of(study, cell) for cell in cells]
    groups: dict[str, list[TrialPlan]] = {}
    for plan in plans:
        if packable(plan):
            groups.setdefault(_key(plan), []).append(plan)
    run = uuid.uuid4().hex[:8]  # names unique on a cluster that runs several studies
    packs = []
    for group in groups.values():
        size = max(1, PACK_LAKES // group[0].cell.population)
        for first in range(0, len(group), size):
            part = group[first : first + size]
            if len(part) > 1:
                packs.append(Pack(f"bilevel-lakes-{run}-{len(packs)}", tuple(p.cell for p in part),
                                  tuple(p.name for p in part), part[0].loop, part[0].inner_config, part[0].inner_iters))  # fmt: skip
    return packs


def packable(plan: TrialPlan) -> bool:
    """Would this trial share a pool: packing on, a search (not a scan) of a population below `PACK_LAKES`, its
    loop one that trains lakes as one, on lake streams?"""
    if plan.settings.get("runtime.pack", AUTO) != AUTO or plan.cell.scan or plan.cell.population >= PACK_LAKES:
        return False
    if plan.inner_config.streams != LAKE_STREAMS:
        return False
    return callable(getattr(load_loop_class(plan.loop), "reset_lakes", None))


def _key(plan: TrialPlan) -> str:
    """What trials of one pool share: their loop and its config, K, population and generations."""
    config = json.dumps(asdict(plan.inner_config), sort_keys=True, default=str)
    return json.dumps([plan.loop, config, plan.inner_iters, plan.cell.population, plan.cell.generations])
