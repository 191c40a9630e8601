"""What a coarse step's output columns may derive from (issue 25): the plan
walk of ``provplug_spark.coarse`` on plans whose answer is known by hand.
Every set is certain -- a superset of the true dependency that names every
input column that can influence the output column (the columns values come
from, and those that choose which rows there are)."""

from __future__ import annotations

from typing import Any

import pytest
from provplug_spark._jvm import Catalyst
from provplug_spark.coarse import coarse_edges, coarse_inputs
from provplug_spark.sources import TableLeaf, Tables

F = pytest.importorskip("pyspark.sql.functions")
A, B = 1, 2  # table ids
A_COLUMNS, B_COLUMNS = ("k", "s", "v"), ("k", "w")


@pytest.fixture(scope="module")
def stored(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Tables, Any, Any]:
    """Tables A (k, s, v) and B (k, w) stored as a run stores them, and their reads."""
    root = tmp_path_factory.mktemp("coarse-columns")
    tables = Tables()
    frames = []
    for table_id, columns, rows in ((A, A_COLUMNS, [(1, "x", 10)]), (B, B_COLUMNS, [(1, 100)])):
        path = str(root / str(table_id))
        spark.createDataFrame(rows, list(columns)).write.parquet(path)
        tables.register(TableLeaf(table_id, columns, path))
        frames.append(spark.read.parquet(path))
    return tables, frames[0], frames[1]


def _columns(spark: Any, tables: Tables, frame: Any) -> dict[str, set[str]]:
    found = coarse_inputs(Catalyst(spark), tables, Catalyst.plan(frame), {A: A_COLUMNS, B: B_COLUMNS})
    names = {A: ("A", A_COLUMNS), B: ("B", B_COLUMNS)}
    return {
        out: {f"{names[t][0]}.{names[t][1][c]}" for t, c in deps}
        for out, deps in zip(frame.columns, found.columns, strict=True)
    }


def test_values_come_from_their_columns_and_rows_are_chosen_by_join_keys_and_filters(
    spark: Any, stored: tuple[Tables, Any, Any]
) -> None:
    tables, a, b = stored
    frame = a.join(b, "k").filter(F.col("w") > 100).select("s", (F.col("v") + 1).alias("v1"))
    chooses = {"A.k", "B.k", "B.w"}  # the join keys and the filter
    assert _columns(spark, tables, frame) == {"s": {"A.s"} | chooses, "v1": {"A.v"} | chooses}


def test_an_aggregate_output_on_its_arguments_and_the_grouping_keys(
    spark: Any, stored: tuple[Tables, Any, Any]
) -> None:
    tables, a, _ = stored
    frame = a.groupBy("k").agg(F.sum("v").alias("t"))
    assert _columns(spark, tables, frame) == {"k": {"A.k"}, "t": {"A.k", "A.v"}}


def test_a_union_column_on_that_column_of_every_branch(spark: Any, stored: tuple[Tables, Any, Any]) -> None:
    tables, a, b = stored
    frame = a.select("k").union(b.select("k"))
    assert _columns(spark, tables, frame) == {"k": {"A.k", "B.k"}}


def test_a_node_the_walk_cannot_see_through_depends_on_everything_below_it(
    spark: Any, stored: tuple[Tables, Any, Any]
) -> None:
    tables, a, _ = stored

    def same(batches: Any) -> Any:  # local: pickled by value for the workers
        yield from batches

    frame = a.mapInPandas(same, "k long, s string, v long").select("v")
    assert _columns(spark, tables, frame) == {"v": {"A.k", "A.s", "A.v"}}


def test_a_read_that_hides_its_tables_depends_on_every_stored_column(
    spark: Any, stored: tuple[Tables, Any, Any]
) -> None:
    tables, a, _ = stored
    frame = spark.createDataFrame(a.rdd.map(lambda r: (r.k,)), "k long")
    found = coarse_inputs(Catalyst(spark), tables, Catalyst.plan(frame), {A: A_COLUMNS, B: B_COLUMNS})
    assert found.hidden_inputs
    assert found.columns == (frozenset({(A, 0), (A, 1), (A, 2), (B, 0), (B, 1)}),)


def test_one_compact_edge_per_input_table() -> None:
    from provplug_spark.coarse import CoarseInputs

    inputs = CoarseInputs((frozenset({(A, 1), (A, 0), (B, 1)}), frozenset({(A, 2)})), False)
    edges = coarse_edges(7, 3, inputs, "why")
    assert [(e.src_table, e.columns) for e in edges] == [(A, ((0, (0, 1)), (1, (2,)))), (B, ((0, (1,)),))]
    assert {(e.op, e.dst_table, e.reason) for e in edges} == {(7, 3, "why")}
