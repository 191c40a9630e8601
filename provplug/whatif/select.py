"""Which rows a what-if deletes: ``TABLE`` with a ``--where`` predicate
over its stored rows (every row without one), or the rows of value ids."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

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
    for v in values.tolist():
        if v < 0:
            raise LineageQueryError(f"value id {v} is not a non-negative integer")
    catalog.check_known(values.tolist())
    imported = values[~(values >= ids.IMPORTED_ID_LIMIT)]
    if len(imported):
        raise LineageQueryError(f"value {int(imported[0])} was imported without its row: delete rows by table")
    table, _, row = catalog.locate(values)
    return {int(t): row[table == t] for t in np.unique(table).tolist()}
