"""Cells read from the member list (provplug_spark.rowlineage.MemberField):
an aggregate over several tables collects its rows' members as one list of
structs; the row numbers its cells need are fields of those structs, so the
writer reads them there and the plan collects no list a table beside it.
The triples stay those derived by hand, each once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import provplug

from .helpers import F, Triple, capture, expect, labelled_triples, ops

L = ([(1, "a"), (2, "b"), (2, "c")], "k int, x string")
R = ([(2, 10), (2, 20), (3, 30)], "k int, y int")


def _lists_in_written_plans(mocker: Any) -> list[int]:
    """A spy on the writer jobs: the collect_list calls of each written plan
    (the sources' first, then the step's)."""
    from provplug_spark.session import SparkCaptureSession

    seen: list[int] = []
    original = SparkCaptureSession._write

    def spied(self: Any, frame: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(frame._jdf.queryExecution().optimizedPlan().toString()).count("collect_list("))
        return original(self, frame, *args, **kwargs)

    mocker.patch.object(SparkCaptureSession, "_write", spied)
    return seen


def test_an_aggregate_over_a_join_collects_one_list_and_gives_the_hand_derived_triples(
    spark: Any, store_path: Path, mocker: Any
) -> None:
    lists = _lists_in_written_plans(mocker)

    @provplug.step("PerKey", output="Out")
    def per_key(left: Any, right: Any) -> Any:
        joined = left.join(right, left.k == right.k)
        return joined.groupBy(left.k).agg(F.max("x").alias("mx"), F.sum("y").alias("sy"), F.count("*").alias("n"))

    capture(spark, store_path, {"L": L, "R": R}, lambda f: per_key(f["L"], f["R"]))
    # By hand: the one group k = 2 joins L's rows b and c with R's rows 10 and 20.
    key = [("L", "k", "b"), ("L", "k", "c")]
    want: set[Triple] = expect(
        "PerKey",
        "Out",
        {
            ("k", 2): key,
            ("mx", 2): [("L", "x", "b"), ("L", "x", "c")],
            ("sy", 2): [("R", "y", 10), ("R", "y", 20)],
            ("n", 2): key,  # count(*) reads no column: the group's key cells
        },
    )
    assert labelled_triples(store_path, {"L": ("x",), "R": ("y",)}) == want
    assert ops(store_path)["PerKey"]["triples"] == len(want)  # each triple once
    assert lists[-1] == 1  # the step's: the member list only: no list of L's or R's row numbers beside it


def test_a_list_over_grouped_members_is_deduplicated(spark: Any, store_path: Path, mocker: Any) -> None:
    """An aggregate over the join of an aggregate and a table: each T row is
    in as many members as the S group it joins has rows, so its cells' row
    numbers repeat in the member list; the triples are still each once."""
    lists = _lists_in_written_plans(mocker)

    @provplug.step("Top", output="Out")
    def top(s: Any, t: Any) -> Any:
        totals = s.groupBy("k").agg(F.count("*").alias("n"))
        return totals.join(t, "k").groupBy("k").agg(F.max("y").alias("my"), F.max("n").alias("mn"))

    capture(spark, store_path, {"S": L, "T": R}, lambda f: top(f["S"], f["T"]))
    # By hand: k = 2 groups S's rows b and c, joined with T's rows 10 and 20.
    want = expect(
        "Top",
        "Out",
        {
            ("k", 2): [("S", "k", "b"), ("S", "k", "c"), ("T", "k", 10), ("T", "k", 20)],
            ("my", 2): [("T", "y", 10), ("T", "y", 20)],
            ("mn", 2): [("S", "k", "b"), ("S", "k", "c")],
        },
    )
    assert labelled_triples(store_path, {"S": ("x",), "T": ("y",)}) == want
    assert ops(store_path)["Top"]["triples"] == len(want)
    assert lists[-1] == 2  # the step's: the inner and the outer member lists


def test_the_writer_reads_a_field_of_the_member_elements() -> None:
    from provplug_spark.terms import Term
    from provplug_spark.writer import Cell, cell_pairs

    element = pa.struct([("a", pa.int64()), ("b", pa.int64())])
    members = pa.array([[{"a": 1, "b": 7}, {"a": 2, "b": None}], None, [{"a": 3, "b": 7}]], pa.list_(element))
    batch = pa.RecordBatch.from_arrays([members], names=["m"])
    rows = np.array([10, 11, 12], np.int64)
    cells = [Cell(0, (Term("m", False, 1000, "a"),), False), Cell(1, (Term("m", False, 2000, "b"),), False)]
    src, dst = cell_pairs(batch, rows, cells, table_id=1)
    from provplug import ids

    out = {(int(s), int(d)) for s, d in zip(src, dst, strict=True)}
    col0, col1 = ids.value_id(1, 0, 0), ids.value_id(1, 1, 0)
    assert out == {
        (1001, col0 + 10),
        (1002, col0 + 10),
        (1003, col0 + 12),
        (2007, col1 + 10),  # the null b of row 10's second member holds no row
        (2007, col1 + 12),
    }
    assert len(src) == len(out)
