"""Per-operation rules (provplug_spark.rules): the triple set of every docs/capture-semantics.md
row, checked on tiny inputs against hand-derived expectations, and the
operations refused with a clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import provplug
from provplug.errors import CaptureError

from .helpers import (
    L_ROWS,
    R_ROWS,
    S_ROWS,
    T_ROWS,
    F,
    Triple,
    capture,
    expect,
    labelled_triples,
    ops,
    pandas_mean,
    table_rows,
)


# -- one test per row of docs/capture-semantics.md ---------------------------------------------------------
def test_select_withcolumn_selectexpr_cast_rename_drop(spark: Any, store_path: Path) -> None:
    @provplug.step("S", output="Out")
    def shape(df: Any) -> Any:
        return (
            df.withColumn("s", F.col("a") + F.col("b"))
            .withColumn("seven", F.lit(7))
            .withColumn("junk", F.col("b") * 0)
            .withColumnRenamed("a", "a2")
            .select("k", "a2", "s", "seven", F.col("b").cast("string").alias("bs"), "junk")
            .selectExpr("*", "a2 * 2 AS a4")
            .drop("junk")
        )

    capture(spark, store_path, {"T": T_ROWS}, lambda f: shape(f["T"]))
    want: set[Triple] = set()
    for k in (1, 2):
        want |= expect(
            "S",
            "Out",
            {
                ("k", k): [("T", "k", k)],
                ("a2", k): [("T", "a", k)],
                ("s", k): [("T", "a", k), ("T", "b", k)],
                ("bs", k): [("T", "b", k)],
                ("a4", k): [("T", "a", k)],
                # "seven" is a literal: no parent, no triple
            },
        )
    assert labelled_triples(store_path) == want
    assert table_rows(store_path, "Out")[0].keys() == {"k", "a2", "s", "seven", "bs", "a4"}


def test_filter_predicate_columns_are_not_parents(spark: Any, store_path: Path) -> None:
    @provplug.step("F", output="Out")
    def big(df: Any) -> Any:
        return df.where(F.col("b") > 150).select("k", "a")

    capture(spark, store_path, {"T": T_ROWS}, lambda f: big(f["T"]))
    assert labelled_triples(store_path) == expect("F", "Out", {("k", 2): [("T", "k", 2)], ("a", 2): [("T", "a", 2)]})


def test_sort_limit_repartition_coalesce_cache_copy(spark: Any, store_path: Path) -> None:
    @provplug.step("C", output="Out")
    def top2(df: Any) -> Any:
        return df.orderBy(F.col("k").desc()).limit(2).repartition(3).coalesce(1).cache()

    capture(spark, store_path, {"T": ([(1, "x"), (2, "y"), (3, "z")], "k int, v string")}, lambda f: top2(f["T"]))
    want = set()
    for k in (3, 2):
        want |= expect("C", "Out", {("k", k): [("T", "k", k)], ("v", k): [("T", "v", k)]})
    assert labelled_triples(store_path) == want


def test_sample_copies_the_rows_it_kept(spark: Any, store_path: Path) -> None:
    @provplug.step("Smp", output="Out")
    def some(df: Any) -> Any:
        return df.sample(fraction=0.5, seed=7)

    capture(spark, store_path, {"T": ([(i, i * 10) for i in range(20)], "k int, v int")}, lambda f: some(f["T"]))
    kept = [r["k"] for r in table_rows(store_path, "Out")]
    assert 0 < len(kept) < 20
    want = set()
    for k in kept:  # ids of the stored rows and of the triples agree
        want |= expect("Smp", "Out", {("k", k): [("T", "k", k)], ("v", k): [("T", "v", k)]})
    assert labelled_triples(store_path) == want


def test_groupby_agg_keys_aggregates_and_count_star(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("G", output="Out")
    def per_city(df: Any) -> Any:
        return df.groupBy("city").agg(
            F.sum("age").alias("total"),
            F.count("*").alias("n"),
            F.max(F.col("age") * F.col("w")).alias("m"),
            F.lit(1).alias("one"),
        )

    capture(spark, store_path, {"S": S_ROWS}, lambda f: per_city(f["S"]))
    groups = {"NY": (30, 40), "LA": (50,)}
    want: set[Triple] = set()
    for city, ages in groups.items():
        want |= expect(
            "G",
            "Out",
            {
                ("city", city): [("S", "city", a) for a in ages],
                ("total", city): [("S", "age", a) for a in ages],
                ("n", city): [("S", "city", a) for a in ages],  # count(*): the group's key cells
                ("m", city): [("S", c, a) for a in ages for c in ("age", "w")],
            },
        )
    assert labelled_triples(store_path, {"S": ("age",)}) == want
    mode, group_writes = group_joins
    assert group_writes.call_count == (1 if mode == "always" else 0)


def test_global_count_star_depends_on_every_cell(spark: Any, store_path: Path) -> None:
    @provplug.step("G0", output="Out")
    def totals(df: Any) -> Any:
        return df.agg(F.count("*").alias("n"), F.avg("age").alias("avg_age"))

    capture(spark, store_path, {"S": S_ROWS}, lambda f: totals(f["S"]))
    want = expect(
        "G0",
        "Out",
        {
            ("n", 3): [("S", c, a) for a in (30, 40, 50) for c in ("city", "age", "w")],
            ("avg_age", 3): [("S", "age", a) for a in (30, 40, 50)],
        },
    )
    assert labelled_triples(store_path, {"S": ("age",)}) == want


def test_join_using_key_inner_full_and_explicit_condition(spark: Any, store_path: Path) -> None:
    @provplug.step("J", output=("Inner", "Full", "Left"))
    def joins(left: Any, right: Any) -> Any:
        return (
            left.join(right, "k"),
            left.join(right, "k", "full"),
            left.join(right, left.k == right.k, "left").select(left.k, left.x, right.y),
        )

    capture(spark, store_path, {"L": L_ROWS, "R": R_ROWS}, lambda f: joins(f["L"], f["R"]))
    want = expect(
        "J",
        "Inner",
        {
            ("k", 1): [("L", "k", 1), ("R", "k", 1)],  # merged using key <- both sides
            ("x", 1): [("L", "x", 1)],
            ("y", 1): [("R", "y", 1)],
        },
    )
    want |= expect(
        "J",
        "Full",
        {
            ("k", 1): [("L", "k", 1), ("R", "k", 1)],
            ("x", 1): [("L", "x", 1)],
            ("y", 1): [("R", "y", 1)],
            ("k", 2): [("L", "k", 2)],
            ("x", 2): [("L", "x", 2)],  # y is null: no parent
            ("k", 3): [("R", "k", 3)],
            ("y", 3): [("R", "y", 3)],
        },
    )
    want |= expect(
        "J",
        "Left",
        {
            ("k", 1): [("L", "k", 1)],  # not a using join: the left key only
            ("x", 1): [("L", "x", 1)],
            ("y", 1): [("R", "y", 1)],
            ("k", 2): [("L", "k", 2)],
            ("x", 2): [("L", "x", 2)],
        },
    )
    assert labelled_triples(store_path) == want
    assert (
        ops(store_path)["J"]["inputs"] == sorted(ops(store_path)["J"]["inputs"])
        and len(ops(store_path)["J"]["inputs"]) == 2
    )


def test_union_and_union_by_name_by_position_and_name(spark: Any, store_path: Path) -> None:
    @provplug.step("U", output="Out")
    def together(a: Any, b: Any, c: Any) -> Any:
        return a.union(b).unionByName(c)

    capture(
        spark,
        store_path,
        {
            "A": ([(1, "a")], "k int, v string"),
            "B": ([(2, "b")], "key int, val string"),
            "C": ([("c", 3)], "v string, k int"),
        },
        lambda f: together(f["A"], f["B"], f["C"]),
    )
    want = expect(
        "U",
        "Out",
        {
            ("k", 1): [("A", "k", 1)],
            ("v", 1): [("A", "v", 1)],
            ("k", 2): [("B", "key", 2)],
            ("v", 2): [("B", "val", 2)],
            ("k", 3): [("C", "k", "c")],
            ("v", 3): [("C", "v", "c")],
        },
    )
    assert labelled_triples(store_path) == want


def test_a_selection_over_a_union_keeps_the_second_branch_rows(spark: Any, store_path: Path) -> None:
    # The union's output carries the second branch's row numbers under the
    # first branch's (null) columns: the Project above must read those, not
    # the second branch's own attributes (which it lacks: an analysis error,
    # so a capture that fails open with no triple at all).
    @provplug.step("U", output="Out")
    def together(a: Any, b: Any) -> Any:
        return a.union(b).select("k")

    capture(
        spark,
        store_path,
        {"A": ([(1, "a")], "k int, v string"), "B": ([(2, "b")], "key int, val string")},
        lambda f: together(f["A"], f["B"]),
    )
    want = expect("U", "Out", {("k", 1): [("A", "k", 1)], ("k", 2): [("B", "key", 2)]})
    assert labelled_triples(store_path) == want


def test_distinct_merges_rows_and_drop_duplicates_keeps_one_row(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("D", output=("Dist", "Dedup"))
    def dedupe(d: Any, e: Any) -> Any:
        return d.distinct(), e.dropDuplicates(["c"])

    capture(
        spark,
        store_path,
        {
            "D": ([("x", 1), ("x", 1), ("y", 2)], "c string, v int"),
            "E": ([("x", 1), ("x", 2), ("y", 3)], "c string, v int"),
        },
        lambda f: dedupe(f["D"], f["E"]),
    )
    kept = {r["c"]: r["v"] for r in table_rows(store_path, "Dedup")}
    e_row = {1: 0, 2: 1, 3: 2}  # E's v -> its row position
    want = expect(
        "D",
        "Dist",
        {
            ("c", "x"): [("D", "c", 0), ("D", "c", 1)],
            ("v", "x"): [("D", "v", 0), ("D", "v", 1)],
            ("c", "y"): [("D", "c", 2)],
            ("v", "y"): [("D", "v", 2)],
        },
    )
    want |= expect(
        "D",
        "Dedup",
        {
            ("c", "x"): [("E", "c", 0), ("E", "c", 1)],  # subset column: every merged row
            ("v", "x"): [("E", "v", e_row[kept["x"]])],  # other column: the kept row only
            ("c", "y"): [("E", "c", 2)],
            ("v", "y"): [("E", "v", 2)],
        },
    )
    assert kept["x"] in (1, 2)
    assert labelled_triples(store_path, {"D": ("#row",), "E": ("#row",)}) == want


def test_explode_and_posexplode(spark: Any, store_path: Path) -> None:
    @provplug.step("X", output=("Exp", "Pos"))
    def flatten(df: Any) -> Any:
        return (
            df.select("k", "tag", F.explode("arr").alias("x")),
            df.select(F.posexplode("arr"), "k"),
        )

    capture(
        spark, store_path, {"E": ([(1, [10, 20], "a")], "k int, arr array<int>, tag string")}, lambda f: flatten(f["E"])
    )
    want: set[Triple] = set()
    for x in (10, 20):
        want |= expect(
            "X", "Exp", {("k", x): [("E", "k", 1)], ("tag", x): [("E", "tag", 1)], ("x", x): [("E", "arr", 1)]}
        )
    for pos in (0, 1):
        want |= expect(
            "X", "Pos", {("pos", pos): [("E", "arr", 1)], ("col", pos): [("E", "arr", 1)], ("k", pos): [("E", "k", 1)]}
        )
    assert labelled_triples(store_path, {"Exp": ("x",), "Pos": ("pos",)}) == want


def test_window_running_sum_rank_and_lag_use_frame_rows(spark: Any, store_path: Path) -> None:
    from pyspark.sql import Window

    @provplug.step("W", output="Out")
    def windows(df: Any) -> Any:
        w = Window.partitionBy("g").orderBy("t")
        return (
            df.withColumn("run", F.sum("v").over(w))
            .withColumn("rk", F.rank().over(w))
            .withColumn("prev", F.lag("v").over(w))
        )

    rows = [("a", 1, 10), ("a", 2, 20), ("a", 3, 30), ("b", 1, 5)]
    capture(spark, store_path, {"W": (rows, "g string, t int, v int")}, lambda f: windows(f["W"]))
    want: set[Triple] = set()
    for g, t, _ in rows:
        key = (g, t)
        frame = [(g, u) for u in range(1, t + 1)]  # unbounded preceding .. current row
        want |= expect(
            "W",
            "Out",
            {
                ("g", key): [("W", "g", key)],
                ("t", key): [("W", "t", key)],
                ("v", key): [("W", "v", key)],
                ("run", key): [("W", "v", r) for r in frame],
                ("rk", key): [("W", "t", r) for r in frame],  # rank-like: the order-by cells
                ("prev", key): [("W", "v", (g, t - 1))] if t > 1 else [],
            },
        )
    assert labelled_triples(store_path, {"W": ("g", "t"), "Out": ("g", "t")}) == want


def test_python_udf_over_two_columns_and_pandas_udf_are_black_boxes(spark: Any, store_path: Path) -> None:
    plus = F.udf(lambda a, b: a + b, "long")

    def _twice(x):  # type: ignore[no-untyped-def]
        return x * 2

    # Real (not string) hints: PySpark infers a scalar pandas UDF from them, and
    # a local function is pickled by value for the Python worker.
    _twice.__annotations__ = {"x": pd.Series, "return": pd.Series}
    twice = F.pandas_udf(_twice, "long")

    @provplug.step("UDF", output="Out")
    def apply(df: Any) -> Any:
        return df.select("k", plus("a", "b").alias("s"), twice("a").alias("d"))

    capture(spark, store_path, {"T": T_ROWS}, lambda f: apply(f["T"]))
    want = set()
    for k in (1, 2):
        want |= expect(
            "UDF",
            "Out",
            {
                ("k", k): [("T", "k", k)],
                ("s", k): [("T", "a", k), ("T", "b", k)],
                ("d", k): [("T", "a", k)],
            },
        )
    assert labelled_triples(store_path) == want
    assert ops(store_path)["UDF"]["kind"] == "udf"
    assert sorted(r["s"] for r in table_rows(store_path, "Out")) == [110, 220]


def test_pandas_window_udf_uses_its_frame_rows(spark: Any, store_path: Path) -> None:
    from pyspark.sql import Window

    mean = pandas_mean()

    @provplug.step("PWin", output="CityMeans")
    def city_means(df: Any) -> Any:
        return df.select("age", mean("age").over(Window.partitionBy("city")).alias("m"))

    capture(spark, store_path, {"S": S_ROWS}, lambda f: city_means(f["S"]))
    partner = {30: (30, 40), 40: (30, 40), 50: (50,)}
    want = expect("PWin", "CityMeans", {("age", a): [("S", "age", a)] for a in partner})
    want |= expect("PWin", "CityMeans", {("m", a): [("S", "age", b) for b in ages] for a, ages in partner.items()})
    assert labelled_triples(store_path, {"S": ("age",)}) == want


# -- keys and columns the analyzer casts (sides of different types) ------------------------
# A CSV source's int key against a Parquet one's bigint: Spark compares and
# unions them through a Cast (a join condition ``k = cast(k AS bigint)``, a
# union branch under ``Project [cast(k AS bigint) AS k]``, a full outer key
# ``coalesce(k, cast(k AS bigint)) AS k``); provenance must see through it.
WIDE_ROWS = ([(1, "a"), (2, "b")], "k bigint, x string")
NARROW_ROWS = ([(1, "p"), (1, "r"), (3, "q")], "k int, y string")


def test_using_join_of_keys_of_different_types_merges_both_keys(spark: Any, store_path: Path) -> None:
    @provplug.step("JT", output=("Inner", "Left", "Right", "Full", "InnerRev", "LeftRev", "FullRev", "TwoKeys"))
    def joins(wide: Any, narrow: Any) -> Any:
        both = [c.withColumn("j", F.col("k").cast(t)) for c, t in ((wide, "int"), (narrow, "bigint"))]
        return (
            wide.join(narrow, "k"),  # Join (k#l = cast(k#r AS bigint)); the merged key keeps k#l
            wide.join(narrow, "k", "left"),
            wide.join(narrow, "k", "right"),  # the merged key keeps the right side's k#r
            wide.join(narrow, "k", "full"),  # coalesce(k#l, cast(k#r AS bigint)) AS k
            narrow.join(wide, "k"),  # the cast on the left side: (cast(k#l AS bigint) = k#r)
            narrow.join(wide, "k", "left"),
            narrow.join(wide, "k", "full"),  # coalesce(cast(k#l AS bigint), k#r) AS k
            both[0].join(both[1], ["k", "j"]),  # a cast on each side, one per key
        )

    capture(spark, store_path, {"W": WIDE_ROWS, "N": NARROW_ROWS}, lambda f: joins(f["W"], f["N"]))
    matched = {
        y: {("k", y): [("W", "k", "a"), ("N", "k", y)], ("x", y): [("W", "x", "a")], ("y", y): [("N", "y", y)]}
        for y in ("p", "r")
    }
    inner = {c: ps for y in ("p", "r") for c, ps in matched[y].items()}
    want = expect("JT", "Inner", inner) | expect("JT", "InnerRev", inner)
    lone_w = {("k", None): [("W", "k", "b")], ("x", None): [("W", "x", "b")]}
    lone_n = {("k", "q"): [("N", "k", "q")], ("y", "q"): [("N", "y", "q")]}
    want |= expect("JT", "Left", {**inner, **lone_w})
    want |= expect("JT", "Right", {**inner, **lone_n})
    want |= expect("JT", "Full", {**inner, **lone_w, **lone_n})
    want |= expect("JT", "LeftRev", {**inner, **lone_n})
    want |= expect("JT", "FullRev", {**inner, **lone_n, **lone_w})
    want |= expect(
        "JT",
        "TwoKeys",
        {
            **inner,
            **{("j", y): [("W", "k", "a"), ("N", "k", y)] for y in ("p", "r")},  # j was cast from k on both sides
        },
    )
    outputs = ("Inner", "Left", "Right", "Full", "InnerRev", "LeftRev", "FullRev", "TwoKeys")
    keys = {"W": ("x",), "N": ("y",), **{o: ("y",) for o in outputs}}
    assert labelled_triples(store_path, keys) == want
    assert {r["k"] for r in table_rows(store_path, "Full")} == {1, 2, 3}


def test_group_by_a_using_join_key_of_different_types(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("GT", output=("Inner", "Full"))
    def per_key(wide: Any, narrow: Any) -> Any:
        def counted(joined: Any) -> Any:
            return joined.groupBy("k").agg(F.count("*").alias("n"), F.max("y").alias("top"))

        return counted(wide.join(narrow, "k")), counted(wide.join(narrow, "k", "full"))

    capture(spark, store_path, {"W": WIDE_ROWS, "N": NARROW_ROWS}, lambda f: per_key(f["W"], f["N"]))
    one = [("W", "k", "a"), ("N", "k", "p"), ("N", "k", "r")]  # the group's merged key cells
    group_1 = {("k", 1): one, ("n", 1): one, ("top", 1): [("N", "y", "p"), ("N", "y", "r")]}
    want = expect("GT", "Inner", group_1)
    want |= expect(
        "GT",
        "Full",
        {
            **group_1,
            ("k", 2): [("W", "k", "b")],
            ("n", 2): [("W", "k", "b")],  # no right row: top is null
            ("k", 3): [("N", "k", "q")],
            ("n", 3): [("N", "k", "q")],
            ("top", 3): [("N", "y", "q")],
        },
    )
    assert labelled_triples(store_path, {"W": ("x",), "N": ("y",)}) == want


def test_union_of_columns_of_different_types(spark: Any, store_path: Path, group_joins: Any) -> None:
    """The analyzer widens a union's int column to bigint in a Project above
    that branch (first or later), and unionByName(allowMissingColumns) adds
    null columns beside the casts; grouping and deduplicating by the widened
    column sees every branch's cells."""

    @provplug.step("UT", output=("WideFirst", "NarrowFirst", "ByName", "Grouped", "Dedup"))
    def unions(wide: Any, narrow: Any) -> Any:
        narrow_x = narrow.withColumnRenamed("y", "x")
        return (
            wide.union(narrow_x),
            narrow_x.union(wide),
            wide.unionByName(narrow, allowMissingColumns=True),
            wide.union(narrow_x).groupBy("k").agg(F.count("*").alias("n")),
            narrow_x.union(wide).dropDuplicates(["k"]),
        )

    capture(spark, store_path, {"W": WIDE_ROWS, "N": NARROW_ROWS}, lambda f: unions(f["W"], f["N"]))
    rows = {"W": ("a", "b"), "N": ("p", "r", "q")}
    copied = {
        (c, v): [(t, "k" if c == "k" else ("x" if t == "W" else "y"), v)]
        for t, vs in rows.items()
        for v in vs
        for c in ("k", "x")
    }
    want = expect("UT", "WideFirst", copied) | expect("UT", "NarrowFirst", copied)
    want |= expect(
        "UT",
        "ByName",
        {  # keyed by (x, y); the missing column is a null literal: no parent
            **{(c, (v, None)): [("W", c, v)] for v in rows["W"] for c in ("k", "x")},
            **{(c, (None, v)): [("N", c, v)] for v in rows["N"] for c in ("k", "y")},
        },
    )
    members = {1: [("W", "k", "a"), ("N", "k", "p"), ("N", "k", "r")], 2: [("W", "k", "b")], 3: [("N", "k", "q")]}
    want |= expect("UT", "Grouped", {(c, k): m for k, m in members.items() for c in ("k", "n")})
    kept = {r["k"]: r["x"] for r in table_rows(store_path, "Dedup")}
    want |= expect(
        "UT",
        "Dedup",
        {
            **{("k", k): m for k, m in members.items()},
            **{
                ("x", k): [("W" if x in rows["W"] else "N", "x" if x in rows["W"] else "y", x)] for k, x in kept.items()
            },
        },
    )
    keys = {
        "W": ("x",),
        "N": ("y",),
        "WideFirst": ("x",),
        "NarrowFirst": ("x",),
        "ByName": ("x", "y"),
        "Grouped": ("k",),
        "Dedup": ("k",),
    }
    assert labelled_triples(store_path, keys) == want


