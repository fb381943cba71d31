"""A study's hypotheses, one family: main effects and interactions first, the simple comparisons gated behind them.

A *group* is a grid cell less its seed (`Cell.group`: population, mechanism,
the further axes' values); its runs share their seeds with every other group
(the seed is a block: common worlds, initial weights and evaluation seasons).
Each hypothesis is a contrast over groups, read within each seed — so the
seed's own level cancels:

* a **simple comparison** (`Comparison`): two groups that differ in one
  factor and match on the others, B − A;
* a **main effect** (`MainEffect`) of a factor's levels a → b: the simple
  comparisons of a → b averaged over every combination of the other
  factors' levels, when there are several;
* an **interaction** (`Interaction`) of two factors' level pairs: how much
  the first's a → b differs between the second's two levels, averaged over
  the rest ((b, f) − (a, f) − (b, e) + (a, e));
* a main effect or simple comparison **at equal evaluations** (`at` set, `[decide] equal_budget`): the same
  contrast with the larger level's runs read at the smaller level's evaluations — their incumbents then, which
  each such trial re-scores in its final re-evaluation (`run_folder.at_evaluations` names those scores' groups).
  Planned before look 1, these rows are decided like any other: their main effect is primary, its simple
  comparisons gated behind it.

One α covers them all (docs/verdicts.md): main effects and interactions
share it equally; a rejected main effect passes its share to its simple
comparisons (gatekeeping: a simple comparison is tested only once its
factor's effect, or an interaction it is part of, is shown); a rejected
simple comparison passes its share to its siblings (the same levels
elsewhere), and what is left after the last to the main effects and
interactions still open (`graph.Graph`). A factor with one context (the
only factor varied) has no main effect apart from its comparisons: they
are the primary hypotheses. Plain data; no test here.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bilevel_tune.base.knobs import StudyError
from bilevel_tune.core.outer import label_of
from bilevel_tune.study_data.run_folder import AT_EVALUATIONS, at_evaluations, real_group
from bilevel_tune.study_data.settings import plain
from bilevel_tune.verdicts.graph import EPSILON, Graph

POPULATION, MECHANISM = "population", "mechanism"
MAIN, INTERACTION, SIMPLE = "main effect", "interaction", "simple"


def factors_of(design) -> list[str]:
    """The factors a study varies: population and mechanism (when the grid has more than one), and its axes."""
    out = [POPULATION] if len(design.populations) > 1 else []
    out += [MECHANISM] if len(design.optimize_params) > 1 else []
    return out + [key for key, values in design.axes if len(values) > 1]


def compared(design) -> list[str]:
    """The factors the study compares: `[decide] compare`, or every factor it varies."""
    wanted = set(design.decide.compare) or set(factors_of(design))
    return [f for f in factors_of(design) if f in wanted]


def check_compare(design) -> None:
    """`[decide] compare` names factors the study varies."""
    allowed = factors_of(design)
    for name in design.decide.compare:
        if name not in allowed:
            raise StudyError(
                f"[decide] compare: {name!r} is not a factor of this study; it varies: {', '.join(allowed) or 'none'}"
            )


def check_equal_budget(design) -> None:
    """`[decide] equal_budget` names population, in a study that compares populations whose runs' evaluations differ."""
    for name in design.decide.equal_budget:
        if name != POPULATION:
            raise StudyError(
                f"[decide] equal_budget: {name!r} does not change a run's evaluations; allowed: population (its levels' "
                "evaluations differ through [budget] generations)"
            )
        if POPULATION not in compared(design) or len({design.evaluations_of(p) for p in design.populations}) < 2:
            raise StudyError(
                "[decide] equal_budget: population's levels run the same evaluations here (or population is not "
                "compared): there is no smaller budget to compare them at; drop equal_budget"
            )
        for p in design.populations:
            for fewer in design.equal_evaluations(p):
                if fewer < p:
                    raise StudyError(
                        f"[decide] equal_budget: population {p}'s first generation spends {p} evaluations, more than "
                        f"the {fewer} a smaller population's whole budget spends: no incumbent of population {p} is that "
                        "young; give the smaller population more generations ([budget] generations)"
                    )


