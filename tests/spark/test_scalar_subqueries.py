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
