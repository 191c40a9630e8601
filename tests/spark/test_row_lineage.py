"""Row lineage at capture (docs/capture-semantics.md "Row lineage"): per output row its members (input
rows used jointly) and per op its rules, against expectations derived by
hand on tiny tables.

Rows are labelled by a key (the table's first column unless ``keys`` says
otherwise, as in the triple oracle), so expectations never depend on the
row numbers Spark assigns; a row's members compare as a set of sets of
(input table, input row key, optional), and rows as a multiset (an inner
join may output equal rows).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import provplug
from provplug.ingest.rowlineage import lineage_of, rules_of
from provplug.rowrules import ColumnRule, OpRowRules
from provplug.store.open import open_store
from provplug.testing import StoreContents, keyed

from .helpers import L_ROWS, S_ROWS, F, capture

Member = frozenset[tuple[str, Any, bool]]
Rows = collections.Counter  # of (output row key, frozenset of members)

R3_ROWS = ([(2, "p"), (3, "q"), (3, "qq"), (4, "z")], "k int, y string")  # vs L3: k=1 no match, 2 one, 3 two
L3_ROWS = ([(1, "a"), (2, "b"), (3, "c")], "k int, x string")


def lineage(store: Path, op: str, keys: Mapping[str, Sequence[str]] | None = None) -> Rows:
    """The records of op ``op``: per output row, its key and its members."""
    stored = StoreContents(store)
    key = keyed(keys)
    op_id = stored.ops[op]["op_id"]
    dataset = lineage_of(open_store(store))
    records = dataset.to_table().to_pylist() if dataset is not None else []
    members: dict[int, dict[int, set[tuple[str, Any, bool]]]] = collections.defaultdict(
        lambda: collections.defaultdict(set)
    )
    out_table = None
    for r in records:
        if r["op"] != op_id:
            continue
        out_table = r["out_table"]
        t = stored.by_id[r["in_table"]]
        members[r["out_row"]][r["member"]].add(
            (t["name"], key(t, r["in_row"], stored.rows_by_id[r["in_table"]][r["in_row"]]), r["optional"])
        )
    if out_table is None:
        return collections.Counter()
    t = stored.by_id[out_table]
    rows = stored.rows_by_id[out_table]
    assert set(members) <= set(rows), "records name only stored output rows"
    return collections.Counter(
        (key(t, n, rows[n]), frozenset(frozenset(m) for m in members[n].values())) for n in rows if n in members
    )


def expect(*rows: tuple[Any, Iterable[Iterable[tuple[str, Any] | tuple[str, Any, bool]]]]) -> Rows:
    """Rows ``(key, members)``, a member as (table, key[, optional]) input rows."""
    return collections.Counter(
        (key, frozenset(frozenset((i[0], i[1], bool(i[2]) if len(i) > 2 else False) for i in m) for m in members))
        for key, members in rows
    )


def rules(store: Path, table: str) -> OpRowRules:
    stored = StoreContents(store)
    return rules_of(open_store(store))[stored.tables[table]["table_id"]]


def tid(store: Path, name: str) -> int:
    return int(StoreContents(store).tables[name]["table_id"])


def copy(store: Path, table: str, column: str) -> ColumnRule:
    return ColumnRule("copy", tid(store, table), column)


def aggregate(store: Path, function: str, table: str | None = None, column: str | None = None) -> ColumnRule:
    return ColumnRule("aggregate", tid(store, table) if table else None, column, function)


def computed(store: Path, *cells: tuple[str, str]) -> ColumnRule:
    return ColumnRule("computed", references=tuple(sorted((tid(store, t), c) for t, c in cells)))


def deciding(store: Path, **columns: Sequence[str]) -> dict[int, tuple[str, ...]]:
    return {tid(store, t): tuple(sorted(cs)) for t, cs in columns.items()}


# -- row-wise ------------------------------------------------------------------------------
def test_filter_keeps_each_row_with_its_one_input_row(spark: Any, store_path: Path) -> None:
    @provplug.step("Old", output="Olds")
    def olds(s: Any) -> Any:
        return s.filter(F.col("age") >= 40)

    capture(spark, store_path, {"S": S_ROWS}, lambda f: olds(f["S"]))
    keys = {"S": ("age",), "Olds": ("age",)}
    assert lineage(store_path, "Old", keys) == expect((40, [[("S", 40)]]), (50, [[("S", 50)]]))
    got = rules(store_path, "Olds")
    assert (got.existence, got.deciding, got.opaque_inputs) == ("exact", deciding(store_path, S=["age"]), ())
    assert got.columns == {c: copy(store_path, "S", c) for c in ("city", "age", "w")}


def test_projection_rules_copy_computed_and_literal(spark: Any, store_path: Path) -> None:
    @provplug.step("Proj", output="P")
    def proj(s: Any) -> Any:
        return s.select(
            F.col("w").alias("id"),
            "city",
            (F.col("age") + F.col("w")).alias("sum"),
            F.col("age").cast("string").alias("text"),
            F.lit(1).alias("one"),
        ).withColumn("town", F.col("city"))

    capture(spark, store_path, {"S": S_ROWS}, lambda f: proj(f["S"]))
    assert lineage(store_path, "Proj", {"S": ("w",)}) == expect(*[(w, [[("S", w)]]) for w in (1, 2, 3)])
    got = rules(store_path, "P")
    assert got.existence == "exact" and got.deciding == {}
    assert got.columns == {
        "id": copy(store_path, "S", "w"),
        "city": copy(store_path, "S", "city"),
        "sum": computed(store_path, ("S", "age"), ("S", "w")),
        "text": computed(store_path, ("S", "age")),
        "one": ColumnRule("literal"),
        "town": copy(store_path, "S", "city"),
    }


def test_explode_rows_need_their_row_and_the_array_decides(spark: Any, store_path: Path) -> None:
    @provplug.step("Explode", output="E")
    def explode(a: Any) -> Any:
        return a.select("id", F.explode("items").alias("item"))

    capture(
        spark, store_path, {"A": ([(1, ["x", "y"]), (2, [])], "id int, items array<string>")}, lambda f: explode(f["A"])
    )
    assert lineage(store_path, "Explode", {"E": ("id", "item")}) == expect(
        ((1, "x"), [[("A", 1)]]), ((1, "y"), [[("A", 1)]])
    )
    got = rules(store_path, "E")
    assert got.existence == "exact" and got.deciding == deciding(store_path, A=["items"])
    assert got.columns == {"id": copy(store_path, "A", "id"), "item": computed(store_path, ("A", "items"))}


def test_udf_is_computed_and_window_values_make_the_frame_opaque(spark: Any, store_path: Path) -> None:
    from pyspark.sql.window import Window

    twice = F.udf(lambda v: v * 2, "int")

    @provplug.step("Rank", output="Ranked")
    def ranked(s: Any) -> Any:
        w = Window.partitionBy("city").orderBy("age")
        return s.select("w", twice("age").alias("twice"), F.row_number().over(w).alias("rn"))

    capture(spark, store_path, {"S": S_ROWS}, lambda f: ranked(f["S"]))
    assert lineage(store_path, "Rank", {"S": ("w",)}) == expect(*[(w, [[("S", w)]]) for w in (1, 2, 3)])
    got = rules(store_path, "Ranked")
    # Existence follows the row; a window value changes when its frame loses a row: S's deletions are opaque.
    assert (got.existence, got.opaque_inputs) == ("exact", (tid(store_path, "S"),))
    assert got.columns["twice"] == computed(store_path, ("S", "age"))
    assert got.columns["rn"] == computed(store_path, ("S", "age"))  # rank-like: the order-by cells


def test_limit_and_black_box_are_opaque(spark: Any, store_path: Path) -> None:
    def older(pdf: pd.DataFrame) -> pd.DataFrame:
        return pdf[pdf.age > 30]

    @provplug.step("Top", output="Tops")
    def top(s: Any) -> Any:
        return s.orderBy("age").limit(2)

    @provplug.step("Box", output="Boxed")
    def box(s: Any) -> Any:
        return s.groupBy("city").applyInPandas(older, "city string, age int, w int")

    capture(spark, store_path, {"S": S_ROWS}, lambda f: (top(f["S"]), box(f["S"])))
    got = rules(store_path, "Tops")
    assert (got.existence, got.reason) == ("opaque", "limit")
    # Still recorded: which input row each row came from.
    assert lineage(store_path, "Top", {"S": ("age",), "Tops": ("age",)}) == expect(
        (30, [[("S", 30)]]), (40, [[("S", 40)]])
    )
    boxed = rules(store_path, "Boxed")
    assert (boxed.existence, boxed.reason) == ("opaque", "applyInPandas")
    assert lineage(store_path, "Box") == collections.Counter()


# -- joins ---------------------------------------------------------------------------------
def test_inner_join_needs_both_rows_even_when_one_side_is_not_selected(spark: Any, store_path: Path) -> None:
    @provplug.step("Match", output="Matched")
    def matched(left: Any, right: Any) -> Any:
        return left.join(right, "k").select("x")

    capture(spark, store_path, {"L": L3_ROWS, "R": R3_ROWS}, lambda f: matched(f["L"], f["R"]))
    assert lineage(store_path, "Match") == expect(
        ("b", [[("L", 2), ("R", 2)]]), ("c", [[("L", 3), ("R", 3)]]), ("c", [[("L", 3), ("R", 3)]])
    )
    # The two c rows: one with each of R's k=3 rows.
    rows = lineage(store_path, "Match", {"R": ("y",)})
    assert rows == expect(
        ("b", [[("L", 2), ("R", "p")]]), ("c", [[("L", 3), ("R", "q")]]), ("c", [[("L", 3), ("R", "qq")]])
    )
    got = rules(store_path, "Matched")
    assert got.existence == "exact" and got.deciding == deciding(store_path, L=["k"], R=["k"])
    assert got.columns == {"x": copy(store_path, "L", "x")}


@pytest.mark.parametrize(
    ("how", "want"),
    [
        (
            "left",
            [
                (("a", None), [[("L", "a")]]),
                (("b", "p"), [[("L", "b"), ("R", "p", True)]]),
                (("c", "q"), [[("L", "c"), ("R", "q", True)]]),
                (("c", "qq"), [[("L", "c"), ("R", "qq", True)]]),
            ],
        ),
        (
            "right",
            [
                (("b", "p"), [[("L", "b", True), ("R", "p")]]),
                (("c", "q"), [[("L", "c", True), ("R", "q")]]),
                (("c", "qq"), [[("L", "c", True), ("R", "qq")]]),
                ((None, "z"), [[("R", "z")]]),
            ],
        ),
        (
            "full",
            [
                (("a", None), [[("L", "a", True)]]),
                (("b", "p"), [[("L", "b", True), ("R", "p", True)]]),
                (("c", "q"), [[("L", "c", True), ("R", "q", True)]]),
                (("c", "qq"), [[("L", "c", True), ("R", "qq", True)]]),
                ((None, "z"), [[("R", "z", True)]]),
            ],
        ),
    ],
)
def test_outer_joins_mark_the_padded_side_optional(spark: Any, store_path: Path, how: str, want: list[Any]) -> None:
    @provplug.step("Outer", output="O")
    def outer(left: Any, right: Any) -> Any:
        return left.join(right, "k", how).select("x", "y")

    capture(spark, store_path, {"L": L3_ROWS, "R": R3_ROWS}, lambda f: outer(f["L"], f["R"]))
    assert lineage(store_path, "Outer", {"L": ("x",), "R": ("y",), "O": ("x", "y")}) == expect(*want)
    got = rules(store_path, "O")
    assert got.existence == "exact" and got.deciding == deciding(store_path, L=["k"], R=["k"])
    assert got.columns == {"x": copy(store_path, "L", "x"), "y": copy(store_path, "R", "y")}


def test_semi_join_right_side_is_opaque_and_anti_join_is_opaque(spark: Any, store_path: Path) -> None:
    @provplug.step("Semi", output="Semis")
    def semi(left: Any, right: Any) -> Any:
        return left.join(right, "k", "left_semi")

    @provplug.step("Anti", output="Antis")
    def anti(left: Any, right: Any) -> Any:
        return left.join(right, "k", "left_anti")

    capture(spark, store_path, {"L": L3_ROWS, "R": R3_ROWS}, lambda f: (semi(f["L"], f["R"]), anti(f["L"], f["R"])))
    assert lineage(store_path, "Semi") == expect((2, [[("L", 2)]]), (3, [[("L", 3)]]))
    got = rules(store_path, "Semis")
    assert (got.existence, got.opaque_inputs) == ("exact", (tid(store_path, "R"),))
    assert got.deciding == deciding(store_path, L=["k"], R=["k"])
    anti_rules = rules(store_path, "Antis")
    assert (anti_rules.existence, anti_rules.reason) == ("opaque", "anti join")
    assert lineage(store_path, "Anti") == expect((1, [[("L", 1)]]))


def test_a_filter_over_the_padded_side_is_opaque(spark: Any, store_path: Path) -> None:
    @provplug.step("Unmatched", output="U")
    def unmatched(left: Any, right: Any) -> Any:  # an anti join written as a left join
        return left.join(right, "k", "left").filter(F.col("y").isNull()).select("x")

    capture(spark, store_path, {"L": L3_ROWS, "R": R3_ROWS}, lambda f: unmatched(f["L"], f["R"]))
    got = rules(store_path, "U")
    assert got.existence == "opaque" and "null-padded side" in got.reason


def test_union_rows_need_their_branch_row(spark: Any, store_path: Path) -> None:
    @provplug.step("Both", output="Keys")
    def both(left: Any, right: Any) -> Any:
        return left.select("k").union(right.select("k"))

    @provplug.step("Split", output="Parts")
    def split(s: Any) -> Any:
        return s.filter(F.col("age") < 35).unionByName(s.filter(F.col("age") > 45))

    capture(
        spark,
        store_path,
        {"L": L_ROWS, "R": ([(1, "p"), (3, "q")], "k int, y string"), "S": S_ROWS},
        lambda f: (both(f["L"], f["R"]), split(f["S"])),
    )
    assert lineage(store_path, "Both", {"Keys": ("k",)}) == expect(
        (1, [[("L", 1)]]), (2, [[("L", 2)]]), (1, [[("R", 1)]]), (3, [[("R", 3)]])
    )
    # Each branch copies k from its own table: a member copies from the one it holds.
    per_table = ColumnRule("copy", references=tuple(sorted([(tid(store_path, "L"), "k"), (tid(store_path, "R"), "k")])))
    assert rules(store_path, "Keys").columns == {"k": per_table}
    assert lineage(store_path, "Split", {"S": ("age",), "Parts": ("age",)}) == expect(
        (30, [[("S", 30)]]), (50, [[("S", 50)]])
    )
    got = rules(store_path, "Parts")
    assert got.columns["age"] == copy(store_path, "S", "age")  # both branches copy S.age
    assert got.deciding == deciding(store_path, S=["age"])


# -- row-merging ---------------------------------------------------------------------------
AGG_ROWS = ([("NY", 30, 1), ("NY", 40, 2), ("NY", 40, 3), ("LA", 50, 4)], "city string, age int, w int")


def test_group_aggregates_have_one_member_per_group_row(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("Stats", output="Stat")
    def stats(s: Any) -> Any:
        return s.groupBy("city").agg(
            F.count("*").alias("n"),
            F.count("age").alias("c"),
            F.countDistinct("age").alias("cd"),
            F.sum("age").alias("total"),
            F.avg("age").alias("mean"),
            F.min("age").alias("lo"),
            F.max("w").alias("hi"),
            F.sum(F.col("age") * 2).alias("double"),
        )

    capture(spark, store_path, {"S": AGG_ROWS}, lambda f: stats(f["S"]))
    assert lineage(store_path, "Stats", {"S": ("w",)}) == expect(
        ("NY", [[("S", 1)], [("S", 2)], [("S", 3)]]), ("LA", [[("S", 4)]])
    )
    got = rules(store_path, "Stat")
    assert (got.existence, got.deciding) == ("exact", deciding(store_path, S=["city"]))
    assert got.columns == {
        "city": copy(store_path, "S", "city"),
        "n": aggregate(store_path, "count_star"),
        "c": aggregate(store_path, "count", "S", "age"),
        "cd": aggregate(store_path, "count_distinct", "S", "age"),
        "total": aggregate(store_path, "sum", "S", "age"),
        "mean": aggregate(store_path, "avg", "S", "age"),
        "lo": aggregate(store_path, "min", "S", "age"),
        "hi": aggregate(store_path, "max", "S", "w"),
        "double": computed(store_path, ("S", "age")),
    }
    mode, spy = group_joins
    assert spy.call_count == (1 if mode == "always" else 0)  # "always": the members come from the group join


def test_union_copies_per_branch_only_when_each_branch_holds_its_own_table(spark: Any, store_path: Path) -> None:
    @provplug.step("Mixed", output="Mixed")
    def mixed(left: Any, right: Any) -> Any:
        joined = left.join(right, "k").select(left["k"], right["y"].alias("v"))
        return joined.union(right.select("k", F.lit("z").alias("v"))).union(left.select("k", F.col("x").alias("v")))

    capture(
        spark,
        store_path,
        {"L": L_ROWS, "R": ([(1, "p"), (3, "q")], "k int, y string")},
        lambda f: mixed(f["L"], f["R"]),
    )
    got = rules(store_path, "Mixed").columns
    # The join's rows hold an L and an R row: k could be either table's, so it is computed.
    assert got["k"] == computed(store_path, ("L", "k"), ("R", "k"))
    assert got["v"] == computed(store_path, ("L", "x"), ("R", "y"))


def test_a_global_aggregate_is_always_one_row(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("Overall", output="Overall")
    def overall(s: Any) -> Any:
        return s.agg(F.count("*").alias("n"), F.sum("age").alias("total")).select("n", "total", F.lit(1).alias("one"))

    capture(spark, store_path, {"S": AGG_ROWS}, lambda f: overall(f["S"]))
    got = rules(store_path, "Overall")
    assert (got.existence, got.reason) == ("always_one_row", "")
    assert got.columns["total"] == aggregate(store_path, "sum", "S", "age")
    assert lineage(store_path, "Overall", {"S": ("w",), "Overall": ("one",)}) == expect(
        (1, [[("S", w)] for w in (1, 2, 3, 4)])
    )


def test_global_aggregate_members_through_the_group_join(spark: Any, store_path: Path, group_joins: Any) -> None:
    @provplug.step("Total", output="Totals")
    def total(s: Any, t: Any) -> Any:
        return s.agg(F.sum("age").alias("total")).crossJoin(t.select("k"))

    capture(spark, store_path, {"S": AGG_ROWS, "T": ([(7,), (8,)], "k int")}, lambda f: total(f["S"], f["T"]))
    everyone = [("S", w) for w in (1, 2, 3, 4)]
    assert lineage(store_path, "Total", {"S": ("w",), "Totals": ("k",)}) == expect(
        (7, [[s, ("T", 7)] for s in everyone]), (8, [[s, ("T", 8)] for s in everyone])
    )
    got = rules(store_path, "Totals")
    assert got.columns["total"] == aggregate(store_path, "sum", "S", "age")
    # Joined in the same step: whether a joined row exists is not what its members say
    # (the aggregate's row outlives them), so never "vanishes".
    assert got.existence == "opaque" and "a join over a global aggregate" in got.reason
    _, spy = group_joins
    assert spy.call_count == 1  # a global aggregate goes through a group join either way


def test_group_over_a_join_has_pairs_as_members(spark: Any, store_path: Path) -> None:
    @provplug.step("PerKey", output="Counts")
    def per_key(left: Any, right: Any) -> Any:
        return left.join(right, "k").groupBy("k").agg(F.count("*").alias("n"), F.max("y").alias("top"))

    capture(spark, store_path, {"L": L3_ROWS, "R": R3_ROWS}, lambda f: per_key(f["L"], f["R"]))
    assert lineage(store_path, "PerKey", {"R": ("y",)}) == expect(
        (2, [[("L", 2), ("R", "p")]]), (3, [[("L", 3), ("R", "q")], [("L", 3), ("R", "qq")]])
    )
    got = rules(store_path, "Counts")
    assert got.existence == "exact" and got.columns["k"] == copy(store_path, "L", "k")
    assert got.columns["top"] == aggregate(store_path, "max", "R", "y")


def test_group_over_a_left_join_keeps_optional_members(spark: Any, store_path: Path) -> None:
    @provplug.step("Matches", output="M")
    def matches(left: Any, right: Any) -> Any:
        return left.join(right, "k", "left").groupBy("k").agg(F.count("y").alias("n"))

    capture(spark, store_path, {"L": L3_ROWS, "R": R3_ROWS}, lambda f: matches(f["L"], f["R"]))
    assert lineage(store_path, "Matches", {"R": ("y",)}) == expect(
        (1, [[("L", 1)]]),
        (2, [[("L", 2), ("R", "p", True)]]),
        (3, [[("L", 3), ("R", "q", True)], [("L", 3), ("R", "qq", True)]]),
    )
    assert rules(store_path, "M").existence == "exact"


def test_an_aggregate_of_an_aggregate_over_a_left_join_lists_the_inner_members(spark: Any, store_path: Path) -> None:
    """TPC-H q13's shape: a count of a per-key count over a left join. An
    outer group's members are the members of its inner rows, as they are."""

    @provplug.step("Histogram", output="H")
    def histogram(left: Any, right: Any) -> Any:
        per_key = left.join(right, "k", "left").groupBy("k").agg(F.count("y").alias("n"))
        return per_key.groupBy("n").agg(F.count("*").alias("keys"))

    capture(spark, store_path, {"L": L3_ROWS, "R": R3_ROWS}, lambda f: histogram(f["L"], f["R"]))
    # By hand: k=1 matches no R row (n=0), k=2 matches p (n=1), k=3 matches q and qq (n=2).
    assert lineage(store_path, "Histogram", {"R": ("y",)}) == expect(
        (0, [[("L", 1)]]),
        (1, [[("L", 2), ("R", "p", True)]]),
        (2, [[("L", 3), ("R", "q", True)], [("L", 3), ("R", "qq", True)]]),
    )


