"""Worlds as plug-ins: the contract every world keeps (`contract`), its check (`check`), the adapters of a world
written for one copy (`single_copy`) and of a PettingZoo ParallelEnv (`pettingzoo`), the built-in worlds.

A world is named in a study by a built-in name or as `module:Class`, found as
`--inner` specs are. The built-in ones are packages here, each one folder: `fresh_water/` and `fishery/`.
"""

from __future__ import annotations

from bilevel_tune.base.plugins import import_class
from bilevel_tune.worlds.contract import METHODS_AND_DECLARATIONS, WorldError
from bilevel_tune.worlds.pettingzoo import as_world, is_parallel_env_world
from bilevel_tune.worlds.single_copy import is_single_copy, single_copy

DEFAULT_WORLD = "fresh-water"  # the world of a study file, record or env shell that names none
BUILTIN_WORLDS = {
    "fresh-water": "bilevel_tune.worlds.fresh_water:FreshWater",
    "fishery": "bilevel_tune.worlds.fishery:Fishery",
}


def world_path(spec: str) -> str:
    """'fishery' → 'bilevel_tune.worlds.fishery:Fishery'; a 'module:Class' spec is its own path."""
    return BUILTIN_WORLDS.get(spec, spec)


def load_world(spec: str) -> type:
    """The world class a spec names; WorldError in one line when it does not import or is not a world."""
    world = import_class(spec, BUILTIN_WORLDS, WorldError, what="world ")
    if is_parallel_env_world(world):  # a PettingZoo ParallelEnv: its own API test first, then one env per copy
        world = as_world(world)
    if isinstance(world, type) and is_single_copy(world):
        world = single_copy(world)  # one copy, PettingZoo-style: looped over copies
    missing = [name for name in METHODS_AND_DECLARATIONS if not hasattr(world, name)]
    if not isinstance(world, type) or missing:
        raise WorldError(f"world {spec!r} is not a world: it lacks {', '.join(missing) or 'a class'} (docs/worlds.md)")
    return world


__all__ = ["BUILTIN_WORLDS", "DEFAULT_WORLD", "WorldError", "load_world", "world_path"]
