"""The dependency query (Lipstick §4.3) and ``provplug depends``.

``provplug depends STORE A B``: does B depend on A, i.e. is some cell of A
among the ancestors of some cell of B? A and B are each a value id, or
``TABLE.COLUMN`` (or ``TABLE.*``: every column, a whole row) with the rows
chosen by ``--a-where`` / ``--b-where``. The answer is yes with the shortest
chain of cells and ops from an A cell to a B cell, or no.

It is answered by one ancestors query of B through the index (the query
methods of ``provplug lineage``), then a breadth-first search over that
answer's triples: never a scan of the store. A cell is not its own ancestor,
so A and B must not share a cell.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import LineageQueryError
from .answer import LineageAnswer, Record, _label, finite
from .targets import parse_target

JSON_FORMAT = "provplug-depends"
JSON_VERSION = 1
Cells = int | Iterable[int] | str  # value id(s) or "TABLE.COLUMN"


class Queries(Protocol):
    """What the dependency query needs of :class:`~provplug.query.api.ProvenanceStore`."""

    def cells(self, *args: Any, **kwargs: Any) -> list[int]: ...

    def lineage(self, *args: Any, **kwargs: Any) -> LineageAnswer: ...

    def records(self, value_ids: Iterable[int]) -> list[Record]: ...


@dataclass
class DependsAnswer:
    """``depends``: B depends on A. ``path``: the cells from an A cell to a B
    cell (empty when not), ``ops[i]`` the op from ``path[i]`` to ``path[i+1]``.
    ``reached``: the ids of A's cells among B's ancestors."""

    depends: bool
    a: list[Record]
    b: list[Record]
    path: list[Record]
    ops: list[str]
    reached: list[int]
    ancestors: int
    stats: dict[str, Any]

    def reached_records(self) -> list[Record]:
        """A's cells among B's ancestors."""
        reached = set(self.reached)
        return [r for r in self.a if r["value_id"] in reached]

    def to_dict(self) -> dict[str, Any]:
        return finite({
            "format": JSON_FORMAT, "version": JSON_VERSION, "depends": self.depends,
            "a": self.a, "b": self.b, "path": self.path, "ops": self.ops, "reached": self.reached,
            "ancestors": self.ancestors, "stats": self.stats,
        })

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def render(self) -> str:
        a, b = _cells_text(self.a), _cells_text(self.b)
        if not self.depends:
            return (f"no: {b} does not depend on {a}\n"
                    f"(none of A's {len(self.a)} cell(s) is among B's {self.ancestors} ancestors)")
        lines = [f"yes: {b} depends on {a}",
                 f"({len(self.reached)} of A's {len(self.a)} cell(s) among B's {self.ancestors} ancestors); shortest path:",
                 f"  {_label(self.path[0])}"]
        lines += [f"  -> {op} -> {_label(cell)}" for op, cell in zip(self.ops, self.path[1:], strict=True)]
        return "\n".join(lines)


def _cells_text(records: list[Record]) -> str:
    if len(records) == 1:
        return _label(records[0])
    names = sorted({f"{r['table']}.{r['column']}" if r["column"] else str(r["table"]) for r in records})
    return f"{len(records)} cells of {', '.join(names)}"


def depends(store: Queries, a: Cells, b: Cells, *, a_where: str | None = None,
            b_where: str | None = None, run: str | None = None, method: str = "auto",
            tau: int | None = None, spark: Any = None) -> DependsAnswer:
    """See :meth:`ProvenanceStore.depends`."""
    a_ids = store.cells(**_selection(a, a_where, run, "A"))
    b_ids = store.cells(**_selection(b, b_where, run, "B"))
    shared = set(a_ids) & set(b_ids)
    if shared:
        raise LineageQueryError(f"A and B share {len(shared)} cell(s) (value {min(shared)}): a cell is not its own ancestor")
    answer = store.lineage(b_ids, method=method, direction="up", tau=tau, spark=spark, run=run)
    records = {r["value_id"]: r for r in [*answer.query, *answer.lineage]}
    chain = _shortest_path(answer.edges, b_ids, set(a_ids))
    a_records = store.records(a_ids)
    return DependsAnswer(
        depends=bool(chain),
        a=a_records,
        b=answer.query,
        path=[records[v] for v, _ in chain],
        ops=[op for _, op in chain[:-1]],
        reached=sorted(set(a_ids) & answer.value_ids),
        ancestors=len(answer.lineage),
        stats=answer.stats,
    )


def _selection(cells: Cells, where: str | None, run: str | None, name: str) -> dict[str, Any]:
    """The :meth:`ProvenanceStore.cells` arguments of side ``name``."""
    if isinstance(cells, str):
        table, column = parse_target(cells)
        return {"table": table, "column": column, "where": where, "run": run}
    if where is not None:
        raise LineageQueryError(f"{name}: a where clause needs TABLE.COLUMN, not value ids")
    return {"value_id": cells, "run": run}


def _shortest_path(edges: list[dict[str, Any]], starts: list[int], targets: set[int]) -> list[tuple[int, str]]:
    """Breadth-first from ``starts`` up the triples to the nearest target:
    ``[(A cell, op to next), …, (B cell, "")]``, or ``[]``."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for e in edges:
        parents.setdefault(e["dst"], []).append((e["src"], e["op"]))
    came_from: dict[int, tuple[int, str] | None] = dict.fromkeys(sorted(starts))
    queue = deque(sorted(starts))
    while queue:
        value = queue.popleft()
        if value in targets:
            chain: list[tuple[int, str]] = [(value, "")]
            step = came_from[value]
            while step is not None:
                child, op = step
                chain[-1] = (chain[-1][0], op)
                chain.append((child, ""))
                step = came_from[child]
            return chain
        for parent, op in sorted(parents.get(value, [])):
            if parent not in came_from:
                came_from[parent] = (value, op)
                queue.append(parent)
    return []
