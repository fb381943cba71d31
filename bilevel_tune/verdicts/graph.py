"""The graphical multiple-testing procedure: a family's α split over its hypotheses, passed on when one is rejected.

Bretz, Maurer, Brannath & Posch, "A graphical approach to sequentially
rejective multiple test procedures" (Statistics in Medicine, 2009): each
hypothesis j holds a share w_j of α (Σ w ≤ 1) and is tested at level w_j·α;
when one is rejected its share moves along the graph's edges (g_jk, each
row summing to at most 1) and the edges are rewired around it (their
Algorithm 1). Holm's procedure is the complete graph with equal edges;
gatekeeping is a hypothesis that starts with no share and receives one
only when its parent is rejected. The family-wise error stays at most α
whatever the dependence between the tests, and — tested at every look
so far at each updated level — with group-sequential tests too (Maurer &
Bretz, "Multiple testing in group sequential trials using graphical
approaches", Statistics in Biopharmaceutical Research, 2013).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPSILON = 1e-6  # an ε-edge (Bretz et al. 2009): a share that moves on only once the main edges' targets are all gone


@dataclass(frozen=True)
class Graph:
    weights: tuple[float, ...]  # each hypothesis's share of α now
    edges: tuple[tuple[float, ...], ...]  # g_jk: the share of j's weight that goes to k when j is rejected
    rejected: frozenset[int] = frozenset()

    @classmethod
    def of(cls, weights, edges) -> "Graph":
        w, g = np.asarray(weights, float), np.asarray(edges, float)
        if w.ndim != 1 or g.shape != (w.size, w.size):
            raise ValueError(f"a graph of {w.size} hypotheses needs a {w.size}×{w.size} edge matrix, got {g.shape}")
        if (w < 0).any() or w.sum() > 1 + 1e-9 or (g < 0).any() or (g.sum(axis=1) > 1 + 1e-9).any():
            raise ValueError("a graph's weights and each hypothesis's edges are shares: ≥ 0, summing to at most 1")
        if np.diag(g).any():
            raise ValueError("a hypothesis cannot pass its share to itself")
        return cls(tuple(map(float, w)), tuple(map(tuple, g.tolist())))

    def level(self, j: int, alpha: float) -> float:
        return 0.0 if j in self.rejected else self.weights[j] * alpha

    def reject(self, j: int) -> "Graph":
        """The graph after rejecting hypothesis j: its share passed on, the edges rewired around it."""
        w, g = np.array(self.weights), np.array(self.edges)
        active = [k for k in range(w.size) if k != j and k not in self.rejected]
        new_w, new_g = w.copy(), np.zeros_like(g)
        for k in active:
            new_w[k] = w[k] + w[j] * g[j, k]
        new_w[j] = 0.0
        for i in active:
            for k in active:
                if i == k:
                    continue
                denominator = 1 - g[i, j] * g[j, i]
                new_g[i, k] = (g[i, k] + g[i, j] * g[j, k]) / denominator if denominator > 1e-15 else 0.0
        return Graph(tuple(map(float, new_w)), tuple(map(tuple, new_g.tolist())), self.rejected | {j})

    def with_equivalence(self) -> "Graph":
        """The graph of a family with a margin: each of the m hypotheses makes two claims, 'differs' (node j) and
        'equivalent within the margin' (node m + j), each holding half its share. A claim shown passes its share
        along the same edges to the same claim of its targets, and the rest — ε while a target is left, all of it
        once none is — to its own hypothesis's other claim. A plain graph of 2m nodes, weights summing to at most
        1: the family-wise error over both kinds of claim is at most α (Bretz et al. 2009)."""
        w, g = np.array(self.weights), np.array(self.edges)
        m = w.size
        edges = np.zeros((2 * m, 2 * m))
        for first in (0, m):
            edges[first : first + m, first : first + m] = (1 - EPSILON) * g
        for j in range(m):
            rest = 1 - (1 - EPSILON) * g[j].sum()
            edges[j, m + j] = edges[m + j, j] = rest
        return Graph.of(np.concatenate([w, w]) / 2, edges)

    def less(self, j: int, share: float) -> "Graph":
        """The graph with hypothesis j's share lowered by `share` (never below 0): α spent elsewhere."""
        w = list(self.weights)
        w[j] = max(0.0, w[j] - share)
        return Graph(tuple(w), self.edges, self.rejected)
