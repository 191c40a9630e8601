"""Stored cell values of the rows a what-if involves, and aggregates
recomputed over the members left, with Spark's semantics.

Only the rows a question needs are read (``store.read_rows`` filtered on the
row number). Aggregates follow Spark: nulls are skipped; ``sum``, ``avg``,
``min`` and ``max`` over no non-null value are null; ``count`` and
``count_distinct`` count non-null values (distinct ones), ``count_star``
members; ``avg`` is a double, or for a decimal input a decimal rounded half
up to the output column's scale; results take the output column's type.
Floating-point sums are recomputed exactly as Arrow adds them, which may
differ from Spark's partition-ordered sum in the last bits.
"""

from __future__ import annotations

import decimal
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from provplug import schema
from provplug.query.catalog import jsonable
from provplug.store.catalogue import TableEntry
from provplug.whatif.members import distinct, member_of

# Wanting more than 1/8 of a table's rows, read it whole (a filtered read of
# a source stored as Parquet copies reads every file anyway).
WHOLE_TABLE_FRACTION = 8


class Unknown:
    """The value of a cell that changes in a way that cannot be recomputed."""

    _instance: Unknown | None = None

    def __new__(cls) -> Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "?"


UNKNOWN = Unknown()


class StoredRows:
    """Stored rows of the store's tables, read for chosen row numbers only."""

    def __init__(self, store: Any, tables: dict[int, TableEntry]) -> None:
        self.store = store
        self.tables = tables
        self.rows_read = 0
        self._types: dict[int, pa.Schema] = {}
        self._whole: dict[int, pa.Table] = {}  # tables read whole during this what-if

    def read(self, table_id: int, rows: np.ndarray, columns: list[str] | None = None) -> pa.Table | None:
        """The stored rows ``rows`` of ``table_id`` (with the row-number
        column; ``columns`` only, when given), or None when the run stored
        none. Many rows of a table: the whole table is read once (kept for
        this what-if) and the rows picked by binary search; few: a filtered read."""
        entry = self.tables.get(table_id)
        if entry is None or not entry.stored_rows or not len(rows):
            return None
        wanted = distinct(rows)
        whole = self._whole.get(table_id)
        if whole is None and entry.rows and len(wanted) * WHOLE_TABLE_FRACTION > entry.rows:
            whole = self._whole[table_id] = self.store.read_rows(entry.run_id, entry.table_id)
            if whole is not None:
                self.rows_read += whole.num_rows
        if whole is not None:
            numbers = whole.column(schema.ROW_COLUMN).to_numpy()
            data = whole.filter(pa.array(member_of(numbers, wanted)))
        else:
            where = pc.field(schema.ROW_COLUMN).isin(pa.array(wanted, pa.int64()))
            data = self.store.read_rows(entry.run_id, entry.table_id, where=where)
            if data is None:
                return None
            self.rows_read += data.num_rows
        self._types.setdefault(table_id, data.schema)
        if columns is not None:
            data = data.select([c for c in columns if c in data.column_names] + [schema.ROW_COLUMN])
        return data

    def as_dicts(self, table_id: int, rows: np.ndarray) -> dict[int, dict[str, Any]]:
        """Row number -> the stored row (plain Python values)."""
        data = self.read(table_id, rows)
        if data is None:
            return {}
        numbers = data.column(schema.ROW_COLUMN).to_pylist()
        cells = data.drop_columns([schema.ROW_COLUMN]).to_pylist()
        return dict(zip((int(n) for n in numbers), cells, strict=True))

    def column_type(self, table_id: int, column: str) -> pa.DataType | None:
        types = self._types.get(table_id)
        if types is None or column not in types.names:
            return None
        return types.field(column).type


def same(a: Any, b: Any) -> bool:
    """Value equality with null = null and NaN = NaN (as a re-run compares)."""
    if a is UNKNOWN or b is UNKNOWN:
        return False
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(type(a) is type(b) or not (a is None or b is None)) and a == b


def shown(value: Any) -> Any:
    """A cell value as JSON carries it; "changed, value unknown" is null."""
    return None if value is UNKNOWN else jsonable(value)


def aggregate(function: str, values: pa.Table, out_type: pa.DataType | None) -> dict[int, Any]:
    """``function`` over ``values`` (columns ``out_row``, ``value``) per
    ``out_row``, in the output column's type."""
    if not values.num_rows:
        return {}
    arrow = {"count": "count", "count_distinct": "count_distinct", "sum": "sum", "min": "min", "max": "max"}
    is_decimal = pa.types.is_decimal(values.column("value").type)
    if function == "avg" and is_decimal:
        grouped = values.group_by("out_row").aggregate([("value", "sum"), ("value", "count")])
        sums = grouped.column("value_sum").to_pylist()
        counts = grouped.column("value_count").to_pylist()
        with decimal.localcontext() as ctx:
            ctx.prec = 76  # exact enough that rounding to the output scale is the only rounding
            results = [
                None if not n else decimal.Decimal(s) / decimal.Decimal(n) for s, n in zip(sums, counts, strict=True)
            ]
    else:
        name = "mean" if function == "avg" else arrow[function]
        grouped = values.group_by("out_row").aggregate([("value", name)])
        results = grouped.column(f"value_{name}").to_pylist()
    rows = grouped.column("out_row").to_pylist()
    return {int(r): typed(v, out_type) for r, v in zip(rows, results, strict=True)}


def typed(value: Any, out_type: pa.DataType | None) -> Any:
    """``value`` as Spark would return it in a column of ``out_type``."""
    if value is None or out_type is None:
        return value
    if pa.types.is_decimal(out_type):
        with decimal.localcontext() as ctx:
            ctx.prec = 76
            return decimal.Decimal(value).quantize(
                decimal.Decimal(1).scaleb(-out_type.scale), rounding=decimal.ROUND_HALF_UP
            )
    if pa.types.is_floating(out_type):
        return float(value)
    if pa.types.is_integer(out_type):
        return int(value)
    return value