def level_of(group: tuple, factor: str) -> Any:
    population, params, extra = group
    if factor == POPULATION:
        return population
    if factor == MECHANISM:
        return params
    return dict(extra)[factor]


def levels_of(design, factor: str) -> list:
    if factor == POPULATION:
        return list(design.populations)
    if factor == MECHANISM:
        return list(design.optimize_params)
    return list(dict(design.axes)[factor])


# a factor whose levels read as names: "CMA-ES vs ES", not "outer.optimizer cma vs outer.optimizer es"
NAMED_LEVELS = {"outer.optimizer": label_of}


def shown(factor: str, level, mechanisms) -> str:
    """A level as a reader sees it: population 1, 2-D floor+risk, es.sigma 0.05, CMA-ES."""
    if factor == MECHANISM:
        return str(mechanisms.label(level))
    if factor in NAMED_LEVELS:
        return NAMED_LEVELS[factor](str(level))
    return f"{'population' if factor == POPULATION else factor} {plain(level)}"


@dataclass(frozen=True)
class Comparison:
    """Group A against group B, which differ only in `factor`; A's level comes first in the study's grid."""

    factor: str  # population, mechanism, or a further axis's key
    a: tuple
    b: tuple
    mechanisms: Any = field(default=None, compare=False, repr=False)  # its world's names (`Study.mechanisms`)
    at: int | None = None  # read at equal evaluations, this many each ([decide] equal_budget): B's runs' incumbents then
    kind = SIMPLE

    @property
    def contrast(self) -> tuple[tuple[tuple, float], ...]:
        return ((self.a, -1.0), (self.b, 1.0))

    def level(self, group: tuple) -> Any:
        level = level_of(group, self.factor)
        return self.mechanisms.label(level) if self.factor == MECHANISM else level

    def levels(self) -> tuple[str, str]:
        """A's and B's level as a reader sees them."""
        return tuple(shown(self.factor, level_of(g, self.factor), self.mechanisms) for g in (self.a, self.b))

    def matched(self) -> str:
        """What the two groups share, e.g. '2-D' or 'population 16, es.sigma 0.05'; '' when nothing else varies."""
        population, params, extra = self.a
        parts = [] if self.factor == POPULATION else [f"population {population}"]
        parts += [] if self.factor == MECHANISM else [self.mechanisms.label(params)]
        parts += [shown(key, value, self.mechanisms) for key, value in extra if key not in (self.factor, AT_EVALUATIONS)]
        return ", ".join(parts)

    @property
    def key(self) -> str:
        """One line naming it: 'population 16 vs 1 at 2-D' (', at equal evaluations (250 each)' read so)."""
        a, b = self.levels()
        where = self.matched()
        return f"{b} vs {a}" + (f" at {where}" if where else "") + equal_label(self.at)


@dataclass(frozen=True)
class MainEffect:
    """A factor's level b against a, each seed's simple comparisons averaged over the other factors' levels."""

    factor: str
    a: Any  # levels of the factor
    b: Any
    contrast: tuple[tuple[tuple, float], ...]
    over: tuple[str, ...]  # the other factors it averages over
    mechanisms: Any = field(default=None, compare=False, repr=False)
    at: int | None = None  # read at equal evaluations, this many each ([decide] equal_budget)
    kind = MAIN

    def levels(self) -> tuple[str, str]:
        return shown(self.factor, self.a, self.mechanisms), shown(self.factor, self.b, self.mechanisms)

    @property
    def key(self) -> str:
        a, b = self.levels()
        return f"{b} vs {a}, over {' and '.join(self.over)}" + equal_label(self.at)


def equal_label(evaluations: int | None) -> str:
    """What a row read at equal evaluations adds to its name ('' for a row read at each run's own budget)."""
    return "" if evaluations is None else f", at equal evaluations ({evaluations:,} each)"


