"""The Spark tests' triple oracle and shared inputs and steps.

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
from provplug import ids, schema
from provplug.plugins import open_store

F = pytest.importorskip("pyspark.sql.functions")

Label = tuple[str, str, Any]
Triple = tuple[Label, Label, str]


# -- the oracle ----------------------------------------------------------------------------
def stored_rows(store: Path) -> dict[int, list[dict[str, Any]]]:
    s = open_store(store)
    out: dict[int, list[dict[str, Any]]] = {}
    for t in s.tables().to_pylist():
        rows = s.read_rows(t["run_id"], t["table_id"])
        if rows is not None:
            out[t["table_id"]] = rows.to_pylist()
    return out


def table_rows(store: Path, name: str) -> list[dict[str, Any]]:
    """The stored rows of table ``name`` (without the row-number column)."""
    tid = next(t["table_id"] for t in open_store(store).tables().to_pylist() if t["name"] == name)
    return [{k: v for k, v in r.items() if k != schema.ROW_COLUMN} for r in stored_rows(store)[tid]]


def labelled_triples(store: Path, keys: Mapping[str, Sequence[str]] | None = None) -> set[Triple]:
    keys = keys or {}
    s = open_store(store)
    tables = {t["table_id"]: t for t in s.tables().to_pylist()}
    ops = {o["op_id"]: o["name"] for o in s.ops().to_pylist()}
    row_key: dict[tuple[int, int], Any] = {}
    for tid, rows in stored_rows(store).items():
        cols = keys.get(tables[tid]["name"], (tables[tid]["columns"][0],))
        for r in rows:
            key = tuple(r[schema.ROW_COLUMN] if c == "#row" else r[c] for c in cols)
            row_key[(tid, r[schema.ROW_COLUMN])] = key[0] if len(key) == 1 else key
    assert len(row_key) == sum(len(r) for r in stored_rows(store).values()), "row keys must be unique"

    def label(vid: int) -> Label:
        t, c, r = ids.unpack(vid)
        return (tables[t]["name"], tables[t]["columns"][c], row_key[(t, r)])

    triples = s.triples().to_table().to_pylist()
    labelled = {(label(t["src"]), label(t["dst"]), ops[t["op"]]) for t in triples}
    assert len(labelled) == len(triples), "no duplicate triples"
    for t in triples:  # the tables carried beside the ids agree with the ids
        assert (t["src_table"], t["dst_table"]) == (ids.unpack(t["src"])[0], ids.unpack(t["dst"])[0])
    return labelled


def expect(op: str, out: str, parents: Mapping[tuple[str, Any], Sequence[Label]]) -> set[Triple]:
    """{(out column, out row key): [input labels]} as triples of ``op``."""
    return {(src, (out, col, key), op) for (col, key), srcs in parents.items() for src in srcs}


def capture(spark: Any, store: Path, sources: Mapping[str, tuple[list[tuple[Any, ...]], str]],
            body: Callable[[dict[str, Any]], Any], **kwargs: Any) -> Any:
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
