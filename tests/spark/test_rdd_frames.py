"""DataFrames built from RDDs (issue 25): rows parsed or built in the driver
(``spark.read.json`` of parallelized strings, ``createDataFrame`` of a
parallelized list, ``parallelize(...).map(...).toDF()``) are a source of their
own under script capture; rows that Python RDD functions computed from a
DataFrame's rows (``df.rdd.map(...).toDF()``) are refused with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.errors import CaptureError
from provplug.testing import assert_lineage_matches_oracle

from .helpers import T_ROWS, capture, expect, labelled_triples, ops, table_rows

F = pytest.importorskip("pyspark.sql.functions")

PEOPLE_JSON = ['{"k": 1, "name": "ann", "age": 30}', '{"k": 2, "name": "bob", "age": 20}']


def test_json_parsed_from_driver_strings_is_a_source_of_script_capture(
    spark: Any, store_path: Path, tmp_path: Path
) -> None:
    """``spark.read.json(sc.parallelize(strings))``: the parsed rows are the
    source ``<write>-input``; each written cell derives from the cells its
    expression reads in the same parsed row."""
    out = tmp_path / "adults"
    with provplug.capture_writes(spark, store=store_path):
        people = spark.read.json(spark.sparkContext.parallelize(PEOPLE_JSON))
        people.filter(F.col("age") > 25).select("k", F.upper("name").alias("upper"), "age").write.parquet(str(out))
    assert sorted(tuple(r) for r in spark.read.parquet(str(out)).collect()) == [(1, "ANN", 30)]
    # json infers the columns in name order
    assert sorted(tuple(r.values()) for r in table_rows(store_path, "adults-input")) == [
        (20, 2, "bob"),
        (30, 1, "ann"),
    ]
    keys = {"adults-input": ["k"], "adults": ["k"]}
    assert labelled_triples(store_path, keys) == expect(
        "write:adults",
        "adults",
        {
            ("k", 1): [("adults-input", "k", 1)],
            ("upper", 1): [("adults-input", "name", 1)],
            ("age", 1): [("adults-input", "age", 1)],
        },
    )
    assert_lineage_matches_oracle(store_path)


def test_rdds_of_driver_rows_are_sources_of_script_capture(spark: Any, store_path: Path, tmp_path: Path) -> None:
    """``createDataFrame`` of a parallelized list and ``parallelize(...).map(...).toDF()``
    (its lambda runs over driver data only): each is a source named after the
    write that reads it; a join of the two links each side's cells."""
    sc = spark.sparkContext
    out = tmp_path / "joined"
    with provplug.capture_writes(spark, store=store_path):
        left = spark.createDataFrame(sc.parallelize([(1, "a"), (2, "b")]), "k int, x string")
        right = sc.parallelize([1, 3]).map(lambda k: (k, k * 10)).toDF(["k", "y"])
        left.join(right, "k").select("k", "x", "y").write.parquet(str(out))
    assert [tuple(r) for r in spark.read.parquet(str(out)).collect()] == [(1, "a", 10)]
    want = expect(
        "write:joined",
        "joined",
        {
            ("k", 1): [("joined-input", "k", 1), ("joined-input-2", "k", 1)],
            ("x", 1): [("joined-input", "x", 1)],
            ("y", 1): [("joined-input-2", "y", 1)],
        },
    )
    assert labelled_triples(store_path) == want
    assert_lineage_matches_oracle(store_path)


def test_json_of_driver_strings_is_a_registered_source_of_a_step(spark: Any, store_path: Path) -> None:
    """Under ``provplug.capture`` driver rows are a source once registered;
    unregistered, the error names them as driver-built and says how."""

    @provplug.step("Older", output="Older")
    def older(people: Any) -> Any:
        return people.select("k", (F.col("age") + 1).alias("next_age"))

    strings = spark.sparkContext.parallelize(PEOPLE_JSON)
    with provplug.capture(spark, store=store_path) as run:
        older(run.source(spark.read.json(strings), "People"))
    keys = {"People": ["k"], "Older": ["k"]}
    assert labelled_triples(store_path, keys) == expect(
        "Older",
        "Older",
        {(col, k): [("People", src, k)] for k in (1, 2) for col, src in (("k", "k"), ("next_age", "age"))},
    )
    assert_lineage_matches_oracle(store_path)

    unregistered = store_path.parent / "unregistered"
    with pytest.raises(CaptureError, match=r"built in the driver .*spark\.read\.json.*run\.source\(df, name\)"):
        capture(spark, unregistered, {"T": T_ROWS}, lambda f: older(spark.read.json(strings)), strict=True)
    assert not unregistered.exists()


@pytest.mark.parametrize(
    "derived",
    [
        lambda df: df.rdd.map(lambda r: (r.k, r.a + 1)).toDF(["k", "a"]),
        lambda df: df.sparkSession.read.json(df.rdd.map(lambda r: f'{{"k": {r.k}}}')),
        lambda df: df.sparkSession.createDataFrame(df.rdd.filter(lambda r: r.k > 1), df.schema),
    ],
    ids=["rdd.map.toDF", "read.json(df.rdd)", "createDataFrame(df.rdd)"],
)
def test_rows_python_rdd_functions_made_from_a_dataframe_are_refused_with_the_reason(
    spark: Any, store_path: Path, tmp_path: Path, derived: Any
) -> None:
    """Which input row an element of ``df.rdd.map(f)`` came from is known only
    inside ``f``: refused in strict mode (script capture and steps alike),
    nothing committed; otherwise a coarse step with that reason."""
    refused = pytest.raises(CaptureError, match="Python RDD functions from another DataFrame's rows")
    with refused, provplug.capture_writes(spark, store=store_path, strict=True):
        derived(spark.createDataFrame(*T_ROWS)).write.parquet(str(tmp_path / "out"))
    assert not store_path.exists() and not (tmp_path / "out").exists()

    @provplug.step("Derived", output="Out")
    def step(df: Any) -> Any:
        return derived(df)

    with pytest.raises(CaptureError, match="Python RDD functions from another DataFrame's rows"):
        capture(spark, store_path, {"T": T_ROWS}, lambda f: step(f["T"]), strict=True)
    assert not store_path.exists()
    # Not strict: a coarse step that says why
    capture(spark, store_path, {"T": T_ROWS}, lambda f: step(f["T"]))
    derived_op = ops(store_path)["Derived"]
    assert derived_op["kind"] == "coarse" and "Python RDD functions" in derived_op["params"]
