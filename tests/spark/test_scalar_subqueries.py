"""A scalar subquery in a filter (TPC-H q2, q11, q15, q17, q22 use them) is
part of a predicate: like IN and EXISTS it decides which rows pass, so the
kept cells are copies of their input cells (docs/capture-semantics.md,
filter: "Predicate columns are not parents") and the step is captured cell
by cell. A scalar subquery whose value lands in a cell stays a coarse step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import provplug

from .helpers import F, capture, expect, labelled_triples, ops

E_ROWS = ([(1, "a", 10), (2, "a", 20), (3, "b", 5), (4, "b", 7)], "id int, grp string, amount int")


def _kept_copies(rows: list[int]) -> set[Any]:
    return expect("Keep", "Out", {(c, r): [("E", c, r)] for r in rows for c in ("id", "amount")})


def test_an_uncorrelated_scalar_subquery_in_a_filter_is_captured_cell_by_cell(spark: Any, store_path: Path) -> None:
    @provplug.step("Keep", output="Out")
    def above_average(e: Any) -> Any:
        return e.where(F.col("amount") > e.select(F.avg("amount")).scalar()).select("id", "amount")

    capture(spark, store_path, {"E": E_ROWS}, lambda f: above_average(f["E"]))
    # By hand: the average is 10.5; ids 2 (20) passes, and no other.
    assert ops(store_path)["Keep"]["kind"] != "coarse"
    assert labelled_triples(store_path) == _kept_copies([2])


def test_a_correlated_scalar_subquery_in_a_filter_is_captured_cell_by_cell(spark: Any, store_path: Path) -> None:
    @provplug.step("Keep", output="Out")
    def group_maximum(e: Any) -> Any:
        e.createOrReplaceTempView("e_rows")
        return e.sparkSession.sql(
            "select id, amount from e_rows o where amount = (select max(amount) from e_rows i where i.grp = o.grp)"
        )

    capture(spark, store_path, {"E": E_ROWS}, lambda f: group_maximum(f["E"]))
    # By hand: group a's maximum is 20 (id 2), group b's 7 (id 4).
    assert ops(store_path)["Keep"]["kind"] != "coarse"
    assert labelled_triples(store_path) == _kept_copies([2, 4])


def test_a_scalar_subquery_whose_value_is_a_cell_stays_coarse(spark: Any, store_path: Path) -> None:
    @provplug.step("Gap", output="Out")
    def gap(e: Any) -> Any:
        return e.select("id", (F.col("amount") - e.select(F.avg("amount")).scalar()).alias("gap"))

    capture(spark, store_path, {"E": E_ROWS}, lambda f: gap(f["E"]))
    op = ops(store_path)["Gap"]
    assert op["kind"] == "coarse" and "scalar subquery" in str(op["params"])
    assert labelled_triples(store_path) == set()


def test_a_with_query_is_captured_through_its_inlined_references(spark: Any, store_path: Path) -> None:
    """TPC-H q15's shape: a CTE read twice, once under a scalar subquery in a filter."""

    @provplug.step("Keep", output="Out")
    def top_total(e: Any) -> Any:
        e.createOrReplaceTempView("e_rows")
        return e.sparkSession.sql(
            "with totals as (select grp, sum(amount) as total from e_rows group by grp) "
            "select grp, total from totals where total = (select max(total) from totals)"
        )

    capture(spark, store_path, {"E": E_ROWS}, lambda f: top_total(f["E"]))
    # By hand: a totals 30 (ids 1, 2), b 12; a is kept. Its grp cell derives from
    # the group's grp cells, its total from the group's amounts.
    assert ops(store_path)["Keep"]["kind"] != "coarse"
    want = expect(
        "Keep",
        "Out",
        {("grp", "a"): [("E", "grp", 1), ("E", "grp", 2)], ("total", "a"): [("E", "amount", 1), ("E", "amount", 2)]},
    )
    assert labelled_triples(store_path) == want
