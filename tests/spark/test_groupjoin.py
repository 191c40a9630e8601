"""Group joins (provplug_spark.groupjoin): aggregate provenance deferred to a
join after the write, the setting that chooses them, and the fallbacks to
member lists."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.errors import CaptureError
from provplug.store.open import open_store

from .helpers import (
    L_ROWS,
    R_ROWS,
    S_ROWS,
    F,
    capture,
    expect,
    labelled_triples,
    pandas_mean,
)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("spark.provplug.groupJoins", "sometimes", "groupJoins must be 'global' or 'always'"),
        ("spark.provplug.groupJoins.listBytes", "10MB", "listBytes must be a whole number of bytes"),
    ],
)
def test_group_join_settings_must_be_known(
    spark: Any, store_path: Path, setting: str, value: str, message: str
) -> None:
    spark.conf.set(setting, value)
    try:
        with pytest.raises(CaptureError, match=message):
            capture(spark, store_path, {"S": S_ROWS}, lambda f: None, strict=True)
    finally:
        spark.conf.unset(setting)
    assert not store_path.exists() or open_store(store_path).runs() == []


# S's 3 stored rows through a filter: at most 3 members, each 8 bytes in the
# one row-number list and the members' list (48 bytes); Spark estimates the
# input at its Parquet file's size (hundreds of bytes).
SURE_LIST_BYTES = len(S_ROWS[0]) * 8 * 2


@pytest.mark.parametrize(
    ("list_bytes", "joins"),
    [(None, False), ("0", True), (str(SURE_LIST_BYTES), False), (str(SURE_LIST_BYTES - 1), True)],
)
def test_a_global_aggregate_over_a_small_input_lists_its_members(
    spark: Any, store_path: Path, mocker: Any, list_bytes: str | None, joins: bool
) -> None:
    """An aggregate without keys whose lists surely fit
    spark.provplug.groupJoins.listBytes (10 MB by default), by the stored
    row count of its input, lists its members in its one row: no group join,
    no second job over its input. Below that bound (and below Spark's size
    estimate of the input) it joins. The triples are the same, the
    hand-derived ones."""
    from provplug_spark import session as spark_session
    from provplug_spark.groupjoin import LIST_BYTES_CONF

    group_writes = mocker.spy(spark_session.SparkCaptureSession, "_write_groups")

    @provplug.step("Total", output="Totals")
    def total(df: Any) -> Any:
        return df.filter(F.col("age") > 35).agg(F.sum("age").alias("s"), F.count("*").alias("n"))

    if list_bytes is not None:
        spark.conf.set(LIST_BYTES_CONF, list_bytes)
    try:
        capture(spark, store_path, {"S": S_ROWS}, lambda f: total(f["S"]))
    finally:
        spark.conf.unset(LIST_BYTES_CONF)
    want = expect(
        "Total",
        "Totals",
        {
            ("s", 90): [("S", "age", 40), ("S", "age", 50)],
            ("n", 90): [("S", c, a) for a in (40, 50) for c in ("city", "age", "w")],
        },
    )
    assert labelled_triples(store_path, {"S": ("age",)}) == want
    assert group_writes.call_count == (1 if joins else 0)


def test_pandas_aggregate_udf_per_group(spark: Any, store_path: Path) -> None:
    """Spark plans a pandas aggregate UDF only beside other pandas aggregate
    UDFs, so its groups' provenance goes through a group join; where its
    input cannot be recomputed, it fails clearly."""
    mean = pandas_mean()

    @provplug.step("PMean", output="Means")
    def means(df: Any) -> Any:
        return df.groupBy("city").agg(mean("age").alias("m"))

    capture(spark, store_path, {"S": S_ROWS}, lambda f: means(f["S"]))
    want = expect(
        "PMean",
        "Means",
        {
            ("city", "NY"): [("S", "city", 30), ("S", "city", 40)],
            ("m", "NY"): [("S", "age", 30), ("S", "age", 40)],
            ("city", "LA"): [("S", "city", 50)],
            ("m", "LA"): [("S", "age", 50)],
        },
    )
    assert labelled_triples(store_path, {"S": ("age",)}) == want

    @provplug.step("PMeanTop", output="TopMeans")
    def top_means(df: Any) -> Any:
        return df.orderBy("age").limit(2).groupBy("city").agg(mean("age").alias("m"))

    with pytest.raises(CaptureError, match="pandas aggregate UDF"):
        capture(spark, store_path, {"S": S_ROWS}, lambda f: top_means(f["S"]), strict=True)


def test_aggregate_through_union_and_using_join_keeps_exact_group_provenance(
    spark: Any, store_path: Path, group_joins: Any
) -> None:
    @provplug.step("UA", output=("Both", "Joined"))
    def mixed(s: Any, t: Any, r: Any) -> Any:
        agg = s.groupBy("city").agg(F.sum("age").alias("total"))
        # T's NY row has the key of an aggregate group but is not part of it.
        return agg.unionByName(t.select("city", "total")), agg.join(r, "city")

    capture(
        spark,
        store_path,
        {
            "S": S_ROWS,
            "T": ([("NY", 99)], "city string, total bigint"),
            "R": ([("NY", "east")], "city string, region string"),
        },
        lambda f: mixed(f["S"], f["T"], f["R"]),
    )
    want = expect(
        "UA",
        "Both",
        {
            ("city", 70): [("S", "city", 30), ("S", "city", 40)],
            ("total", 70): [("S", "age", 30), ("S", "age", 40)],
            ("city", 50): [("S", "city", 50)],
            ("total", 50): [("S", "age", 50)],
            ("city", 99): [("T", "city", 99)],
            ("total", 99): [("T", "total", 99)],
        },
    )
    want |= expect(
        "UA",
        "Joined",
        {
            # merged using key: the group's key cells and R's key cell
            ("city", "NY"): [("S", "city", 30), ("S", "city", 40), ("R", "city", "NY")],
            ("total", "NY"): [("S", "age", 30), ("S", "age", 40)],
            ("region", "NY"): [("R", "region", "NY")],
        },
    )
    assert labelled_triples(store_path, {"S": ("age",), "T": ("total",), "Both": ("total",)}) == want


def test_aggregate_over_limit_and_null_expression_keys(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("AL", output=("Top2", "Upper"))
    def groups(s: Any, x: Any) -> Any:
        top2 = s.orderBy("age").limit(2).groupBy("city").agg(F.count("*").alias("n"))  # not recomputable: arrays
        upper = x.groupBy(F.upper("c").alias("cu")).agg(F.sum("v").alias("s"))  # null group joins null-safely
        return top2, upper

    capture(
        spark,
        store_path,
        {
            "S": S_ROWS,
            "X": ([(None, 1), (None, 2), ("a", 5)], "c string, v int"),
        },
        lambda f: groups(f["S"], f["X"]),
    )
    want = expect(
        "AL",
        "Top2",
        {
            ("city", "NY"): [("S", "city", 30), ("S", "city", 40)],
            ("n", "NY"): [("S", "city", 30), ("S", "city", 40)],
        },
    )
    want |= expect(
        "AL",
        "Upper",
        {
            ("cu", 3): [("X", "c", 1), ("X", "c", 2)],
            ("s", 3): [("X", "v", 1), ("X", "v", 2)],
            ("cu", 5): [("X", "c", 5)],
            ("s", 5): [("X", "v", 5)],
        },
    )
    assert labelled_triples(store_path, {"S": ("age",), "X": ("v",), "Upper": ("s",)}) == want


def test_aggregate_over_aggregate_and_semi_join_in_one_step(spark: Any, store_path: Path) -> None:
    """Member lists of lists (a second groupBy over the first one's groups)
    and a left-semi join, whose right side's cells are not parents."""

    @provplug.step("Nested", output=("PerCity", "Matched"))
    def nested(s: Any, left: Any, right: Any) -> Any:
        per_city = s.groupBy("city", "w").agg(F.sum("age").alias("age")).groupBy("city").agg(F.max("age").alias("top"))
        return per_city, left.join(right, "k", "left_semi")

    capture(spark, store_path, {"S": S_ROWS, "L": L_ROWS, "R": R_ROWS}, lambda f: nested(f["S"], f["L"], f["R"]))
    want = expect(
        "Nested",
        "PerCity",
        {
            ("city", "NY"): [("S", "city", 30), ("S", "city", 40)],
            ("top", "NY"): [("S", "age", 30), ("S", "age", 40)],
            ("city", "LA"): [("S", "city", 50)],
            ("top", "LA"): [("S", "age", 50)],
        },
    )
    want |= expect("Nested", "Matched", {("k", 1): [("L", "k", 1)], ("x", 1): [("L", "x", 1)]})
    assert labelled_triples(store_path, {"S": ("age",), "L": ("k",)}) == want


def test_a_global_aggregate_over_a_per_query_value_collects_its_members(
    spark: Any, store_path: Path, mocker: Any, joined_global_aggregates: None
) -> None:
    """current_timestamp() is fixed once per query: a group join's second
    query could select other rows, so such an aggregate lists its members
    (even where its input's size would make it join)."""
    from provplug_spark import session as spark_session

    group_writes = mocker.spy(spark_session.SparkCaptureSession, "_write_groups")

    @provplug.step("Past", output="PastCount")
    def past(df: Any) -> Any:
        return df.filter(F.col("at") < F.current_timestamp()).agg(F.sum("k").alias("s"))

    rows = (
        [(1, dt.datetime(2020, 1, 1)), (2, dt.datetime(2021, 1, 1)), (4, dt.datetime(2999, 1, 1))],
        "k int, at timestamp",
    )
    capture(spark, store_path, {"T": rows}, lambda f: past(f["T"]))
    assert labelled_triples(store_path) == expect("Past", "PastCount", {("s", 3): [("T", "k", 1), ("T", "k", 2)]})
    assert group_writes.call_count == 0


@pytest.mark.parametrize(
    ("name", "bounds", "bound"),
    [
        ("Filter", [3], 3),
        ("Project", [3], 3),
        ("Aggregate", [3], 3),
        ("Join", [2, 3], 2 * 3 + 2 + 3),  # a full outer join of unmatched rows has 2 + 3
        ("Union", [2, 3], 5),
        ("Sample", [3], None),  # with replacement: more rows than its input
        ("Generate", [3], None),  # explode: any number
        ("Join", [2, None], None),
    ],
)
def test_row_bounds_of_plan_nodes(name: str, bounds: list[int | None], bound: int | None) -> None:
    """The bound on a node's rows that lets a global aggregate list its members."""
    from provplug_spark.rewrite import _row_bound
    from provplug_spark.state import Node

    children = [Node(None, (), (), None, max_rows=b) for b in bounds]
    assert _row_bound(name, children, Node(None, (), (), None)) == bound
