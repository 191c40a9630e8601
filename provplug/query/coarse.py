"""Lineage across coarse steps: where a cell-level answer reaches a step
provplug stored coarsely (:class:`provplug.model.CoarseEdge`), it says so and
goes on at column level.

A coarse edge has no triple, so no query method crosses it and no index
component is merged through it. This module looks at the cells an answer
holds (query and lineage): each cell in an output column of a coarse step
(``up``) -- or in an input column of one (``down``) -- crosses it, and the
answer continues from the WHOLE columns on the other side (every row: the
step's rows are not traced). From there on it is column-level and
conservative: through a coarse edge, its columns; through any other step,
every column of its inputs (``up``) or outputs (``down``). Each crossing is
reported with the step, its run and its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from provplug import ids
from provplug.model import CoarseEdge, coarse_reason
from provplug.plugin.protocols import Store
from provplug.store.catalogue import TableEntry
from provplug.store.coarse import coarse_of

Column = tuple[int, int]  # (table id, column index)


class CoarseGraph:
    """The coarse edges of a store's runs, and the op records to continue through."""

    def __init__(self, store: Store, run_ids: Sequence[str], tables: dict[int, TableEntry], ops: list[dict[str, Any]]):
        self.edges: list[CoarseEdge] = coarse_of(store, set(run_ids))
        self.tables = tables
        self.ops = {int(o["op_id"]): o for o in ops}

    def crossings(self, values: np.ndarray, direction: str) -> list[dict[str, Any]]:
        """The coarse steps an answer holding ``values`` crosses, each with
        the whole columns it continues from, and the columns reached beyond
        (empty when the store has no coarse step or none is crossed)."""
        if not self.edges or direction not in ("up", "down"):
            return []
        reached = _columns_of(values)
        crossed: dict[int, dict[Column, set[Column]]] = {}  # op -> (near column -> far columns)
        for edge in self.edges:
            for near, far in self._across(edge, reached, direction):
                crossed.setdefault(edge.op, {}).setdefault(near, set()).update(far)
        return [self._crossing(op, pairs, direction) for op, pairs in sorted(crossed.items())]

    def _across(self, edge: CoarseEdge, reached: set[Column], direction: str) -> Iterable[tuple[Column, list[Column]]]:
        """(column of the answer, the columns on the far side of ``edge`` it reaches)."""
        if direction == "up":
            width = len(self.tables[edge.src_table].columns) if edge.src_table in self.tables else 0
            for table, column in reached:
                if table == edge.dst_table:
                    yield (table, column), [(edge.src_table, c) for c in edge.sources_of(column, width)]
        else:
            width = len(self.tables[edge.dst_table].columns) if edge.dst_table in self.tables else 0
            for table, column in reached:
                if table == edge.src_table:
                    yield (table, column), [(edge.dst_table, c) for c in edge.targets_of(column, width)]

    def _crossing(self, op_id: int, pairs: dict[Column, set[Column]], direction: str) -> dict[str, Any]:
        op = self.ops.get(op_id, {})
        far = sorted(set().union(*pairs.values()))
        return {
            "op": op.get("name", str(op_id)),
            "op_id": op_id,
            "run_id": op.get("run_id"),
            "reason": coarse_reason(op),
            "from": self._named(sorted(pairs)),
            "continues_from": self._named(far),
            "rows": "all",
            "beyond": self._named(sorted(self._beyond(set(far), direction) - set(far))),
        }

    def _beyond(self, start: set[Column], direction: str) -> set[Column]:
        """Every column reachable from ``start`` at column level (conservative)."""
        seen, frontier = set(start), list(start)
        while frontier:
            table, column = frontier.pop()
            for nxt in self._next(table, column, direction):
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        return seen

    def _next(self, table: int, column: int, direction: str) -> Iterable[Column]:
        coarse_ops = set()
        for edge in self.edges:
            coarse_ops.add(edge.op)
            yield from (c for near, far in self._across(edge, {(table, column)}, direction) for c in far)
        for op_id, op in self.ops.items():
            if op_id in coarse_ops:
                continue
            near, far = ("outputs", "inputs") if direction == "up" else ("inputs", "outputs")
            if table in op.get(near, ()):
                for other in op.get(far, ()):
                    entry = self.tables.get(int(other))
                    yield from ((int(other), c) for c in range(len(entry.columns) if entry else 0))

    def _named(self, columns: Sequence[Column]) -> list[dict[str, Any]]:
        """``[{"table": name, "table_id": id, "columns": [names]}]``, one per table."""
        by_table: dict[int, list[int]] = {}
        for table, column in columns:
            by_table.setdefault(table, []).append(column)
        named = []
        for table, cols in sorted(by_table.items()):
            entry = self.tables.get(table)
            names = [entry.columns[c] if entry and c < len(entry.columns) else str(c) for c in sorted(set(cols))]
            named.append({"table": entry.name if entry else str(table), "table_id": table, "columns": names})
        return named


def _columns_of(values: np.ndarray) -> set[Column]:
    """The (table, column) of every captured value id among ``values``."""
    packed = values[values >= ids.IMPORTED_ID_LIMIT]
    tables = packed >> ids.TABLE_SHIFT
    columns = (packed >> ids.COLUMN_SHIFT) & ((1 << ids.COLUMN_BITS) - 1)
    return {(int(t), int(c)) for t, c in set(zip(tables.tolist(), columns.tolist(), strict=True))}


def crossing_lines(crossings: Sequence[dict[str, Any]], direction: str) -> list[str]:
    """The crossings as text lines, for the tree and the summary."""
    lines = []
    side = "from" if direction == "up" else "into"
    for c in crossings:
        cols = "; ".join(f"{t['table']}.{{{', '.join(t['columns'])}}}" for t in c["continues_from"])
        lines.append(f"coarse step {c['op']} ({c['reason']}): continues {side} every row of {cols}")
        if c["beyond"]:
            more = "; ".join(f"{t['table']}.{{{', '.join(t['columns'])}}}" for t in c["beyond"])
            lines.append(f"  and beyond it, column-level: {more}")
    return lines
