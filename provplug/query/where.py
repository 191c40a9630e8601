"""``--where``: a SQL predicate on a table's stored rows, evaluated by DuckDB.

DuckDB runs the predicate in-process over the Arrow rows (full SQL: functions,
CASE, LIKE, ...; no JVM). The connection gets no file or network access, so
a predicate can only read the rows it is given.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from ..errors import LineageQueryError

_UNKNOWN_COLUMN = re.compile(r'Referenced column "([^"]+)" not found')


def select_rows(rows: pa.Table, text: str, row_column: str) -> list[int]:
    """Row numbers (``row_column``) of the rows where ``text`` holds."""
    import duckdb  # only --where queries pay for it

    con = duckdb.connect(config={"enable_external_access": False})
    try:
        con.register("provplug_rows", rows)
        result = con.execute(f'SELECT "{row_column}" FROM provplug_rows WHERE {text}').fetchall()  # noqa: S608
    except duckdb.Error as exc:
        raise LineageQueryError(_explain(exc, text, rows, row_column)) from exc
    finally:
        con.close()
    return sorted(int(r[0]) for r in result)


def _explain(exc: Any, text: str, rows: pa.Table, row_column: str) -> str:
    message = " ".join(str(exc).split("\n")[0].split())
    unknown = _UNKNOWN_COLUMN.search(message)
    if unknown:
        columns = ", ".join(c for c in rows.column_names if c != row_column)
        return f"--where names unknown column {unknown.group(1)!r} (columns: {columns})"
    return f"bad --where predicate {text!r}: {message}"
