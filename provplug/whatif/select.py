"""Which rows a what-if deletes: ``TABLE`` with a ``--where`` predicate
over its stored rows (every row without one), or the rows of value ids."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from provplug import ids, schema, sortedints
from provplug.errors import LineageQueryError
from provplug.query.catalog import Catalog
from provplug.query.where import select_rows


@dataclasses.dataclass(frozen=True)
class Deletion:
    """The rows of ``table`` where ``where`` holds (all rows when None)."""

    table: str
    where: str | None = None


def deleted_rows(
    catalog: Catalog, deletions: Sequence[Deletion], value_ids: Iterable[int], run: str | None = None
) -> dict[int, np.ndarray]:
    """Table id -> the row numbers to delete (sorted, distinct)."""
    rows: dict[int, list[np.ndarray]] = {}
    for deletion in deletions:
        table_id, selected = _rows_where(catalog, deletion, run)
        rows.setdefault(table_id, []).append(selected)
    values = np.array(list(value_ids), dtype=np.int64)
    if len(values):
        for table_id, selected in _rows_of_values(catalog, values).items():
            rows.setdefault(table_id, []).append(selected)
    if not rows:
        raise LineageQueryError("nothing to delete: give --delete TABLE [--where P] or --value-id N")
    return {t: sortedints.unique(np.concatenate(parts)) for t, parts in rows.items()}


def _rows_where(catalog: Catalog, deletion: Deletion, run: str | None) -> tuple[int, np.ndarray]:
    entry = catalog.table_named(deletion.table, run)
    if not entry.stored_rows:
        raise LineageQueryError(f"table {entry.name!r} has no stored rows to select from: delete by --value-id")
    data = catalog.read_rows(entry)
    if deletion.where is None:
        selected = data.column(schema.ROW_COLUMN).to_pylist()
    else:
        selected = select_rows(data, deletion.where, schema.ROW_COLUMN)
    if not selected:
        raise LineageQueryError(
            f"no row of {entry.name} satisfies {deletion.where!r}"
            if deletion.where
            else f"table {entry.name} has no rows"
        )
    return entry.table_id, np.array(selected, dtype=np.int64)


def cell_rows(catalog: Catalog, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(table_id, column index, row)`` of each value id: captured ids carry
    them; imported ones have a row when the import's values file gave one
    (-1 where not)."""
    table, column, row = catalog.locate(values)
    imported = np.flatnonzero(values < ids.IMPORTED_ID_LIMIT)
    if len(imported):
        known, rows = _imported_rows(catalog, values[imported])
        pos = np.minimum(np.searchsorted(known, values[imported]), max(len(known) - 1, 0))
        hit = known[pos] == values[imported] if len(known) else np.zeros(len(imported), dtype=bool)
        row[imported[hit]] = rows[pos[hit]]
    return table, column, row


def _imported_rows(catalog: Catalog, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted imported value ids among ``wanted`` that have a row, and their rows."""
    from provplug.store import files as storefiles

    paths = catalog.store.run_paths(schema.VALUE_ROWS)
    if not paths:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    where = pc.field("value_id").isin(pa.array(sortedints.unique(wanted), pa.int64()))
    data = storefiles.scan(
        catalog.store.fs, paths, f"value rows of {catalog.store.uri}", schema=schema.VALUE_ROWS_SCHEMA, filter=where
    )
    known = data.column("value_id").to_numpy()
    order = np.argsort(known)
    return known[order], data.column("row").to_numpy()[order]


def _rows_of_values(catalog: Catalog, values: np.ndarray) -> dict[int, np.ndarray]:
    """The rows of value ids, each checked against its table's columns."""
    for v in values.tolist():
        if v < 0:
            raise LineageQueryError(f"value id {v} is not a non-negative integer")
    table, column, row = cell_rows(catalog, values)
    out: dict[int, np.ndarray] = {}
    for t in np.unique(table).tolist():
        entry = catalog.tables.get(t)
        at = table == t
        bad = values[at][column[at] >= len(entry.columns)] if entry else values[at]
        if len(bad):
            raise LineageQueryError(f"unknown value id {int(bad[0])}: it names no cell of this store")
        rowless = values[at][row[at] < 0]
        if len(rowless):
            raise LineageQueryError(
                f"value {int(rowless[0])} was imported without its row (the values file's "
                "'row' column): it cannot be deleted"
            )
        out[t] = sortedints.unique(row[at])  # that each row exists is checked where they are read (Engine.propagate)
    return out
