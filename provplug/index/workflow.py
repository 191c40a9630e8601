"""The table catalogue and the inferred workflow dependency graph ``G_wf``.

Table identity: **a table is its name**, across runs. Every run reserves its
own table ids, so the same step output captured twice (or the same imported
table imported twice) has several ids but one name; the index treats them as
one node of ``G_wf`` and one table of a split. This is what lets a user name
tables in ``--splits`` and what makes re-indexing independent of how the
triples were spread over runs.

Edges of ``G_wf``: ``T1 -> T2`` when an op reads ``T1`` and writes ``T2``
(capture metadata), plus every distinct ``(src_table, dst_table)`` of the
triples (the only source for imported runs, whose ops carry no tables).
Self-loops carry no ordering information and are dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from provplug.errors import DamagedStoreError
from provplug.plugin.protocols import Store
from provplug.store.catalogue import StoreCatalogue


@dataclasses.dataclass(frozen=True)
class TableCatalogue:
    """Table names in sorted order; ``code`` = position, stable across runs."""

    names: tuple[str, ...]
    code_of_id: dict[int, int]

    @classmethod
    def from_store(cls, store: Store) -> TableCatalogue:
        catalogue = StoreCatalogue.of(store)
        names = catalogue.table_names()
        index = {n: i for i, n in enumerate(names)}
        return cls(names, {t.table_id: index[t.name] for t in catalogue.tables.values()})

    def codes(self, table_ids: np.ndarray, uri: str) -> np.ndarray:
        """The code of each table id; :class:`DamagedStoreError` if a triple
        names a table no committed run defines (caught here: read as some
        other table it would make the index blame the split chooser)."""
        lookup = self.id_to_code_array()
        table_ids = np.asarray(table_ids, dtype=np.int64)
        known = (table_ids >= 0) & (table_ids < len(lookup))
        out = np.full(len(table_ids), -1, dtype=np.int32)
        out[known] = lookup[table_ids[known]]
        if (out < 0).any():
            raise self.unknown_tables(np.unique(table_ids[out < 0]).tolist(), uri)
        return out

    def unknown_tables(self, table_ids: list[int], uri: str) -> DamagedStoreError:
        shown = ", ".join(str(t) for t in table_ids[:5]) + (" ..." if len(table_ids) > 5 else "")
        return DamagedStoreError(
            f"damaged store {uri}: triples name table id(s) {shown} that no committed run defines "
            "(is a run's tables.parquet or _manifest.json missing?)"
        )

    def id_to_code_array(self) -> np.ndarray:
        """Dense lookup array: ``arr[table_id] == code`` (-1 for unknown ids)."""
        size = max(self.code_of_id, default=0) + 1
        arr = np.full(size, -1, dtype=np.int32)
        for table_id, code in self.code_of_id.items():
            arr[table_id] = code
        return arr


@dataclasses.dataclass(frozen=True)
class WorkflowGraph:
    """``G_wf``: table names and directed edges between them (no self-loops)."""

    tables: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]

    def neighbours(self) -> dict[str, set[str]]:
        """Undirected adjacency (for weak connectivity)."""
        adj: dict[str, set[str]] = {t: set() for t in self.tables}
        for a, b in self.edges:
            adj[a].add(b)
            adj[b].add(a)
        return adj

    def is_weakly_connected(self, tables: Iterable[str]) -> bool:
        members = set(tables)
        if not members:
            return False
        return len(weak_pieces(members, self.neighbours())) == 1


def weak_pieces(members: set[str], adj: dict[str, set[str]]) -> list[list[str]]:
    """Weakly connected pieces of the subgraph induced by ``members``, each
    sorted, ordered by their smallest name (deterministic)."""
    seen: set[str] = set()
    pieces = []
    for start in sorted(members):
        if start in seen:
            continue
        seen.add(start)
        stack, piece = [start], [start]
        while stack:
            for nxt in adj.get(stack.pop(), ()):
                if nxt in members and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
                    piece.append(nxt)
        pieces.append(sorted(piece))
    return pieces


def infer_workflow(store: Store, catalogue: TableCatalogue, triple_pairs: Iterable[tuple[int, int]]) -> WorkflowGraph:
    """``G_wf`` from the ops' inputs/outputs and the triples' table-code pairs."""
    names = catalogue.names
    edges: set[tuple[str, str]] = set()
    for op in store.ops().select(["inputs", "outputs"]).to_pylist():
        for i in op["inputs"] or ():
            for o in op["outputs"] or ():
                a, b = catalogue.code_of_id.get(int(i)), catalogue.code_of_id.get(int(o))
                if a is not None and b is not None:
                    edges.add((names[a], names[b]))
    for a, b in triple_pairs:
        edges.add((names[a], names[b]))
    return WorkflowGraph(names, tuple(sorted(e for e in edges if e[0] != e[1])))
