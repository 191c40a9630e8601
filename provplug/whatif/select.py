"""Which rows a what-if deletes: ``TABLE`` with a ``--where`` predicate
over its stored rows (every row without one), or the rows of value ids."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import ids, schema
from ..errors import LineageQueryError
from ..query.catalog import Catalog
from ..query.where import select_rows


@dataclasses.dataclass(frozen=True)
class Deletion:
    """The rows of ``table`` where ``where`` holds (all rows when None)."""

    table: str
    where: str | None = None


def deleted_rows(catalog: Catalog, deletions: Sequence[Deletion], value_ids: Iterable[int],
                 run: str | None = None) -> dict[int, np.ndarray]:
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
    return {t: np.unique(np.concatenate(parts)) for t, parts in rows.items()}


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
        raise LineageQueryError(f"no row of {entry.name} satisfies {deletion.where!r}" if deletion.where
                                else f"table {entry.name} has no rows")
    return entry.table_id, np.array(selected, dtype=np.int64)


def _rows_of_values(catalog: Catalog, values: np.ndarray) -> dict[int, np.ndarray]:
    """The rows of captured value ids, each checked against its table (row
    numbers need not be dense: Spark numbers rows per partition)."""
    for v in values.tolist():
        if v < 0:
            raise LineageQueryError(f"value id {v} is not a non-negative integer")
    imported = values[values < ids.IMPORTED_ID_LIMIT]
    if len(imported):
        raise LineageQueryError(f"value {int(imported[0])} is not a captured cell: delete rows by table and --where")
    table, column, row = catalog.locate(values)
    out: dict[int, np.ndarray] = {}
    for t in np.unique(table).tolist():
        entry = catalog.tables.get(t)
        at = table == t
        bad = values[at][column[at] >= len(entry.columns)] if entry else values[at]
        if len(bad):
            raise LineageQueryError(f"unknown value id {int(bad[0])}: it names no cell of this store")
        out[t] = np.unique(row[at])
        if entry is not None and entry.stored_rows:
            found = catalog.read_rows(entry, pc.field(schema.ROW_COLUMN).isin(pa.array(out[t], pa.int64())))
            missing = np.setdiff1d(out[t], found.column(schema.ROW_COLUMN).to_numpy())
            if len(missing):
                raise LineageQueryError(f"unknown value id {ids.value_id(t, 0, int(missing[0]))}: "
                                        f"{entry.name} has no row {int(missing[0])}")
    return out