def test_join_of_two_aggregates_pairs_their_members(spark: Any, store_path: Path) -> None:
    @provplug.step("Pairs", output="P")
    def pairs(s: Any, t: Any) -> Any:
        return s.groupBy("city").agg(F.sum("age").alias("a")).join(t.groupBy("city").agg(F.sum("v").alias("b")), "city")

    capture(
        spark,
        store_path,
        {"S": AGG_ROWS, "T": ([("NY", 1), ("NY", 2), ("LA", 3)], "city string, v int")},
        lambda f: pairs(f["S"], f["T"]),
    )
    assert lineage(store_path, "Pairs", {"S": ("w",), "T": ("v",)}) == expect(
        ("NY", [[("S", w), ("T", v)] for w in (1, 2, 3) for v in (1, 2)]), ("LA", [[("S", 4), ("T", 3)]])
    )


def test_aggregate_over_a_union_and_having_is_opaque(spark: Any, store_path: Path) -> None:
    @provplug.step("Merged", output="Mg")
    def merged(s: Any, t: Any) -> Any:
        return s.select("city").union(t.select("city")).groupBy("city").agg(F.count("*").alias("n"))

    @provplug.step("Having", output="H")
    def having(s: Any) -> Any:
        return s.groupBy("city").agg(F.count("*").alias("n")).filter(F.col("n") > 1)

    capture(
        spark,
        store_path,
        {"S": AGG_ROWS, "T": ([("NY", 1), ("SF", 2)], "city string, v int")},
        lambda f: (merged(f["S"], f["T"]), having(f["S"])),
    )
    assert lineage(store_path, "Merged", {"S": ("w",), "T": ("v",)}) == expect(
        ("NY", [[("S", 1)], [("S", 2)], [("S", 3)], [("T", 1)]]), ("LA", [[("S", 4)]]), ("SF", [[("T", 2)]])
    )
    assert rules(store_path, "Mg").existence == "exact"
    got = rules(store_path, "H")
    assert got.existence == "opaque" and "aggregate" in got.reason