# -- operations refused --------------------------------------------------------------------
def test_record_lambdas_fail_clearly_and_commit_nothing(spark: Any, store_path: Path) -> None:
    @provplug.step("BB", output="Out")
    def opaque(df: Any) -> Any:
        return df.rdd.map(lambda r: (r.k, r.a)).toDF(["k", "a"])

    with pytest.raises(CaptureError, match="RDD"):  # strict: the refusal (by default, a coarse step)
        capture(spark, store_path, {"T": T_ROWS}, lambda f: opaque(f["T"]), strict=True)
    assert not store_path.exists()


def test_an_unregistered_driver_built_dataframe_is_named_as_such(spark: Any, store_path: Path) -> None:
    """A DataFrame made with createDataFrame (an RDD of driver-side rows in
    the plan) and not passed through run.source is not "an RDD lambda": the
    error says what it is and how to register it."""

    @provplug.step("Lookup", output="Out")
    def lookup(df: Any, regions: Any) -> Any:
        return df.join(regions, "k")

    with pytest.raises(CaptureError, match=r"built in the driver \(createDataFrame.*run\.source\(df, name\)") as error:
        capture(
            spark,
            store_path,
            {"T": T_ROWS},
            lambda f: lookup(f["T"], spark.createDataFrame([(1, "east")], "k int, region string")),
            strict=True,
        )
    assert "RDD (" not in str(error.value)
    assert not store_path.exists()