@dataclass(frozen=True)
class Interaction:
    """How much `factors[0]`'s a → b differs between `factors[1]`'s e and f: ((b, f) − (a, f)) − ((b, e) − (a, e))."""

    factors: tuple[str, str]
    a: Any
    b: Any
    e: Any
    f: Any
    contrast: tuple[tuple[tuple, float], ...]
    mechanisms: Any = field(default=None, compare=False, repr=False)
    kind = INTERACTION

    @property
    def factor(self) -> str:
        return " × ".join(self.factors)

    def levels(self) -> tuple[str, str]:
        """The second factor's two levels: where the first factor's difference is compared."""
        second = self.factors[1]
        return shown(second, self.e, self.mechanisms), shown(second, self.f, self.mechanisms)

    def first_levels(self) -> tuple[str, str]:
        first = self.factors[0]
        return shown(first, self.a, self.mechanisms), shown(first, self.b, self.mechanisms)

    @property
    def key(self) -> str:
        (a, b), (e, f) = self.first_levels(), self.levels()
        return f"{b} vs {a} × {f} vs {e}"


def groups(hypothesis) -> tuple[tuple, ...]:
    """The groups a hypothesis reads (its contrast's)."""
    return tuple(g for g, weight in hypothesis.contrast if weight)


def values(hypothesis, scores: dict[tuple, dict[int, float]], seeds) -> np.ndarray:
    """The hypothesis's contrast within each of these seeds (every one of its groups must hold each)."""
    return np.array([sum(w * scores[g][s] for g, w in hypothesis.contrast) for s in seeds], float)


@dataclass(frozen=True)
class Family:
    hypotheses: tuple  # main effects, interactions, then the simple comparisons
    graph: Graph  # the share of α each starts with and where it goes

    def index(self, hypothesis) -> int:
        return self.hypotheses.index(hypothesis)


def simple_comparisons(design) -> list[Comparison]:
    """Every pair of the study's groups that differ in one compared factor, in the grid's order."""
    wanted = set(compared(design))
    out, all_groups = [], design.groups
    for i, a in enumerate(all_groups):
        for b in all_groups[i + 1 :]:
            differ = [f for f in factors_of(design) if level_of(a, f) != level_of(b, f)]
            if len(differ) == 1 and differ[0] in wanted:
                out.append(Comparison(differ[0], a, b, design.mechanisms))
    return out


@functools.lru_cache(maxsize=32)  # a design is compiled once and never changes: its family, once
def family(design, factorial: bool = True) -> Family:
    """The study's hypotheses and their graph; `factorial=False`: the simple comparisons alone, Holm over them."""
    simples = simple_comparisons(design)
    varied, wanted = factors_of(design), compared(design)
    mains, interactions = [], []
    if factorial:
        mains = [m for f in wanted for m in _main_effects(design, f, varied)]
        interactions = [i for f, g in itertools.combinations(wanted, 2) for i in _interactions(design, f, g, varied)]
        equal = set(design.decide.equal_budget)
        mains += [e for m in mains if m.factor in equal and (e := at_equal_evaluations(design, m)) is not None]
        simples += [e for c in simples if c.factor in equal and (e := at_equal_evaluations(design, c)) is not None]
    gated = {id(s) for s in simples if any(_parent(m, s) for m in mains)}
    hypotheses = (*mains, *interactions, *simples)
    primary = [h for h in hypotheses if h.kind != SIMPLE or id(h) not in gated]
    index = {id(h): i for i, h in enumerate(hypotheses)}
    size = len(hypotheses)
    weights, edges = np.zeros(size), np.zeros((size, size))
    for h in primary:
        weights[index[id(h)]] = 1 / len(primary)

    def share(source, targets, rest=()):
        """Edges from `source`: 1 − ε over its targets, ε over the rest (all of it when it has no target)."""
        targets = [t for t in targets if t is not source]
        rest = [r for r in rest if r is not source and r not in targets]
        main = 1 - EPSILON if targets and rest else 1.0
        for t in targets:
            edges[index[id(source)], index[id(t)]] = main / len(targets)
        for r in rest:
            edges[index[id(source)], index[id(r)]] = (1 - main if targets else 1.0) / len(rest)

    for m in mains:
        share(m, [s for s in simples if _parent(m, s)])
    for i in interactions:
        share(i, [s for s in simples if set(groups(s)) <= set(groups(i))], primary)
    for s in simples:
        if id(s) in gated:
            siblings = [t for t in simples if t is not s and id(t) in gated and _same_levels(s, t)]
            share(s, siblings, primary)
        else:
            share(s, [], primary)
    return Family(hypotheses, Graph.of(weights, edges))


