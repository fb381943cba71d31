"""CMA-ES (Hansen's `cma` package) over the unit box of the searched rules' u (docs/es.md).

`cma` keeps its search in a mutable object; the contract wants a frozen state. The state keeps every generation's
candidates and objectives, and the object is rebuilt from them when it is not at hand (a resumed trial): a fresh
CMA-ES told the same history asks the same next candidates, because its normal draws come from a generator seeded
by (seed, generation) before each ask (`_SeededNormal`, given as cma's `randn`; numpy's global generator is never
touched). Within a run the live object is kept beside the state it belongs to, so a generation costs one tell and
one ask. Maximises the objective (cma minimises its negative); failed candidates rank worst; a generation where all
fail tells it nothing. The incumbent is CMA's mean (`result.xfavorite`).
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from bilevel_tune.base import seeds
from bilevel_tune.core.outer import PendingSearch, SearchState, checked, fill_failed, rows, told

LIVE_KEPT = 4  # live CMA objects kept, each beside the state it belongs to


class _SeededNormal:
    """cma's `randn(n, dim)`: standard normals from the generator set for the coming ask."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def __call__(self, *shape):
        return self.rng.standard_normal(shape)


class CMAES(PendingSearch):
    name, section, min_population = "cma", "cma", 2

    def init(self, settings, population: int, dim: int, seed: int) -> SearchState:
        strategy = _fresh(settings.sigma0, population, dim)
        pending = _ask(strategy, seed, 0)
        state = SearchState(
            self.name, population, dim, seed, settings=dataclasses.asdict(settings), pending=rows(pending),
            incumbent_u=(0.5,) * dim, scale=float(strategy.sigma),
        )  # fmt: skip
        _keep(state, strategy)
        return state

    def tell(self, state: SearchState, candidates, objectives) -> tuple[SearchState, dict[str, Any]]:
        candidates, f = checked(state, candidates, objectives)
        strategy = copy.deepcopy(_live(state))
        _tell(strategy, f)
        pending = _ask(strategy, state.seed, state.generation + 1)
        incumbent = np.clip(strategy.result.xfavorite[: state.dim], 0.0, 1.0)
        new, metrics = told(state, candidates, f, pending, incumbent=incumbent, scale=float(strategy.sigma))
        _keep(new, strategy)
        return new, metrics


def _fresh(sigma0: float, population: int, dim: int):
    import cma  # only a study that runs CMA-ES needs the package

    options = {
        "popsize": population,
        "bounds": [0.0, 1.0],
        "randn": _SeededNormal(),
        "seed": float("nan"),  # its draws are ours: cma seeds nothing
        "verbose": -9,
        "verb_log": 0,
        "verb_disp": 0,
        "tolx": 0,  # no stopping: the study's budget ends the run
        "tolfun": 0,
        "tolflatfitness": 10**9,
        "tolstagnation": 10**9,
    }
    # cma runs in 2 dimensions or more: a 1-D mechanism is the first coordinate of two, the second one ignored by
    # the objective (its fixed_variables option fails in cma 4.5's tell when bounded)
    strategy = cma.CMAEvolutionStrategy([0.5] * max(dim, 2), sigma0, options)
    strategy.searched_dims = dim
    return strategy


def _ask(strategy, seed: int, generation: int) -> np.ndarray:
    """The next candidates, u in the box: cma's points (kept on it for the tell) in the searched coordinates."""
    strategy.opts["randn"].rng = seeds.optimizer_generator(seed, generation)
    with warnings.catch_warnings():  # after a generation that told nothing, cma warns of its unused mirrored point
        warnings.simplefilter("ignore")
        strategy.asked = strategy.ask()
    return np.clip(np.array(strategy.asked, dtype=float)[:, : strategy.searched_dims], 0.0, 1.0)


def _tell(strategy, f: np.ndarray) -> None:
    """Tell cma the objectives of the points it asked last (negated: it minimises); nothing when all failed."""
    if np.isfinite(f).any():
        with warnings.catch_warnings():  # its note on a mirrored point left untold after such a generation
            warnings.simplefilter("ignore")
            strategy.tell(strategy.asked, list(-fill_failed(f)))


_LIVE: OrderedDict = OrderedDict()


def _key(state: SearchState) -> tuple:
    return (state.seed, state.population, state.dim, state.generation, state.pending, state.settings["sigma0"])


def _keep(state: SearchState, strategy) -> None:
    _LIVE[_key(state)] = strategy
    while len(_LIVE) > LIVE_KEPT:
        _LIVE.popitem(last=False)


def _live(state: SearchState):
    """The CMA object that asked this state's pending candidates: kept, or rebuilt by replaying its history."""
    if _key(state) in _LIVE:
        return _LIVE[_key(state)]
    strategy = _fresh(state.settings["sigma0"], state.population, state.dim)
    for generation, (candidates, objectives) in enumerate(state.history):
        if rows(_ask(strategy, state.seed, generation)) != candidates:
            raise ValueError(f"CMA-ES's history does not replay: generation {generation} asks other candidates")
        _tell(strategy, np.array([np.nan if v is None else v for v in objectives], dtype=float))
    pending = _ask(strategy, state.seed, state.generation)
    if rows(pending) != state.pending:
        raise ValueError(f"CMA-ES's history does not ask this state's candidates at generation {state.generation}")
    _keep(state, strategy)
    return strategy