def test_distinct_and_drop_duplicates(spark: Any, store_path: Path) -> None:
    @provplug.step("Cities", output="C")
    def cities(s: Any) -> Any:
        return s.select("city", "age").distinct()

    @provplug.step("FirstPerCity", output="D")
    def first_per_city(s: Any) -> Any:
        return s.dropDuplicates(["city"])

    capture(spark, store_path, {"S": AGG_ROWS}, lambda f: (cities(f["S"]), first_per_city(f["S"])))
    assert lineage(store_path, "Cities", {"S": ("w",), "C": ("city", "age")}) == expect(
        (("NY", 30), [[("S", 1)]]), (("NY", 40), [[("S", 2)], [("S", 3)]]), (("LA", 50), [[("S", 4)]])
    )
    got = rules(store_path, "C")
    assert got.deciding == deciding(store_path, S=["age", "city"])
    assert got.columns == {"city": copy(store_path, "S", "city"), "age": copy(store_path, "S", "age")}
    assert lineage(store_path, "FirstPerCity", {"S": ("w",)}) == expect(
        ("NY", [[("S", 1)], [("S", 2)], [("S", 3)]]), ("LA", [[("S", 4)]])
    )
    dedup = rules(store_path, "D")
    assert dedup.deciding == deciding(store_path, S=["city"])
    # Outside the subset: the kept row's value, another member's when that row goes.
    assert dedup.columns["age"] == computed(store_path, ("S", "age"))


