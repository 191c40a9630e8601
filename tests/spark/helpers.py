"""The Spark tests' use of the triple oracle (:mod:`provplug.testing`) and
their shared inputs and steps.

A captured value id is labelled (table name, column name, row key), where the
row key is read from the stored rows (default: the row's first column; tables
listed in ``keys`` use those columns, ``"#row"`` means the stored row number,
which for a one-partition source is its position). Triples become
(src label, dst label, op name), so expectations never depend on the row
numbers Spark happens to assign.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import provplug
from provplug import schema
from provplug.store.open import open_store
from provplug.testing import Label as Label  # re-exported: the tests state expectations in its terms
from provplug.testing import StoreContents, Triple, keyed
from provplug.testing import expect as expect

F = pytest.importorskip("pyspark.sql.functions")


# -- the oracle ----------------------------------------------------------------------------
def stored_rows(store: Path) -> dict[int, list[dict[str, Any]]]:
    """The stored rows of every table, by table id, each with its row number (``schema.ROW_COLUMN``)."""
    stored = StoreContents(store)
    return {tid: [{schema.ROW_COLUMN: n, **r} for n, r in rows.items()] for tid, rows in stored.rows_by_id.items()}


def table_rows(store: Path, name: str) -> list[dict[str, Any]]:
    """The stored rows of table ``name`` (without the row-number column)."""
    stored = StoreContents(store)
    tid = next(t["table_id"] for t in stored.by_id.values() if t["name"] == name)  # the first run's, of several
    return list(stored.rows_by_id[tid].values())


def labelled_triples(store: Path, keys: Mapping[str, Sequence[str]] | None = None) -> set[Triple]:
    """The store's triples labelled by row keys (see :func:`provplug.testing.keyed`):
    the stored ones and those its location edges stand for (row-aligned steps)."""
    return StoreContents(store).labelled_triples(keyed(keys))


def capture(
    spark: Any,
    store: Path,
    sources: Mapping[str, tuple[list[tuple[Any, ...]], str]],
    body: Callable[[dict[str, Any]], Any],
    **kwargs: Any,
) -> Any:
    with provplug.capture(spark, store=store, **kwargs) as run:
        frames = {
            name: run.source(spark.createDataFrame(rows, ddl).coalesce(1), name)
            for name, (rows, ddl) in sources.items()
        }
        return body(frames)


def ops(store: Path) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in open_store(store).ops().to_pylist()}


# -- shared inputs and steps ---------------------------------------------------------------
T_ROWS = ([(1, 10, 100), (2, 20, 200)], "k int, a int, b int")
S_ROWS = ([("NY", 30, 1), ("NY", 40, 2), ("LA", 50, 3)], "city string, age int, w int")
L_ROWS = ([(1, "a"), (2, "b")], "k int, x string")
R_ROWS = ([(1, "p"), (3, "q")], "k int, y string")


def pandas_mean() -> Any:
    """A pandas aggregate UDF (its function local: pickled by value for the workers)."""

    def _mean(v):  # type: ignore[no-untyped-def]
        return float(v.mean())

    # Real (not string) hints: PySpark infers a grouped-aggregate pandas UDF from them.
    _mean.__annotations__ = {"v": pd.Series, "return": float}
    return F.pandas_udf(_mean, "double")


@provplug.step("Count", output="Counts")
def count_per_key(t: Any) -> Any:
    return t.groupBy("k").agg(F.count("v").alias("n"))


@provplug.step("Total", output="Totals")
def count_all(t: Any) -> Any:
    return t.agg(F.count("v").alias("n"))
