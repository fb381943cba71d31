"""Random search: each generation `population` points drawn uniformly over the unit box — the baseline every
outer optimiser must beat (docs/es.md). Its incumbent is its best evaluation so far. Plain numpy."""

from __future__ import annotations

from typing import Any

from bilevel_tune.core.outer import PendingSearch, SearchState, checked, rows, told, uniform


class RandomSearch(PendingSearch):
    name, section = "random", None

    def init(self, settings: None, population: int, dim: int, seed: int) -> SearchState:
        return SearchState(self.name, population, dim, seed, pending=rows(uniform(seed, 0, (population, dim))))

    def tell(self, state: SearchState, candidates, objectives) -> tuple[SearchState, dict[str, Any]]:
        candidates, f = checked(state, candidates, objectives)
        following = uniform(state.seed, state.generation + 1, (state.population, state.dim))
        return told(state, candidates, f, following)