# -- steps ---------------------------------------------------------------------------------
PEOPLE = (
    [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)],
    "Name string, City string, Age int",
)


@provplug.step("R1", output="Person2")
def adults(df: Any) -> Any:
    return df.filter(F.col("Age") >= 25)


@provplug.step("R2", output="AvgAge")
def avg_age(df: Any) -> Any:
    return df.groupBy("City").agg(F.avg("Age").alias("Age"))


def test_paper_person_example_step_by_step(spark: Any, store_path: Path) -> None:
    """The paper's pipeline (000 Tables 1-3): each step's records are in
    terms of that step's input table; NY's average has Steve and Mark of
    Person2 as alternative members, each needing its Person1 row."""
    capture(spark, store_path, {"Person1": PEOPLE}, lambda f: avg_age(adults(f["Person1"])))
    assert lineage(store_path, "R1") == expect(
        ("Steve", [[("Person1", "Steve")]]), ("Mark", [[("Person1", "Mark")]]), ("Shane", [[("Person1", "Shane")]])
    )
    assert lineage(store_path, "R2", {"Person2": ("Name",)}) == expect(
        ("NY", [[("Person2", "Steve")], [("Person2", "Mark")]]), ("LA", [[("Person2", "Shane")]])
    )
    r1, r2 = rules(store_path, "Person2"), rules(store_path, "AvgAge")
    assert (r1.existence, r1.deciding) == ("exact", deciding(store_path, Person1=["Age"]))
    assert r2.columns == {
        "City": copy(store_path, "Person2", "City"),
        "Age": aggregate(store_path, "avg", "Person2", "Age"),
    }
    assert r2.deciding == deciding(store_path, Person2=["City"])


