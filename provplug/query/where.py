"""``--where``: one SQL boolean expression over a table's stored rows, evaluated by DuckDB.

DuckDB runs the predicate in-process over the Arrow rows (functions, CASE,
LIKE, ...; no JVM). Two guards make it a predicate and nothing more:

* The query is checked before it runs: DuckDB's own parser serialises
  ``SELECT row FROM rows WHERE <text>`` to its syntax tree, which must be
  exactly that statement with ``<text>`` as the WHERE clause: one statement,
  no set operation, ORDER BY, LIMIT, GROUP BY, CTE, or subquery anywhere. The
  very string that was checked is the one executed. The expression must also
  be of type BOOLEAN (DuckDB would otherwise cast, e.g. a number, silently).
* The connection gets no file or network access and no extensions, so a
  predicate can only read the rows it is given.

Bounds. A predicate runs on a locked DuckDB connection under these limits; a
predicate that meets one fails with a one-line ``WhereLimitError`` naming it:

* time: ``PROVPLUG_WHERE_TIMEOUT`` seconds (default 30). A timer interrupts
  the query (``connection.interrupt()``). DuckDB sees the interrupt between
  vectors of rows, not inside one function call;
* memory: ``PROVPLUG_WHERE_MEMORY`` (a DuckDB size such as ``512MB``, the
  default), DuckDB's ``memory_limit``, with no spilling to disk
  (``max_temp_directory_size`` 0);
* threads: ``PROVPLUG_WHERE_THREADS`` (default 1);
* functions: those that sleep (``sleep_ms``, ``pg_sleep``) or build a value
  whose size is one of their arguments (``range``, ``repeat``, ``lpad``,
  ``printf`` ...) are refused before the query runs. DuckDB neither counts
  such values against ``memory_limit`` nor sees an interrupt while one is
  being built (``length(repeat('x', 1000000000))`` ran 64 s and took
  gigabytes whatever the limits), so naming them is the only bound on them.

``select_rows(..., limits=WhereLimits(...))`` sets the limits for one call;
``WhereLimits.from_environment()`` reads the variables above.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from provplug.errors import LineageQueryError
from provplug.errors import WhereLimitError as WhereLimitError
from provplug.errors import WherePredicateError as WherePredicateError

_UNKNOWN_COLUMN = re.compile(r'Referenced column "([^"]+)" not found')
_ROWS = "provplug_rows"


TIMEOUT_VARIABLE = "PROVPLUG_WHERE_TIMEOUT"
MEMORY_VARIABLE = "PROVPLUG_WHERE_MEMORY"
THREADS_VARIABLE = "PROVPLUG_WHERE_THREADS"

# Function (or macro) name -> why a predicate may not call it.
_REFUSED_FUNCTIONS = {
    "sleep_ms": "it sleeps",
    "pg_sleep": "it sleeps",
    **dict.fromkeys(
        (
            "range",
            "generate_series",
            "repeat",
            "lpad",
            "rpad",
            "list_resize",
            "array_resize",
            "printf",
            "format",
            "bar",
        ),
        "it builds a value of any size its arguments ask for",
    ),
}
# How often the timer repeats its interrupt: DuckDB drops one that comes
# before the query has started.
_INTERRUPT_EVERY_S = 0.01


@dataclass(frozen=True)
class WhereLimits:
    """Bounds on one predicate's evaluation (see the module docstring)."""

    timeout_s: float = 30.0
    memory: str = "512MB"
    threads: int = 1

    @classmethod
    def from_environment(cls) -> WhereLimits:
        defaults = cls()
        return cls(
            timeout_s=_positive(TIMEOUT_VARIABLE, float, defaults.timeout_s),
            memory=os.environ.get(MEMORY_VARIABLE, defaults.memory),
            threads=int(_positive(THREADS_VARIABLE, int, defaults.threads)),
        )


def _positive(variable: str, kind: type[float] | type[int], default: float) -> float:
    text = os.environ.get(variable)
    if text is None:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise WhereLimitError(f"{variable} must be a positive {kind.__name__}, not {text!r}")
    return value


