"""SQL writes run through ``spark.sql``: captured like a DataFrame write.

While writes are intercepted, ``SparkSession.sql`` parses each statement with
the session's own parser. A statement whose top is a write of a query's rows
(``INSERT INTO`` / ``INSERT OVERWRITE`` a table, ``CREATE TABLE ... AS
SELECT``, ``CREATE OR REPLACE TABLE ... AS SELECT``, ``REPLACE TABLE ... AS
SELECT``, ``INSERT OVERWRITE DIRECTORY``) is captured as the step
``write:<table>`` over its query (analyzed alone), and then run over the
step's stored rows: the parsed command with its query replaced by a read of
the stored rows (one execution, as for a DataFrame write). Any other
statement runs unchanged. A write inside another statement (a CTE over an
``INSERT``, a multi-table ``FROM ... INSERT ... INSERT``) or one with
parameter markers (``args=``) runs unchanged and is recorded as an
uncaptured write. ``{name}`` references (``spark.sql(text, df=frame)``) are
formatted as PySpark formats them, into temporary views that last for the
call. A statement without the word INSERT, CREATE or REPLACE writes no query's
rows: it runs without that parse (a query's parse and walk cost about 15 ms).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession

from ._jvm import (
    parsed_statement,
    positional_insert_columns,
    query_frame,
    skipped_sql_write,
    sql_write_over,
    sql_write_query,
    sql_write_target,
    sql_writes,
)
from .replay import Written

# Every write of a query's rows names one of these keywords.
_WRITE_KEYWORDS = re.compile(r"\b(insert|create|replace)\b", re.IGNORECASE)


class WriteTracer(Protocol):
    """What SQL writes need of :class:`.scripts.WriteTracer` (named here, not
    imported: the tracer's module installs this one's patch)."""

    def on_write(
        self,
        df: DataFrame,
        written: Written,
        write: Callable[[], Any],
        replay: Callable[[DataFrame], Any] | None,
    ) -> Any: ...

    def on_uncaptured(self, spark: SparkSession, dataset: str, reason: str) -> None: ...


def sql_statements(original: Callable[..., Any], tracer: WriteTracer) -> Any:
    """``SparkSession.sql`` with its write statements captured by ``tracer``."""

    @functools.wraps(original)
    def sql(self: SparkSession, sqlQuery: str, args: Any = None, **kwargs: Any) -> DataFrame:
        if kwargs:
            from pyspark.sql.sql_formatter import SQLStringFormatter

            formatter = SQLStringFormatter(self)
            try:  # the views the references become exist while the statement runs
                return sql(self, formatter.format(sqlQuery, **kwargs), args)
            finally:
                formatter.clear()
        plain: Callable[[], DataFrame] = lambda: original(self, sqlQuery, args)  # noqa: E731
        plan = parsed_statement(self, sqlQuery) if _WRITE_KEYWORDS.search(sqlQuery) else None
        writes = sql_writes(plan) if plan is not None else []
        if not writes:
            return plain()
        command = writes[0]
        if command is not plan or args is not None:
            why = "a write inside another SQL statement" if command is not plan else "SQL with parameter markers"
            for write in writes:
                tracer.on_uncaptured(self, sql_write_target(write)[0], f"{why} is not captured")
            return plain()
        if skipped_sql_write(self, command):
            return plain()
        target, is_table = sql_write_target(command)
        try:
            query = query_frame(self, sql_write_query(command))
        except Exception as exc:  # the statement as Spark runs it raises its own error, if any
            done = plain()
            tracer.on_uncaptured(self, target, f"its query could not be analyzed alone: {exc}".splitlines()[0])
            return done
        columns = positional_insert_columns(self, command)
        if columns is not None and len(columns) == len(query.columns):
            query = query.toDF(*columns)  # the written table's cells are named as the table names them
        result: DataFrame = tracer.on_write(
            query, Written(target, is_table, target), plain, lambda rows: sql_write_over(self, command, rows)
        )
        return result

    return sql