def test_sources_have_no_records_and_every_record_names_stored_rows(spark: Any, store_path: Path) -> None:
    capture(spark, store_path, {"Person1": PEOPLE}, lambda f: avg_age(adults(f["Person1"])))
    stored = StoreContents(store_path)
    dataset = lineage_of(open_store(store_path))
    assert dataset is not None
    records = dataset.to_table().to_pylist()
    assert {r["out_table"] for r in records} == {
        stored.tables["Person2"]["table_id"],
        stored.tables["AvgAge"]["table_id"],
    }
    for r in records:
        assert r["in_row"] in stored.rows_by_id[r["in_table"]]
    keys = [(r["op"], r["out_row"], r["member"], r["in_table"], r["in_row"]) for r in records]
    assert len(keys) == len(set(keys)) == 3 + 3


# -- against re-execution ------------------------------------------------------------------
def _random_tables(seed: int) -> dict[str, tuple[list[tuple[Any, ...]], str]]:
    import random

    rng = random.Random(seed)
    cities, regions = ["NY", "LA", "SF"], ["east", "west"]
    return {
        "S": ([(i, rng.choice(cities), rng.randint(20, 40)) for i in range(8)], "id int, city string, age int"),
        "T": ([(i, rng.choice(cities), rng.choice(regions)) for i in range(5)], "id int, city string, region string"),
        "U": (
            [(i, rng.choice([*regions, "north"]), rng.randint(20, 40)) for i in range(4)],
            "id int, region string, age int",
        ),
    }


