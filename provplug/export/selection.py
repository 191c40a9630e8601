"""What an export holds: values, the triples among them, their tables and ops.

Either the lineage answer of a target (``T.C --where P`` or value ids; its
values, its edges, the ops on those edges), or a whole run — or the whole
store — at table and op level, with every value and triple when the run is
small enough (:data:`MAX_WHOLE_VALUES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provplug import sortedints
from provplug.errors import ExportError as ExportError
from provplug.export.scope import (
    Table,
    coarse_edges_of,
    ops_of,
    resolve_run,
    stored_rows,
    tables_of,
    value_count,
)
from provplug.model import CoarseEdge

if TYPE_CHECKING:
    from provplug.plugin.protocols import Store

# A whole-run PROV export lists every value as an entity: beyond this many
# values the document is too large to be useful, and a target is asked for.
MAX_WHOLE_VALUES = 100_000


@dataclass(frozen=True)
class Target:
    """The values whose lineage to export: ``table.column`` where ``where``, or value ids."""

    table: str | None = None
    column: str | None = None
    where: str | None = None
    value_ids: tuple[int, ...] = ()
    direction: str = "up"


@dataclass
class Selection:
    """Values (records as lineage answers give them, plus ``table_id`` and
    ``row_number``), edges ``(src, dst, op_id)``, and the tables and op
    records they belong to. ``values`` is empty for a table-level export;
    ``targeted`` is true for a lineage answer (a target's), false for a whole
    run or store."""

    store_uri: str
    runs: list[str]
    tables: list[Table]
    ops: list[dict[str, Any]]
    values: list[dict[str, Any]] = field(default_factory=list)
    edges: list[tuple[int, int, int]] = field(default_factory=list)
    query: list[int] = field(default_factory=list)
    targeted: bool = False
    coarse: list[CoarseEdge] = field(default_factory=list)  # of the coarse ops among ``ops``


def select(store: Store, run: str | None, target: Target | None, with_values: bool) -> Selection:
    """The selection of an export: a target's lineage, else the run (or store)."""
    if target is not None:
        return _target_selection(store, run, target)
    return _whole_selection(store, {resolve_run(store, run)} if run is not None else None, with_values)


# -- a target's lineage ------------------------------------------------------------


def _target_selection(store: Store, run: str | None, target: Target) -> Selection:
    from provplug.query.catalog import catalog_for
    from provplug.query.lineage import LineageQueries

    queried = LineageQueries(store)
    if target.table is not None:
        answer = queried.lineage(
            table=target.table, column=target.column, where=target.where, direction=target.direction, run=run
        )
    else:
        answer = queried.lineage(list(target.value_ids), direction=target.direction, run=run)
    catalog = catalog_for(store)
    values = _with_locations(catalog, [*answer.query, *answer.lineage])
    tables = {t.table_id: t for t in tables_of(store)}
    used_tables = sorted({v["table_id"] for v in values if v["table_id"] in tables})
    ops = ops_of(store)
    table_of = {v["value_id"]: v["table_id"] for v in values}
    edges = [(e["src"], e["dst"], _op_id(ops, e["op"], table_of.get(e["dst"], -1))) for e in answer.edges]
    op_ids = {op for _, _, op in edges} | {c["op_id"] for c in answer.coarse}  # the coarse steps it crosses
    chosen = [o for o in ops if o["op_id"] in op_ids]
    crossed = {t["table_id"] for c in answer.coarse for side in ("from", "continues_from") for t in c[side]}
    used_tables = sorted(set(used_tables) | (crossed & set(tables)))
    return Selection(
        store.uri,
        sorted({tables[t].run_id for t in used_tables}),
        [tables[t] for t in used_tables],
        chosen,
        values,
        edges,
        [r["value_id"] for r in answer.query],
        targeted=True,
        coarse=coarse_edges_of(store, chosen),
    )


def _op_id(ops: list[dict[str, Any]], name: str, dst_table: int) -> int:
    """The op called ``name`` that wrote ``dst_table`` (answers name ops, exports need their records)."""
    named = [o for o in ops if o["name"] == name]
    for op in named:
        if dst_table in op["outputs"]:
            return int(op["op_id"])
    if named:
        return int(named[-1]["op_id"])
    raise ExportError(f"the lineage answer names op {name!r}, which the store does not record")


# -- a whole run or store ------------------------------------------------------------


def _whole_selection(store: Store, run_ids: set[str] | None, with_values: bool) -> Selection:
    from provplug.query.catalog import catalog_for

    tables = tables_of(store, run_ids)
    ops = ops_of(store, run_ids)
    runs = sorted({t.run_id for t in tables} | {o["run_id"] for o in ops})
    selection = Selection(store.uri, runs, tables, ops, coarse=coarse_edges_of(store, ops))
    if not with_values:
        return selection
    count = value_count(store, run_ids)
    if count > MAX_WHOLE_VALUES:
        scope = "the run" if run_ids else "the store"
        raise ExportError(
            f"{scope} has {count:,} values, more than the {MAX_WHOLE_VALUES:,} a whole PROV export lists: "
            "export a target's lineage instead (TABLE.COLUMN --where PREDICATE, or --value-id N)"
        )
    value_ids = _all_value_ids(store, tables)
    selection.values = _with_locations(catalog_for(store), catalog_for(store).records(value_ids))
    selection.edges = _triples_of(store, [int(o["op_id"]) for o in ops])
    return selection


def _all_value_ids(store: Store, tables: Sequence[Table]) -> Any:
    """Every cell id of ``tables``: captured cells by their packed ids, imported ones from the value mapping."""
    import numpy as np
    import pyarrow.compute as pc

    from provplug import ids, schema

    parts = [np.empty(0, np.int64)]
    imported = [t.table_id for t in tables if t.origin == "imported"]
    for table in tables:
        if table.origin == "imported":
            continue
        if table.stored_rows:
            rows = stored_rows(store, table).column(schema.ROW_COLUMN).to_numpy()
        else:
            rows = np.arange(table.rows or 0, dtype=np.int64)
        for col in range(len(table.columns)):
            parts.append(ids.value_id(table.table_id, col, 0) + rows.astype(np.int64))
    if imported:
        mapping = store.values().filter(pc.field("table_id").isin(imported))
        parts.append(mapping.column("value_id").to_numpy())
    return sortedints.unique(np.concatenate(parts))


def _triples_of(store: Store, op_ids: list[int]) -> list[tuple[int, int, int]]:
    """The triples of ``op_ids`` (a pushed-down scan; the whole-run export is bounded in size)."""
    from provplug.store.triples import TripleFilter, triple_table

    if not op_ids:
        return []
    # The stored triples and the location edges' (provplug.store.triples), of these ops only.
    data = triple_table(store, ["src", "dst", "op"], TripleFilter.of(ops=op_ids))
    return list(
        zip(data.column("src").to_pylist(), data.column("dst").to_pylist(), data.column("op").to_pylist(), strict=True)
    )


def _with_locations(catalog: Any, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with the table id and row number of each value (one per id)."""
    import numpy as np

    unique = list({r["value_id"]: r for r in records}.values())
    table, _, row = catalog.locate(np.array([r["value_id"] for r in unique], dtype=np.int64))
    return [
        {**r, "table_id": int(t), "row_number": int(n) if n >= 0 else None}
        for r, t, n in zip(unique, table.tolist(), row.tolist(), strict=True)
    ]