def at_equal_evaluations(design, hypothesis):
    """A main effect or simple comparison of population read at equal evaluations: every group whose runs evaluate
    more than the fewer of its two levels read at that many (`at_evaluations`: those runs' incumbents then, each
    re-scored by its own trial's final re-evaluation); None where both levels run as many already."""
    if isinstance(hypothesis, Comparison):
        levels = (hypothesis.a[0], hypothesis.b[0])
    else:
        levels = (hypothesis.a, hypothesis.b)
    budgets = [design.evaluations_of(p) for p in levels]
    if budgets[0] == budgets[1]:
        return None
    fewer = min(budgets)
    return _regrouped(
        hypothesis, lambda g: g if design.evaluations_of(g[0]) <= fewer else at_evaluations(g, fewer), fewer
    )


def read_at(hypothesis, evaluations: int):
    """A row at equal evaluations read at another count each (a pilot's incumbents at a fraction of its budget):
    the groups it reads at fewer evaluations than they ran, read at `evaluations` instead."""
    return _regrouped(
        hypothesis, lambda g: at_evaluations(real_group(g), evaluations) if g != real_group(g) else g, evaluations
    )


def _regrouped(hypothesis, read, at: int):
    """The hypothesis with each group it reads passed through `read`, marked as read at `at` evaluations each."""
    if isinstance(hypothesis, Comparison):
        return dataclasses.replace(hypothesis, a=read(hypothesis.a), b=read(hypothesis.b), at=at)
    return dataclasses.replace(hypothesis, contrast=tuple((read(g), w) for g, w in hypothesis.contrast), at=at)


def _main_effects(design, factor: str, varied: list[str]) -> list[MainEffect]:
    others = [f for f in varied if f != factor]
    if not others:
        return []  # one context: the simple comparisons are the effect
    out = []
    contexts = list(itertools.product(*(levels_of(design, f) for f in others)))
    for a, b in itertools.combinations(levels_of(design, factor), 2):
        contrast = []
        for g in design.groups:
            if tuple(level_of(g, f) for f in others) in contexts and level_of(g, factor) in (a, b):
                contrast.append((g, (1.0 if level_of(g, factor) == b else -1.0) / len(contexts)))
        out.append(MainEffect(factor, a, b, tuple(contrast), tuple(_factor_name(f) for f in others), design.mechanisms))
    return out


def _interactions(design, first: str, second: str, varied: list[str]) -> list[Interaction]:
    others = [f for f in varied if f not in (first, second)]
    count = int(np.prod([len(levels_of(design, f)) for f in others])) if others else 1
    out = []
    for a, b in itertools.combinations(levels_of(design, first), 2):
        for e, f in itertools.combinations(levels_of(design, second), 2):
            sign = {(b, f): 1.0, (a, f): -1.0, (b, e): -1.0, (a, e): 1.0}
            contrast = tuple(
                (g, sign[(level_of(g, first), level_of(g, second))] / count)
                for g in design.groups
                if (level_of(g, first), level_of(g, second)) in sign
            )
            out.append(Interaction((first, second), a, b, e, f, contrast, design.mechanisms))
    return out


def _factor_name(factor: str) -> str:
    return {POPULATION: "populations", MECHANISM: "mechanisms", "outer.optimizer": "optimisers"}.get(factor, factor)


def _parent(main: MainEffect, simple: Comparison) -> bool:
    return simple.factor == main.factor and _same_levels(simple, main)


def _same_levels(h, other) -> bool:
    """Do two hypotheses of one factor compare the same two levels (a → b)?"""
    def pair(x):
        if isinstance(x, Comparison):
            return level_of(x.a, x.factor), level_of(x.b, x.factor)
        return x.a, x.b

    return h.factor == other.factor and pair(h) == pair(other) and h.at == other.at
