"""PySpark capture: the triple set of every DESIGN §3 rule, checked on tiny
inputs against hand-derived expectations.

A captured value id is labelled (table name, column name, row key), where the
row key is read from the stored rows (default: the row's first column; tables
listed in ``keys`` use those columns, ``"#row"`` means the stored row number,
which for a one-partition source is its position). Triples become
(src label, dst label, op name), so expectations never depend on the row
numbers Spark happens to assign.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import provplug
from provplug import ids, schema
from provplug.errors import CaptureError
from provplug.store import open_store

F = pytest.importorskip("pyspark.sql.functions")

Label = tuple[str, str, Any]
Triple = tuple[Label, Label, str]


# -- helpers -------------------------------------------------------------------
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


# -- the paper's running example (Table 4) ------------------------------------------
def test_running_example_gives_the_15_triples_of_table_4(spark: Any, store_path: Path, group_joins: Any) -> None:
    import csv

    import people_spark  # examples/ on sys.path (see module fixture below)
    from conftest import DATA

    people_spark.capture_people(spark, str(store_path))

    names = [p[0] for p in people_spark.PERSON1]
    # Row order of each table in the paper (Table 4): AvgAge's first row is NY (22 <- 14, 17).
    row_keys = {"Person1": names, "Person2": names[:3], "AvgAge": ["NY", "LA"]}
    with open(DATA / "paper_table4_values.csv") as f:
        values = list(csv.DictReader(f))
    width = {t: sum(1 for v in values if v["table"] == t) // len(k) for t, k in row_keys.items()}
    first_id = {t: min(int(v["value_id"]) for v in values if v["table"] == t) for t in row_keys}
    paper_label = {
        int(v["value_id"]): (v["table"], v["column"], row_keys[v["table"]][(int(v["value_id"]) - first_id[v["table"]]) // width[v["table"]]])
        for v in values
    }
    with open(DATA / "paper_table4_triples.csv") as f:
        paper = {(paper_label[int(t["src"])], paper_label[int(t["dst"])], t["op"]) for t in csv.DictReader(f)}
    assert len(paper) == 15

    got = labelled_triples(store_path, {"Person1": ("Name",), "Person2": ("Name",), "AvgAge": ("City",)})
    assert got == paper
    assert not any(src[2] == "Mary" for src, _, _ in got)  # Mary's values have no triple
    r1, r2 = ops(store_path)["R1"], ops(store_path)["R2"]
    assert (r1["kind"], r1["operations"], r1["triples"]) == ("builtin", ["Filter"], 9)
    assert (r2["kind"], r2["operations"], r2["triples"]) == ("builtin", ["Aggregate"], 6)
    assert r2["inputs"] == r1["outputs"]
    assert sorted(table_rows(store_path, "AvgAge"), key=lambda r: r["City"]) == [
        {"City": "LA", "Age": 40.0}, {"City": "NY", "Age": 35.0}]


@pytest.fixture(autouse=True, scope="module")
def _examples_on_path() -> Any:
    import sys

    from conftest import EXAMPLES

    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


# -- one test per row of DESIGN §3 ---------------------------------------------------
T_ROWS = ([(1, 10, 100), (2, 20, 200)], "k int, a int, b int")


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
        want |= expect("S", "Out", {
            ("k", k): [("T", "k", k)],
            ("a2", k): [("T", "a", k)],
            ("s", k): [("T", "a", k), ("T", "b", k)],
            ("bs", k): [("T", "b", k)],
            ("a4", k): [("T", "a", k)],
            # "seven" is a literal: no parent, no triple
        })
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


S_ROWS = ([("NY", 30, 1), ("NY", 40, 2), ("LA", 50, 3)], "city string, age int, w int")


@pytest.fixture(params=["global", "always"])
def group_joins(request: Any, spark: Any, mocker: Any) -> Any:
    """Aggregates' provenance both ways: member lists (keyed aggregates by
    default) and group joins (``spark.provplug.groupJoins=always``). Yields a
    spy on the group-join writer."""
    from provplug_spark import session as spark_session
    from provplug_spark.groupjoin import GROUP_JOINS_CONF

    spark.conf.set(GROUP_JOINS_CONF, request.param)
    yield request.param, mocker.spy(spark_session.SparkCaptureSession, "_write_groups")
    spark.conf.unset(GROUP_JOINS_CONF)


def test_groupby_agg_keys_aggregates_and_count_star(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("G", output="Out")
    def per_city(df: Any) -> Any:
        return df.groupBy("city").agg(
            F.sum("age").alias("total"), F.count("*").alias("n"),
            F.max(F.col("age") * F.col("w")).alias("m"), F.lit(1).alias("one"),
        )

    capture(spark, store_path, {"S": S_ROWS}, lambda f: per_city(f["S"]))
    groups = {"NY": (30, 40), "LA": (50,)}
    want: set[Triple] = set()
    for city, ages in groups.items():
        want |= expect("G", "Out", {
            ("city", city): [("S", "city", a) for a in ages],
            ("total", city): [("S", "age", a) for a in ages],
            ("n", city): [("S", "city", a) for a in ages],  # count(*): the group's key cells
            ("m", city): [("S", c, a) for a in ages for c in ("age", "w")],
        })
    assert labelled_triples(store_path, {"S": ("age",)}) == want
    mode, group_writes = group_joins
    assert group_writes.call_count == (1 if mode == "always" else 0)


def test_group_joins_setting_must_be_known(spark: Any, store_path: Path) -> None:
    from provplug_spark.groupjoin import GROUP_JOINS_CONF

    spark.conf.set(GROUP_JOINS_CONF, "sometimes")
    try:
        with pytest.raises(CaptureError, match="groupJoins must be 'global' or 'always'"):
            capture(spark, store_path, {"S": S_ROWS}, lambda f: None)
    finally:
        spark.conf.unset(GROUP_JOINS_CONF)
    assert not store_path.exists() or open_store(store_path).runs() == []


def test_global_count_star_depends_on_every_cell(spark: Any, store_path: Path) -> None:
    @provplug.step("G0", output="Out")
    def totals(df: Any) -> Any:
        return df.agg(F.count("*").alias("n"), F.avg("age").alias("avg_age"))

    capture(spark, store_path, {"S": S_ROWS}, lambda f: totals(f["S"]))
    want = expect("G0", "Out", {
        ("n", 3): [("S", c, a) for a in (30, 40, 50) for c in ("city", "age", "w")],
        ("avg_age", 3): [("S", "age", a) for a in (30, 40, 50)],
    })
    assert labelled_triples(store_path, {"S": ("age",)}) == want


L_ROWS = ([(1, "a"), (2, "b")], "k int, x string")
R_ROWS = ([(1, "p"), (3, "q")], "k int, y string")


def test_join_using_key_inner_full_and_explicit_condition(spark: Any, store_path: Path) -> None:
    @provplug.step("J", output=("Inner", "Full", "Left"))
    def joins(left: Any, right: Any) -> Any:
        return (
            left.join(right, "k"),
            left.join(right, "k", "full"),
            left.join(right, left.k == right.k, "left").select(left.k, left.x, right.y),
        )

    capture(spark, store_path, {"L": L_ROWS, "R": R_ROWS}, lambda f: joins(f["L"], f["R"]))
    want = expect("J", "Inner", {
        ("k", 1): [("L", "k", 1), ("R", "k", 1)],  # merged using key <- both sides
        ("x", 1): [("L", "x", 1)],
        ("y", 1): [("R", "y", 1)],
    })
    want |= expect("J", "Full", {
        ("k", 1): [("L", "k", 1), ("R", "k", 1)],
        ("x", 1): [("L", "x", 1)],
        ("y", 1): [("R", "y", 1)],
        ("k", 2): [("L", "k", 2)], ("x", 2): [("L", "x", 2)],  # y is null: no parent
        ("k", 3): [("R", "k", 3)], ("y", 3): [("R", "y", 3)],
    })
    want |= expect("J", "Left", {
        ("k", 1): [("L", "k", 1)],  # not a using join: the left key only
        ("x", 1): [("L", "x", 1)],
        ("y", 1): [("R", "y", 1)],
        ("k", 2): [("L", "k", 2)], ("x", 2): [("L", "x", 2)],
    })
    assert labelled_triples(store_path) == want
    assert ops(store_path)["J"]["inputs"] == sorted(ops(store_path)["J"]["inputs"]) and len(ops(store_path)["J"]["inputs"]) == 2


def test_union_and_union_by_name_by_position_and_name(spark: Any, store_path: Path) -> None:
    @provplug.step("U", output="Out")
    def together(a: Any, b: Any, c: Any) -> Any:
        return a.union(b).unionByName(c)

    capture(spark, store_path, {
        "A": ([(1, "a")], "k int, v string"),
        "B": ([(2, "b")], "key int, val string"),
        "C": ([("c", 3)], "v string, k int"),
    }, lambda f: together(f["A"], f["B"], f["C"]))
    want = expect("U", "Out", {
        ("k", 1): [("A", "k", 1)], ("v", 1): [("A", "v", 1)],
        ("k", 2): [("B", "key", 2)], ("v", 2): [("B", "val", 2)],
        ("k", 3): [("C", "k", "c")], ("v", 3): [("C", "v", "c")],
    })
    assert labelled_triples(store_path) == want

# -- keys and columns the analyzer casts (sides of different types) ---------------------
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
    matched = {y: {("k", y): [("W", "k", "a"), ("N", "k", y)], ("x", y): [("W", "x", "a")], ("y", y): [("N", "y", y)]}
               for y in ("p", "r")}
    inner = {c: ps for y in ("p", "r") for c, ps in matched[y].items()}
    want = expect("JT", "Inner", inner) | expect("JT", "InnerRev", inner)
    lone_w = {("k", None): [("W", "k", "b")], ("x", None): [("W", "x", "b")]}
    lone_n = {("k", "q"): [("N", "k", "q")], ("y", "q"): [("N", "y", "q")]}
    want |= expect("JT", "Left", {**inner, **lone_w})
    want |= expect("JT", "Right", {**inner, **lone_n})
    want |= expect("JT", "Full", {**inner, **lone_w, **lone_n})
    want |= expect("JT", "LeftRev", {**inner, **lone_n})
    want |= expect("JT", "FullRev", {**inner, **lone_n, **lone_w})
    want |= expect("JT", "TwoKeys", {
        **inner, **{("j", y): [("W", "k", "a"), ("N", "k", y)] for y in ("p", "r")},  # j was cast from k on both sides
    })
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
    want |= expect("GT", "Full", {
        **group_1,
        ("k", 2): [("W", "k", "b")], ("n", 2): [("W", "k", "b")],  # no right row: top is null
        ("k", 3): [("N", "k", "q")], ("n", 3): [("N", "k", "q")], ("top", 3): [("N", "y", "q")],
    })
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
    copied = {(c, v): [(t, "k" if c == "k" else ("x" if t == "W" else "y"), v)]
              for t, vs in rows.items() for v in vs for c in ("k", "x")}
    want = expect("UT", "WideFirst", copied) | expect("UT", "NarrowFirst", copied)
    want |= expect("UT", "ByName", {  # keyed by (x, y); the missing column is a null literal: no parent
        **{(c, (v, None)): [("W", c, v)] for v in rows["W"] for c in ("k", "x")},
        **{(c, (None, v)): [("N", c, v)] for v in rows["N"] for c in ("k", "y")},
    })
    members = {1: [("W", "k", "a"), ("N", "k", "p"), ("N", "k", "r")], 2: [("W", "k", "b")], 3: [("N", "k", "q")]}
    want |= expect("UT", "Grouped", {(c, k): m for k, m in members.items() for c in ("k", "n")})
    kept = {r["k"]: r["x"] for r in table_rows(store_path, "Dedup")}
    want |= expect("UT", "Dedup", {
        **{("k", k): m for k, m in members.items()},
        **{("x", k): [("W" if x in rows["W"] else "N", "x" if x in rows["W"] else "y", x)] for k, x in kept.items()},
    })
    keys = {"W": ("x",), "N": ("y",), "WideFirst": ("x",), "NarrowFirst": ("x",), "ByName": ("x", "y"),
            "Grouped": ("k",), "Dedup": ("k",)}
    assert labelled_triples(store_path, keys) == want


def test_distinct_merges_rows_and_drop_duplicates_keeps_one_row(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("D", output=("Dist", "Dedup"))
    def dedupe(d: Any, e: Any) -> Any:
        return d.distinct(), e.dropDuplicates(["c"])

    capture(spark, store_path, {
        "D": ([("x", 1), ("x", 1), ("y", 2)], "c string, v int"),
        "E": ([("x", 1), ("x", 2), ("y", 3)], "c string, v int"),
    }, lambda f: dedupe(f["D"], f["E"]))
    kept = {r["c"]: r["v"] for r in table_rows(store_path, "Dedup")}
    e_row = {1: 0, 2: 1, 3: 2}  # E's v -> its row position
    want = expect("D", "Dist", {
        ("c", "x"): [("D", "c", 0), ("D", "c", 1)], ("v", "x"): [("D", "v", 0), ("D", "v", 1)],
        ("c", "y"): [("D", "c", 2)], ("v", "y"): [("D", "v", 2)],
    })
    want |= expect("D", "Dedup", {
        ("c", "x"): [("E", "c", 0), ("E", "c", 1)],  # subset column: every merged row
        ("v", "x"): [("E", "v", e_row[kept["x"]])],  # other column: the kept row only
        ("c", "y"): [("E", "c", 2)], ("v", "y"): [("E", "v", 2)],
    })
    assert kept["x"] in (1, 2)
    assert labelled_triples(store_path, {"D": ("#row",), "E": ("#row",)}) == want


def test_explode_and_posexplode(spark: Any, store_path: Path) -> None:
    @provplug.step("X", output=("Exp", "Pos"))
    def flatten(df: Any) -> Any:
        return (
            df.select("k", "tag", F.explode("arr").alias("x")),
            df.select(F.posexplode("arr"), "k"),
        )

    capture(spark, store_path, {"E": ([(1, [10, 20], "a")], "k int, arr array<int>, tag string")},
            lambda f: flatten(f["E"]))
    want: set[Triple] = set()
    for x in (10, 20):
        want |= expect("X", "Exp", {("k", x): [("E", "k", 1)], ("tag", x): [("E", "tag", 1)], ("x", x): [("E", "arr", 1)]})
    for pos in (0, 1):
        want |= expect("X", "Pos", {("pos", pos): [("E", "arr", 1)], ("col", pos): [("E", "arr", 1)], ("k", pos): [("E", "k", 1)]})
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
        want |= expect("W", "Out", {
            ("g", key): [("W", "g", key)], ("t", key): [("W", "t", key)], ("v", key): [("W", "v", key)],
            ("run", key): [("W", "v", r) for r in frame],
            ("rk", key): [("W", "t", r) for r in frame],  # rank-like: the order-by cells
            ("prev", key): [("W", "v", (g, t - 1))] if t > 1 else [],
        })
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
        want |= expect("UDF", "Out", {
            ("k", k): [("T", "k", k)], ("s", k): [("T", "a", k), ("T", "b", k)], ("d", k): [("T", "a", k)],
        })
    assert labelled_triples(store_path) == want
    assert ops(store_path)["UDF"]["kind"] == "udf"
    assert sorted(r["s"] for r in table_rows(store_path, "Out")) == [110, 220]


def test_apply_in_pandas_and_map_in_pandas_are_black_boxes(spark: Any, store_path: Path) -> None:
    """Every output cell of a group function depends on every cell of its
    group; of a partition function, on every cell of the batches it had read
    (one batch here: the whole one-partition source)."""
    # Local functions: pickled by value for the Python workers.
    def _centred(pdf: pd.DataFrame) -> pd.DataFrame:
        return pdf.assign(age=pdf.age - pdf.age.mean())[["city", "age"]]

    def _total(key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame([(*key, int(pdf.age.sum()))])  # labels by position, as PySpark allows

    def _older(batches: Any) -> Any:
        for pdf in batches:
            yield pdf[pdf.age > 35][["city", "age"]]

    def _ny_only(pdf: pd.DataFrame) -> pd.DataFrame:  # no rows, and no columns either, for other groups
        return pdf[["city", "w"]] if (pdf.city == "NY").all() else pd.DataFrame()

    def _nothing(batches: Any) -> Any:
        for pdf in batches:
            yield pdf[pdf.age > 100][["city", "age"]]

    @provplug.step("BB", output=("Centred", "Totals", "Older", "NYOnly", "Nothing"))
    def opaque(df: Any) -> Any:
        return (
            df.groupBy("city").applyInPandas(_centred, schema="city string, age double"),
            df.groupBy("city").applyInPandas(_total, schema="city string, total long"),
            df.mapInPandas(_older, schema="city string, age int"),
            df.groupBy("city").applyInPandas(_ny_only, schema="city string, w int"),
            df.mapInPandas(_nothing, schema="city string, age int"),
        )

    capture(spark, store_path, {"S": S_ROWS}, lambda f: opaque(f["S"]))
    members = {"NY": (30, 40), "LA": (50,)}

    def received(ages: Sequence[int]) -> list[Label]:
        return [("S", c, a) for a in ages for c in ("city", "age", "w")]

    want = expect("BB", "Centred", {(col, key): received(members[key[0]]) for key in (("NY", -5.0), ("NY", 5.0), ("LA", 0.0))
                                    for col in ("city", "age")})
    want |= expect("BB", "Totals", {(col, city): received(ages) for city, ages in members.items() for col in ("city", "total")})
    want |= expect("BB", "Older", {(col, key): received((30, 40, 50)) for key in (("NY", 40), ("LA", 50)) for col in ("city", "age")})
    want |= expect("BB", "NYOnly", {(col, w): received((30, 40)) for w in (1, 2) for col in ("city", "w")})
    keys = {"S": ("age",), "Centred": ("city", "age"), "Older": ("city", "age"), "NYOnly": ("w",)}
    assert labelled_triples(store_path, keys) == want
    assert ops(store_path)["BB"]["kind"] == "udf"
    assert sorted(r["total"] for r in table_rows(store_path, "Totals")) == [50, 70]
    assert {t["name"]: t["rows"] for t in open_store(store_path).tables().to_pylist()}["Nothing"] == 0


def pandas_mean() -> Any:
    """A pandas aggregate UDF (its function local: pickled by value for the workers)."""
    def _mean(v):  # type: ignore[no-untyped-def]
        return float(v.mean())

    # Real (not string) hints: PySpark infers a grouped-aggregate pandas UDF from them.
    _mean.__annotations__ = {"v": pd.Series, "return": float}
    return F.pandas_udf(_mean, "double")


def test_pandas_aggregate_udf_per_group(spark: Any, store_path: Path) -> None:
    """Spark plans a pandas aggregate UDF only beside other pandas aggregate
    UDFs, so its groups' provenance goes through a group join; where its
    input cannot be recomputed, it fails clearly."""
    mean = pandas_mean()

    @provplug.step("PMean", output="Means")
    def means(df: Any) -> Any:
        return df.groupBy("city").agg(mean("age").alias("m"))

    capture(spark, store_path, {"S": S_ROWS}, lambda f: means(f["S"]))
    want = expect("PMean", "Means", {
        ("city", "NY"): [("S", "city", 30), ("S", "city", 40)], ("m", "NY"): [("S", "age", 30), ("S", "age", 40)],
        ("city", "LA"): [("S", "city", 50)], ("m", "LA"): [("S", "age", 50)],
    })
    assert labelled_triples(store_path, {"S": ("age",)}) == want

    @provplug.step("PMeanTop", output="TopMeans")
    def top_means(df: Any) -> Any:
        return df.orderBy("age").limit(2).groupBy("city").agg(mean("age").alias("m"))

    with pytest.raises(CaptureError, match="pandas aggregate UDF"):
        capture(spark, store_path, {"S": S_ROWS}, lambda f: top_means(f["S"]))


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


def test_record_lambdas_fail_clearly_and_commit_nothing(spark: Any, store_path: Path) -> None:
    @provplug.step("BB", output="Out")
    def opaque(df: Any) -> Any:
        return df.rdd.map(lambda r: (r.k, r.a)).toDF(["k", "a"])

    with pytest.raises(CaptureError, match="RDD"):
        capture(spark, store_path, {"T": T_ROWS}, lambda f: opaque(f["T"]))
    assert not store_path.exists()


def test_an_unregistered_driver_built_dataframe_is_named_as_such(spark: Any, store_path: Path) -> None:
    """A DataFrame made with createDataFrame (an RDD of driver-side rows in
    the plan) and not passed through run.source is not "an RDD lambda": the
    error says what it is and how to register it."""
    @provplug.step("Lookup", output="Out")
    def lookup(df: Any, regions: Any) -> Any:
        return df.join(regions, "k")

    with pytest.raises(CaptureError, match=r"built in the driver \(createDataFrame.*run\.source\(df, name\)") as error:
        capture(spark, store_path, {"T": T_ROWS},
                lambda f: lookup(f["T"], spark.createDataFrame([(1, "east")], "k int, region string")))
    assert "RDD (" not in str(error.value)
    assert not store_path.exists()


# -- steps with several inputs / a chained body / several outputs -------------------
def test_step_with_two_inputs(spark: Any, store_path: Path) -> None:
    @provplug.step("Two", output="Out")
    def pair(left: Any, right: Any) -> Any:
        return left.join(right, "k", "left").select("x", F.concat("x", "y").alias("xy"))

    capture(spark, store_path, {"L": L_ROWS, "R": R_ROWS}, lambda f: pair(f["L"], f["R"]))
    want = expect("Two", "Out", {
        ("x", "a"): [("L", "x", 1)], ("xy", "a"): [("L", "x", 1), ("R", "y", 1)],
        ("x", "b"): [("L", "x", 2)], ("xy", "b"): [("L", "x", 2)],  # y is null for k=2
    })
    assert labelled_triples(store_path) == want
    tables = {t["name"]: t["table_id"] for t in open_store(store_path).tables().to_pylist()}
    assert ops(store_path)["Two"]["inputs"] == sorted([tables["L"], tables["R"]])


def test_chained_filter_join_groupby_withcolumn(spark: Any, store_path: Path) -> None:
    @provplug.step("Chain", output="Out")
    def revenue(orders: Any, customers: Any) -> Any:
        return (
            orders.filter(F.col("amount") > 6)
            .join(customers, "cust")
            .groupBy("region")
            .agg(F.sum("amount").alias("total"))
            .withColumn("double", F.col("total") * 2)
        )

    orders = ([(1, "c1", 10), (2, "c1", 20), (3, "c2", 5), (4, "c3", 7)], "oid int, cust string, amount int")
    customers = ([("c1", "EU"), ("c2", "US")], "cust string, region string")
    # A DataFrame a step returns reads the run's staged rows: use it inside the run.
    result = capture(spark, store_path, {"O": orders, "C": customers}, lambda f: revenue(f["O"], f["C"]).collect())
    assert [r.asDict() for r in result] == [{"region": "EU", "total": 30, "double": 60}]
    want = expect("Chain", "Out", {
        ("region", "EU"): [("C", "region", "c1")],
        ("total", "EU"): [("O", "amount", 1), ("O", "amount", 2)],
        ("double", "EU"): [("O", "amount", 1), ("O", "amount", 2)],
    })
    assert labelled_triples(store_path) == want
    op = ops(store_path)["Chain"]
    assert {"Filter", "Join", "Aggregate", "Project"} <= set(op["operations"])
    assert op["triples"] == 5 and op["started"] <= op["finished"]


def test_step_with_two_outputs_and_two_chained_steps(spark: Any, store_path: Path) -> None:
    @provplug.step("Split", output=("Big", "Small"))
    def split(df: Any) -> Any:
        return df.filter(F.col("a") >= 15), df.filter(F.col("a") < 15)

    @provplug.step("Inc", output="Inc")
    def inc(df: Any) -> Any:
        return df.select("k", (F.col("b") + 1).alias("b1"))

    def body(f: dict[str, Any]) -> Any:
        big, _small = split(f["T"])
        assert big.columns == ["k", "a", "b"]  # no visible row-number column
        return inc(big)

    capture(spark, store_path, {"T": T_ROWS}, body)
    want = expect("Split", "Big", {(c, 2): [("T", c, 2)] for c in "kab"})
    want |= expect("Split", "Small", {(c, 1): [("T", c, 1)] for c in "kab"})
    want |= expect("Inc", "Inc", {("k", 2): [("Big", "k", 2)], ("b1", 2): [("Big", "b", 2)]})
    assert labelled_triples(store_path) == want
    tables = {t["name"]: t["table_id"] for t in open_store(store_path).tables().to_pylist()}
    assert ops(store_path)["Split"]["outputs"] == [tables["Big"], tables["Small"]]
    assert ops(store_path)["Inc"]["inputs"] == [tables["Big"]]


# -- run-level behaviour ----------------------------------------------------------------
def test_failing_step_commits_nothing(spark: Any, store_path: Path) -> None:
    from conftest import snapshot

    @provplug.step("Ok", output="Ok")
    def ok(df: Any) -> Any:
        return df.select("k")

    @provplug.step("Boom", output="Never")
    def boom(df: Any) -> Any:
        df.select("k").count()  # real Spark work before the failure
        raise ValueError("step failed")

    capture(spark, store_path, {"T": T_ROWS}, lambda f: ok(f["T"]))
    before = snapshot(store_path)
    with pytest.raises(ValueError, match="step failed"):
        capture(spark, store_path, {"T": T_ROWS}, lambda f: boom(ok(f["T"])))
    assert snapshot(store_path) == before
    assert len(open_store(store_path).runs()) == 1


def test_steps_run_unchanged_outside_a_capture(spark: Any) -> None:
    @provplug.step("R1", output="Person2")
    def adults(df: Any) -> Any:
        return df.filter(F.col("Age") >= 25)

    people = spark.createDataFrame([("Steve", 30), ("Mary", 20)], "Name string, Age int")
    out = adults(people)
    assert out.columns == ["Name", "Age"]
    assert [r.Name for r in out.collect()] == ["Steve"]


def test_lifecycle_hooks_fire_for_the_run_and_every_step(spark: Any, store_path: Path) -> None:
    from provplug.plugins import get_plugins

    events: list[tuple[str, str]] = []

    class Observer:
        @provplug.hookimpl
        def provplug_run_started(self, run: Any) -> None:
            events.append(("run_started", run.engine))

        @provplug.hookimpl
        def provplug_step_started(self, run: Any, step: Any) -> None:
            events.append(("step_started", step.name))

        @provplug.hookimpl
        def provplug_step_finished(self, run: Any, step: Any, op: Any) -> None:
            events.append(("step_finished", f"{step.name}:{op.kind}:{op.triples}"))

        @provplug.hookimpl
        def provplug_step_failed(self, run: Any, step: Any, error: BaseException) -> None:
            events.append(("step_failed", step.name))

        @provplug.hookimpl
        def provplug_run_finished(self, run: Any, error: BaseException | None) -> None:
            events.append(("run_finished", run.status))

    get_plugins().pm.register(Observer())

    @provplug.step("A", output="A")
    def a(df: Any) -> Any:
        return df.select("k", "a")

    @provplug.step("B", output="B")
    def b(df: Any) -> Any:
        return df.select("k")

    @provplug.step("Bad", output="Bad")
    def bad(df: Any) -> Any:
        return df.rdd.toDF()

    capture(spark, store_path, {"T": T_ROWS}, lambda f: b(a(f["T"])))
    # Step outputs are written in the background: the triple counts come with the commit.
    assert events == [
        ("run_started", "spark"),
        ("step_started", "A"), ("step_finished", "A:builtin:None"),
        ("step_started", "B"), ("step_finished", "B:builtin:None"),
        ("run_finished", "committed"),
    ]
    assert {n: o["triples"] for n, o in ops(store_path).items()} == {"A": 4, "B": 2}
    assert all(o["started"] <= o["finished"] for o in ops(store_path).values())
    events.clear()
    with pytest.raises(CaptureError):
        capture(spark, store_path, {"T": T_ROWS}, lambda f: bad(f["T"]))
    assert events == [("run_started", "spark"), ("step_started", "Bad"), ("step_failed", "Bad"), ("run_finished", "failed")]


def test_store_rows_off_keeps_ids_only(spark: Any, store_path: Path) -> None:
    @provplug.step("F", output="Out")
    def big(df: Any) -> Any:
        return df.where(F.col("b") > 150).select("k", "a")

    capture(spark, store_path, {"T": T_ROWS}, lambda f: big(f["T"]).count(), store_rows=False)
    s = open_store(store_path)
    assert s.run_paths("rows") == []
    assert {t["name"]: (t["stored_rows"], t["rows"]) for t in s.tables().to_pylist()} == {"T": (False, 2), "Out": (False, 1)}
    assert s.triples().count_rows() == 2


# -- aggregate provenance by group join (the fast path) and its fallbacks -------------
def test_aggregate_through_union_and_using_join_keeps_exact_group_provenance(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("UA", output=("Both", "Joined"))
    def mixed(s: Any, t: Any, r: Any) -> Any:
        agg = s.groupBy("city").agg(F.sum("age").alias("total"))
        # T's NY row has the key of an aggregate group but is not part of it.
        return agg.unionByName(t.select("city", "total")), agg.join(r, "city")

    capture(spark, store_path, {
        "S": S_ROWS,
        "T": ([("NY", 99)], "city string, total bigint"),
        "R": ([("NY", "east")], "city string, region string"),
    }, lambda f: mixed(f["S"], f["T"], f["R"]))
    want = expect("UA", "Both", {
        ("city", 70): [("S", "city", 30), ("S", "city", 40)], ("total", 70): [("S", "age", 30), ("S", "age", 40)],
        ("city", 50): [("S", "city", 50)], ("total", 50): [("S", "age", 50)],
        ("city", 99): [("T", "city", 99)], ("total", 99): [("T", "total", 99)],
    })
    want |= expect("UA", "Joined", {
        # merged using key: the group's key cells and R's key cell
        ("city", "NY"): [("S", "city", 30), ("S", "city", 40), ("R", "city", "NY")],
        ("total", "NY"): [("S", "age", 30), ("S", "age", 40)],
        ("region", "NY"): [("R", "region", "NY")],
    })
    assert labelled_triples(store_path, {"S": ("age",), "T": ("total",), "Both": ("total",)}) == want


def test_aggregate_over_limit_and_null_expression_keys(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("AL", output=("Top2", "Upper"))
    def groups(s: Any, x: Any) -> Any:
        top2 = s.orderBy("age").limit(2).groupBy("city").agg(F.count("*").alias("n"))  # not recomputable: arrays
        upper = x.groupBy(F.upper("c").alias("cu")).agg(F.sum("v").alias("s"))  # null group joins null-safely
        return top2, upper

    capture(spark, store_path, {
        "S": S_ROWS,
        "X": ([(None, 1), (None, 2), ("a", 5)], "c string, v int"),
    }, lambda f: groups(f["S"], f["X"]))
    want = expect("AL", "Top2", {
        ("city", "NY"): [("S", "city", 30), ("S", "city", 40)], ("n", "NY"): [("S", "city", 30), ("S", "city", 40)],
    })
    want |= expect("AL", "Upper", {
        ("cu", 3): [("X", "c", 1), ("X", "c", 2)], ("s", 3): [("X", "v", 1), ("X", "v", 2)],
        ("cu", 5): [("X", "c", 5)], ("s", 5): [("X", "v", 5)],
    })
    assert labelled_triples(store_path, {"S": ("age",), "X": ("v",), "Upper": ("s",)}) == want


def test_aggregate_over_aggregate_and_semi_join_in_one_step(spark: Any, store_path: Path) -> None:
    """Member lists of lists (a second groupBy over the first one's groups)
    and a left-semi join, whose right side's cells are not parents."""
    @provplug.step("Nested", output=("PerCity", "Matched"))
    def nested(s: Any, left: Any, right: Any) -> Any:
        per_city = s.groupBy("city", "w").agg(F.sum("age").alias("age")).groupBy("city").agg(F.max("age").alias("top"))
        return per_city, left.join(right, "k", "left_semi")

    capture(spark, store_path, {"S": S_ROWS, "L": L_ROWS, "R": R_ROWS}, lambda f: nested(f["S"], f["L"], f["R"]))
    want = expect("Nested", "PerCity", {
        ("city", "NY"): [("S", "city", 30), ("S", "city", 40)], ("top", "NY"): [("S", "age", 30), ("S", "age", 40)],
        ("city", "LA"): [("S", "city", 50)], ("top", "LA"): [("S", "age", 50)],
    })
    want |= expect("Nested", "Matched", {("k", 1): [("L", "k", 1)], ("x", 1): [("L", "x", 1)]})
    assert labelled_triples(store_path, {"S": ("age",), "L": ("k",)}) == want


def test_a_pending_output_answers_schema_questions_while_it_is_written(spark: Any, store_path: Path) -> None:
    """``.columns``/``.schema`` of a step output wait for its write outside
    PySpark's cached_property lock (one lock for all DataFrames before Python
    3.12), so the writer thread's own schema lookups do not deadlock."""
    import threading

    seen: list[Any] = []

    def body(f: dict[str, Any]) -> None:
        counts = count_per_key(f["T"])
        seen.extend([counts.columns, counts.schema.simpleString(), counts.count()])

    worker = threading.Thread(target=capture, daemon=True,
                              args=(spark, store_path, {"T": ([(1, "a"), (2, "b"), (2, "c")], "k int, v string")}, body))
    worker.start()
    worker.join(timeout=300)
    assert not worker.is_alive(), "capture deadlocked"
    assert seen == [["k", "n"], "struct<k:int,n:bigint>", 2]


def test_a_global_aggregate_over_a_per_query_value_collects_its_members(spark: Any, store_path: Path, mocker: Any) -> None:
    """current_timestamp() is fixed once per query: a group join's second
    query could select other rows, so such an aggregate lists its members."""
    from provplug_spark import session as spark_session

    group_writes = mocker.spy(spark_session.SparkCaptureSession, "_write_groups")

    @provplug.step("Past", output="PastCount")
    def past(df: Any) -> Any:
        return df.filter(F.col("at") < F.current_timestamp()).agg(F.sum("k").alias("s"))

    rows = ([(1, dt.datetime(2020, 1, 1)), (2, dt.datetime(2021, 1, 1)), (4, dt.datetime(2999, 1, 1))], "k int, at timestamp")
    capture(spark, store_path, {"T": rows}, lambda f: past(f["T"]))
    assert labelled_triples(store_path) == expect("Past", "PastCount", {("s", 3): [("T", "k", 1), ("T", "k", 2)]})
    assert group_writes.call_count == 0


def test_a_failed_output_write_surfaces_where_the_output_is_used(spark: Any, store_path: Path, mocker: Any) -> None:
    """A step's output is written in the background: its DataFrame raises the
    write's error when first used, the run fails and nothing is committed."""
    from conftest import snapshot
    from provplug_spark import session as spark_session

    rows = {"T": ([(1, "a"), (2, "b")], "k int, v string")}
    capture(spark, store_path, rows, lambda f: count_per_key(f["T"]))
    before = snapshot(store_path)
    real = spark_session.SparkCaptureSession._run_writer

    def failing(self: Any, job: Any, target: Any) -> Any:
        if target.op_id != 0:  # a step output's write (a source's has no op)
            raise OSError("disk full")
        return real(self, job, target)

    mocker.patch.object(spark_session.SparkCaptureSession, "_run_writer", failing)
    # raised where the output is used, and again when the capture block ends
    with pytest.raises(OSError, match="disk full"), provplug.capture(spark, store=store_path) as run:
        counts = count_per_key(run.source(spark.createDataFrame(*rows["T"]), "T"))  # returns at once
        with pytest.raises(OSError, match="disk full"):
            counts.count()
    assert snapshot(store_path) == before


# -- how rows and triples are written -----------------------------------------------
def test_parquet_source_is_stored_as_copies_numbered_by_position(spark: Any, store_path: Path, tmp_path: Path) -> None:
    """A source read from Parquet files is copied, not rewritten: its row
    numbers are file offset + position, in the triples, the stored rows and
    the answers of lineage queries alike (an empty file takes no number)."""
    parts = [[("ann", "NY", 30), ("bob", "LA", 41)], [], [("cid", "NY", 52), ("dan", "SF", 23), ("eve", "LA", 35)]]
    folder = tmp_path / "people"
    folder.mkdir()
    for i, rows in enumerate(parts):
        table = pa.Table.from_pylist([dict(zip(("name", "city", "age"), r, strict=True)) for r in rows],
                                     schema=pa.schema([("name", pa.string()), ("city", pa.string()), ("age", pa.int64())]))
        pq.write_table(table, folder / f"part-{i}.parquet")

    @provplug.step("Older", output="OldByCity")
    def older(people: Any) -> Any:
        return people.filter(F.col("age") > 25).groupBy("city").agg(F.max("age").alias("oldest"))

    with provplug.capture(spark, store=store_path) as run:
        older(run.source(spark.read.parquet(str(folder)), "People"))

    people = next(t for t in open_store(store_path).tables().to_pylist() if t["name"] == "People")
    copies = sorted(p.name for p in Path(open_store(store_path).run_paths("rows")[0], str(people["table_id"])).iterdir())
    assert copies == ["pos-000000000000.parquet", "pos-000000000002.parquet"]
    assert people["rows"] == 5
    positions = {r["name"]: r[schema.ROW_COLUMN] for r in stored_rows(store_path)[people["table_id"]]}
    assert positions == {"ann": 0, "bob": 1, "cid": 2, "dan": 3, "eve": 4}
    want = expect("Older", "OldByCity", {
        ("city", "NY"): [("People", "city", "ann"), ("People", "city", "cid")],
        ("oldest", "NY"): [("People", "age", "ann"), ("People", "age", "cid")],
        ("city", "LA"): [("People", "city", "bob"), ("People", "city", "eve")],
        ("oldest", "LA"): [("People", "age", "bob"), ("People", "age", "eve")],
    })
    assert labelled_triples(store_path, {"People": ("name",)}) == want
    from provplug.index import build_index

    build_index(store_path, engine="local")
    answer = provplug.open(store_path).lineage(table="OldByCity", column="oldest", where="city = 'NY'").to_dict()
    shown = {(v["table"], v["column"], v["value"]) for v in answer["lineage"]}
    assert shown == {("People", "age", 30), ("People", "age", 52)}


def test_parquet_source_read_with_fewer_columns_is_written_not_copied(spark: Any, store_path: Path, tmp_path: Path) -> None:
    pq.write_table(pa.table({"name": ["ann", "bob"], "age": [30, 41], "secret": ["x", "y"]}), tmp_path / "p.parquet")

    @provplug.step("Ages", output="AgeOnly")
    def ages(people: Any) -> Any:
        return people.select("age")

    with provplug.capture(spark, store=store_path) as run:
        ages(run.source(spark.read.schema("name string, age long").parquet(str(tmp_path / "p.parquet")), "People"))
    people = next(t for t in open_store(store_path).tables().to_pylist() if t["name"] == "People")
    folder = Path(open_store(store_path).run_paths("rows")[0], str(people["table_id"]))
    assert not any(p.name.startswith(schema.POSITIONAL_PREFIX) for p in folder.iterdir())
    assert sorted(r["name"] for r in table_rows(store_path, "People")) == ["ann", "bob"]
    assert all(set(r) == {"name", "age"} for r in table_rows(store_path, "People"))
    assert labelled_triples(store_path, {"People": ("name",), "AgeOnly": ("age",)}) == expect("Ages", "AgeOnly", {
        ("age", 30): [("People", "age", "ann")], ("age", 41): [("People", "age", "bob")]})


def test_rows_and_triples_keep_only_the_files_of_used_task_attempts(spark: Any, store_path: Path, mocker: Any) -> None:
    """Writer tasks name files by partition and attempt; a file no used
    attempt reported (a failed or duplicate attempt's) is deleted."""
    from provplug_spark import session as spark_session

    strays: list[Path] = []
    real = spark_session.SparkCaptureSession._run_writer

    def with_stray(self: Any, job: Any, target: Any) -> Any:
        for folder in (target.rows_dir, target.triples_dir):
            if folder is not None:
                stray = Path(folder, target.file_name(0, 7))
                stray.write_bytes(b"half a file from a lost attempt")
                strays.append(stray)
        return real(self, job, target)

    mocker.patch.object(spark_session.SparkCaptureSession, "_run_writer", with_stray)
    capture(spark, store_path, {"T": ([(1, "a"), (2, "b"), (2, "c")], "k int, v string")},
            lambda f: count_per_key(f["T"]))
    assert strays and not any(p.exists() for p in strays)
    run_dir = Path(open_store(store_path).run_paths("rows")[0]).parent
    assert not [p for p in run_dir.rglob("*-a7.parquet")]
    assert ops(store_path)["Count"]["triples"] == len(open_store(store_path).triples().to_table())


@provplug.step("Count", output="Counts")
def count_per_key(t: Any) -> Any:
    return t.groupBy("k").agg(F.count("v").alias("n"))


@provplug.step("Total", output="Totals")
def count_all(t: Any) -> Any:
    return t.agg(F.count("v").alias("n"))


def test_a_failed_background_triple_write_fails_the_run(spark: Any, store_path: Path, mocker: Any) -> None:
    """Group-join triples (a global aggregate's) are written in the background;
    if that write fails, the run fails at the end of the capture block and
    nothing is committed."""
    from conftest import snapshot
    from provplug_spark import session as spark_session

    rows = {"T": ([(1, "a"), (2, "b")], "k int, v string")}
    capture(spark, store_path, rows, lambda f: count_all(f["T"]))
    assert labelled_triples(store_path) == expect("Total", "Totals", {("n", 2): [("T", "v", 1), ("T", "v", 2)]})
    before = snapshot(store_path)
    mocker.patch.object(spark_session.SparkCaptureSession, "_write_groups", side_effect=RuntimeError("disk full"))
    with pytest.raises(RuntimeError, match="disk full"):
        capture(spark, store_path, rows, lambda f: count_all(f["T"]))
    assert snapshot(store_path) == before
    assert len(open_store(store_path).runs()) == 1