def select_rows(rows: pa.Table, text: str, row_column: str, limits: WhereLimits | None = None) -> list[int]:
    """Row numbers (``row_column``) of the rows where ``text`` holds, under
    ``limits`` (default: ``WhereLimits.from_environment()``)."""
    import duckdb  # only --where queries pay for it

    limits = limits or WhereLimits.from_environment()
    con = _connect(limits)
    try:
        con.register(_ROWS, rows)
        sql = _checked_query(con, text, row_column)
        with _interrupted_after(con, limits.timeout_s) as timed_out:
            try:
                result = con.execute(sql).fetchall()
            except duckdb.InterruptException as exc:
                if timed_out.is_set():
                    raise WhereLimitError(
                        f"--where predicate {text!r} ran past its time limit of {limits.timeout_s:g} s ({TIMEOUT_VARIABLE})"
                    ) from exc
                raise
    except duckdb.OutOfMemoryException as exc:
        raise WhereLimitError(
            f"--where predicate {text!r} needs more than its memory limit of {limits.memory} ({MEMORY_VARIABLE})"
        ) from exc
    except duckdb.Error as exc:
        raise LineageQueryError(_explain(exc, text, rows, row_column)) from exc
    finally:
        con.close()
    return sorted(int(r[0]) for r in result)


def _connect(limits: WhereLimits) -> Any:
    """A connection with no file, network or extension access whose limits
    a predicate cannot change (``lock_configuration``)."""
    import duckdb

    config: dict[str, str | bool | int | float | list[str]] = {
        "enable_external_access": False,
        "autoload_known_extensions": False,
        "autoinstall_known_extensions": False,
        "allow_community_extensions": False,
        "memory_limit": limits.memory,
        "max_temp_directory_size": "0B",
        "threads": limits.threads,
        "lock_configuration": True,
    }
    try:
        return duckdb.connect(config=config)
    except duckdb.Error as exc:
        first_line = str(exc).split("\n")[0]
        raise WhereLimitError(
            f"bad --where limits (memory {limits.memory!r}, threads {limits.threads}; {MEMORY_VARIABLE}, "
            f"{THREADS_VARIABLE}): {first_line}"
        ) from exc


@contextmanager
def _interrupted_after(con: Any, timeout_s: float) -> Iterator[threading.Event]:
    """Interrupt ``con``'s query once ``timeout_s`` has passed (and keep
    interrupting until it stops); the event yielded tells whether it did."""
    finished, timed_out = threading.Event(), threading.Event()

    def watch() -> None:
        if finished.wait(timeout_s):
            return
        timed_out.set()
        while not finished.wait(_INTERRUPT_EVERY_S):
            con.interrupt()

    watcher = threading.Thread(target=watch, name="provplug-where-timeout", daemon=True)
    watcher.start()
    try:
        yield timed_out
    finally:
        finished.set()
        watcher.join()


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
        raise WherePredicateError(
            f"--where must be one boolean expression; {text!r} holds {len(statements)} statements"
        )
    node = statements[0]["node"]
    # The same prefix gives the same parse positions: only the WHERE clause may differ.
    template = _parse(con, _query(row_column, "TRUE"))["statements"][0]
    expected = {**template["node"], "where_clause": node.get("where_clause")}
    if node != expected or statements[0].get("named_param_map") != template["named_param_map"]:
        raise WherePredicateError(
            f"--where must be one boolean expression; {text!r} adds to the query (a set operation, ORDER BY, LIMIT, ...)"
        )
    if _holds_subquery(node["where_clause"]):
        raise WherePredicateError(
            f"--where must be one boolean expression over the table's columns; {text!r} holds a subquery"
        )
    for name in sorted(_called_functions(node["where_clause"])):
        if name in _REFUSED_FUNCTIONS:
            raise WhereLimitError(f"--where may not call {name}(): {_REFUSED_FUNCTIONS[name]} (predicate {text!r})")
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


def _called_functions(tree: Any) -> set[str]:
    """Lower-case names of the functions and macros called anywhere in ``tree``."""
    if isinstance(tree, list):
        return set().union(*(_called_functions(v) for v in tree))
    if not isinstance(tree, dict):
        return set()
    own = {str(tree["function_name"]).lower()} if tree.get("class") == "FUNCTION" else set()
    return own.union(*(_called_functions(v) for v in tree.values()))


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
