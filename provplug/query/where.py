"""``--where``: one SQL boolean expression over a table's stored rows, evaluated by DuckDB.

DuckDB runs the predicate in-process over the Arrow rows (functions, CASE,
LIKE, ...; no JVM). Two guards make it a predicate and nothing more:

* The query is checked before it runs: DuckDB's own parser serialises
  ``SELECT row FROM rows WHERE <text>`` to its syntax tree, which must be
  exactly that statement with ``<text>`` as the WHERE clause: one statement,
  no set operation, ORDER BY, LIMIT, GROUP BY, CTE, or subquery anywhere. The
  very string that was checked is the one executed. The expression must also
  be of type BOOLEAN (DuckDB would otherwise cast, e.g. a number, silently).
* The connection gets no file or network access, so a predicate can only
  read the rows it is given.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

from ..errors import LineageQueryError

_UNKNOWN_COLUMN = re.compile(r'Referenced column "([^"]+)" not found')
_ROWS = "provplug_rows"


class WherePredicateError(LineageQueryError):
    """``--where`` is not one boolean expression over the table's columns."""


def select_rows(rows: pa.Table, text: str, row_column: str) -> list[int]:
    """Row numbers (``row_column``) of the rows where ``text`` holds."""
    import duckdb  # only --where queries pay for it

    con = duckdb.connect(config={"enable_external_access": False})
    try:
        con.register(_ROWS, rows)
        sql = _checked_query(con, text, row_column)
        result = con.execute(sql).fetchall()
    except duckdb.Error as exc:
        raise LineageQueryError(_explain(exc, text, rows, row_column)) from exc
    finally:
        con.close()
    return sorted(int(r[0]) for r in result)


def _query(row_column: str, predicate: str) -> str:
    return f'SELECT "{row_column}" FROM {_ROWS} WHERE {predicate}'


def _parse(con: Any, sql: str) -> dict[str, Any]:
    tree: dict[str, Any] = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    return tree


def _checked_query(con: Any, text: str, row_column: str) -> str:
    """``SELECT row FROM rows WHERE text`` once its syntax tree shows that
    ``text`` is one boolean expression and nothing else."""
    sql = _query(row_column, text)
    tree = _parse(con, sql)
    if tree.get("error"):
        message = tree.get("error_message", "unparsable")
        if "Only SELECT statements" in message:  # e.g. "1=1; DROP ..."
            raise WherePredicateError(f"--where must be one boolean expression; {text!r} holds other statements")
        raise WherePredicateError(f"bad --where predicate {text!r}: {message}")
    statements = tree["statements"]
    if len(statements) != 1:
        raise WherePredicateError(f"--where must be one boolean expression; {text!r} holds {len(statements)} statements")
    node = statements[0]["node"]
    # The same prefix gives the same parse positions: only the WHERE clause may differ.
    template = _parse(con, _query(row_column, "TRUE"))["statements"][0]
    expected = {**template["node"], "where_clause": node.get("where_clause")}
    if node != expected or statements[0].get("named_param_map") != template["named_param_map"]:
        raise WherePredicateError(
            f"--where must be one boolean expression; {text!r} adds to the query (a set operation, ORDER BY, LIMIT, ...)"
        )
    if _holds_subquery(node["where_clause"]):
        raise WherePredicateError(f"--where must be one boolean expression over the table's columns; {text!r} holds a subquery")
    kind = _result_type(con, node)
    if kind != "BOOLEAN":
        raise WherePredicateError(f"--where must be a boolean expression; {text!r} is of type {kind}")
    return sql


def _holds_subquery(tree: Any) -> bool:
    if isinstance(tree, dict):
        return tree.get("class") == "SUBQUERY" or any(_holds_subquery(v) for v in tree.values())
    if isinstance(tree, list):
        return any(_holds_subquery(v) for v in tree)
    return False


def _result_type(con: Any, node: dict[str, Any]) -> str:
    """Type of the checked WHERE expression: ``SELECT <expr> FROM rows`` is
    rebuilt from the checked tree (not from the text) and bound, not run."""
    probe = {**node, "select_list": [node["where_clause"]], "where_clause": None}
    statement = json.dumps({"error": False, "statements": [{"node": probe, "named_param_map": []}]})
    sql = con.execute("SELECT json_deserialize_sql(?::JSON)", [statement]).fetchone()[0]
    return str(con.sql(sql).types[0])


def _explain(exc: Any, text: str, rows: pa.Table, row_column: str) -> str:
    message = " ".join(str(exc).split("\n")[0].split())
    unknown = _UNKNOWN_COLUMN.search(message)
    if unknown:
        columns = ", ".join(c for c in rows.column_names if c != row_column)
        return f"--where names unknown column {unknown.group(1)!r} (columns: {columns})"
    return f"bad --where predicate {text!r}: {message}"