def _oracle(tables: Mapping[str, tuple[list[tuple[Any, ...]], str]], deleted: set[tuple[str, int]]) -> dict[str, int]:
    """The pipeline below re-run in pandas on the input rows left: region -> n."""
    frames = {}
    for name, (rows, ddl) in tables.items():
        columns = [c.split()[0] for c in ddl.split(", ")]
        frame = pd.DataFrame(rows, columns=columns)
        frames[name] = frame[[(name, i) not in deleted for i in frame["id"]]]
    s, t, u = frames["S"], frames["T"], frames["U"]
    joined = s[s.age > 25].merge(t, on="city")[["region", "age"]]
    both = pd.concat([joined, u[["region", "age"]]])
    return {str(k): int(v) for k, v in both.groupby("region").size().items()}


@pytest.mark.parametrize("seed", [1, 2])
def test_members_predict_the_rows_left_after_deletions(spark: Any, store_path: Path, seed: int) -> None:
    """For random deletions of input rows, the output rows that still exist
    (some member with all its rows left) and their count(*) (its members
    left) are what re-running the step on the rows left gives."""
    import random

    @provplug.step("Regions", output="PerRegion")
    def per_region(s: Any, t: Any, u: Any) -> Any:
        joined = s.filter(F.col("age") > 25).join(t, "city").select("region", "age")
        return joined.union(u.select("region", "age")).groupBy("region").agg(F.count("*").alias("n"))

    tables = _random_tables(seed)
    capture(spark, store_path, tables, lambda f: per_region(f["S"], f["T"], f["U"]))
    assert rules(store_path, "PerRegion").existence == "exact"
    rows = lineage(store_path, "Regions", {"S": ("id",), "T": ("id",), "U": ("id",)})
    assert sum(rows.values()) == len(rows)  # one row per region
    rng = random.Random(seed)
    every = [(name, i) for name, (data, _) in tables.items() for i in range(len(data))]
    for _ in range(25):
        deleted = set(rng.sample(every, rng.randint(0, 8)))
        predicted = {}
        for region, members in rows:
            alive = [m for m in members if not any((t, k) in deleted for t, k, optional in m if not optional)]
            if alive:
                predicted[region] = len(alive)
        assert predicted == _oracle(tables, deleted), sorted(deleted)


def test_row_lineage_can_be_switched_off_and_triples_stay_the_same(spark: Any, tmp_path: Path) -> None:
    from provplug_spark.rowlineage import ROW_LINEAGE_CONF

    from provplug.testing import content

    stores = {flag: tmp_path / f"{flag}.prov" for flag in ("true", "false")}
    for flag, store in stores.items():
        spark.conf.set(ROW_LINEAGE_CONF, flag)
        try:
            capture(spark, store, {"Person1": PEOPLE}, lambda f: avg_age(adults(f["Person1"])))
        finally:
            spark.conf.unset(ROW_LINEAGE_CONF)
    off = open_store(stores["false"])
    assert lineage_of(off) is None and rules_of(off) == {}
    assert len(rules_of(open_store(stores["true"]))) == 2
    assert StoreContents(stores["true"]).lineage(row_id=content) == StoreContents(stores["false"]).lineage(
        row_id=content
    )
