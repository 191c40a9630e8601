"""The built-in split chooser (registered as a plugin, answers last).

The paper picked its splits by hand (Figure 1). provplug picks them from
``G_wf`` and two captured statistics: ``table_values`` (distinct values of
each table that lie on a triple) and ``pair_triples`` (triples per
``(src_table, dst_table)``). Aim, in the paper's terms: few set dependencies
(C1) and small set-lineages (C2) — both grow with the triples that cross a
split boundary — against small sets (C3), which needs enough splits.

Strategy (the same at every level, recursively, down to single tables):

1. Order the tables topologically by level (longest path from a source; a
   source table is placed just before its first consumer; ties by name;
   tables on a table-level cycle last), so every split is a contiguous
   stretch of the workflow, like the paper's sp1 -> sp2 -> sp3.
2. Choose ``k`` parts: ``max(2, round(n ** (1/3)))`` for ``n`` tables (3 for the
   paper's 29 tables). Few top-level splits keep set-lineages short (C1, C2);
   C3 is served by recursion, which Algorithm 3 only uses for sets that are
   still at least theta nodes.
3. Cut the order into ``k`` stretches by dynamic programming that minimises
   the triples crossing the cuts, with every stretch holding at most
   ``max(1.25 * mean, largest table)`` values (so a cut never just peels off
   a thin end table, which would only deepen the recursion); ties go to the
   most balanced cut.
4. A stretch that is not weakly connected in ``G_wf`` becomes one split per
   weakly connected piece, so every split is weakly connected and splits are
   disjoint by construction.
5. Every split of two or more tables is cut again the same way into its
   sub-splits, so a still-too-large set can always be partitioned further.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from provplug.index.workflow import WorkflowGraph, weak_pieces
from provplug.plugin.markers import hookimpl

# A stretch may hold at most this many times its fair share of the values.
BALANCE = 1.25


@hookimpl(trylast=True)
def provplug_choose_splits(workflow: WorkflowGraph, stats: Mapping[str, Any]) -> list[Any] | None:
    return choose_splits(workflow, stats)


def choose_splits(workflow: WorkflowGraph, stats: Mapping[str, Any]) -> list[Any]:
    values = {t: int(v) for t, v in dict(stats.get("table_values", {})).items()}
    pairs = [(str(a), str(b), int(n)) for a, b, n in stats.get("pair_triples", ())]
    chooser = _Chooser(workflow, values, pairs)
    return [chooser.spec(piece) for piece in chooser.partition(list(workflow.tables))]


class _Chooser:
    def __init__(self, workflow: WorkflowGraph, values: dict[str, int], pairs: list[tuple[str, str, int]]) -> None:
        self.workflow = workflow
        self.adj = workflow.neighbours()
        self.values = values
        self.pairs = pairs

    def spec(self, tables: list[str]) -> list[Any]:
        """A split's JSON: flat names for one table, else its sub-splits."""
        if len(tables) == 1:
            return tables
        parts = self.partition(tables)
        return [self.spec(p) for p in parts] if len(parts) > 1 else sorted(tables)

    def partition(self, tables: list[str]) -> list[list[str]]:
        """Disjoint weakly connected parts of ``tables`` (see the module doc)."""
        order = self.topological(tables)
        if len(order) <= 1:
            return [order] if order else []
        k = min(len(order), max(2, round(len(order) ** (1 / 3))))
        parts = []
        for stretch in self.cut(order, k):
            parts += weak_pieces(set(stretch), self.adj)
        return parts

    def topological(self, tables: list[str]) -> list[str]:
        """Tables by (level, name): a derived table's level is its longest path
        from a source; a source sits just before its first consumer (so a side
        input such as a reference table lands beside the table that reads it)."""
        members = set(tables)
        parents: dict[str, list[str]] = {t: [] for t in members}
        children: dict[str, list[str]] = {t: [] for t in members}
        for a, b in self.workflow.edges:
            if a in members and b in members:
                parents[b].append(a)
                children[a].append(b)
        level: dict[str, int] = {}
        ready = sorted(t for t in members if not parents[t])
        pending = {t: len(parents[t]) for t in members}
        while ready:
            t = ready.pop()
            level[t] = max((level[p] + 1 for p in parents[t]), default=0)
            for c in children[t]:
                pending[c] -= 1
                if pending[c] == 0:
                    ready.append(c)
        for t in members:
            if not parents[t] and children[t] and all(c in level for c in children[t]):
                level[t] = min(level[c] for c in children[t]) - 1
        # Tables on a table-level cycle never become ready: keep them last, by name.
        last = max(level.values(), default=0) + 1
        return sorted(members, key=lambda t: (level.get(t, last), t))

    def cut(self, order: Sequence[str], k: int) -> list[list[str]]:
        n = len(order)
        pos = {t: i for i, t in enumerate(order)}
        vals = np.array([max(self.values.get(t, 0), 0) for t in order], dtype=np.float64)
        prefix = np.concatenate([[0.0], np.cumsum(vals)])
        total = float(prefix[-1])
        # crossing[i]: triples between order[:i] and order[i:] (a cut before position i).
        crossing = np.zeros(n + 1)
        for a, b, cnt in self.pairs:
            if a in pos and b in pos and a != b:
                lo, hi = sorted((pos[a], pos[b]))
                crossing[lo + 1 : hi + 1] += cnt
        cap = max(BALANCE * total / k, float(vals.max(initial=0.0)))
        while True:  # relax the balance cap until k stretches fit (at cap >= total they do)
            bounds = _best_cuts(prefix, crossing, k, cap)
            if bounds is not None:
                return [list(order[a:b]) for a, b in itertools.pairwise(bounds)]
            cap *= BALANCE


def _best_cuts(prefix: np.ndarray, crossing: np.ndarray, k: int, cap: float) -> list[int] | None:
    """Stretch boundaries ``0 = b0 < b1 < ... < bk = n`` minimising the crossing
    triples at ``b1..b(k-1)`` (then imbalance) with every stretch <= ``cap``."""
    n = len(prefix) - 1
    total = float(prefix[-1])
    scale = 2 * total * total if total > 0 else 1.0
    best = np.full((k + 1, n + 1), math.inf)
    back = np.zeros((k + 1, n + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for j in range(1, k + 1):
        for i in range(j, n + 1):
            start = np.arange(j - 1, i)
            size = prefix[i] - prefix[start]
            # Lexicographic in effect: crossing triples first, then balance (< 1 in total).
            cost = best[j - 1, start] + np.where(start > 0, crossing[start], 0.0) + size * size / scale
            cost = np.where(size <= cap * (1 + 1e-9), cost, math.inf)
            m = int(np.argmin(cost))
            best[j, i], back[j, i] = cost[m], start[m]
    if not math.isfinite(best[k, n]):
        return None
    bounds, i = [n], n
    for j in range(k, 0, -1):
        i = int(back[j, i])
        bounds.append(i)
    return bounds[::-1]
