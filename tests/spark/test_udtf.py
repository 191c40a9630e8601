"""Python UDTFs (issue 25, provplug_spark.lateral): a lateral call is a black
box over its argument rows. An output row depends on the argument cells of
the call that yielded it and of every row received since the instance last
held its initial state (the rows its state may carry): a stateless UDTF's
rows on their own argument row; ``terminate``'s on the rows it gathered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.errors import CaptureError
from provplug.testing import assert_lineage_matches_oracle

from .helpers import Label, capture, expect, labelled_triples, table_rows

F = pytest.importorskip("pyspark.sql.functions")
udtf = pytest.importorskip("pyspark.sql.functions").udtf

# k, n (how many rows to repeat), s; one partition: the order the stored rows are read in
T_ROWS = ([(1, 2, "p"), (2, 1, "q"), (3, 0, "r")], "k int, n int, s string")
# k, g (the partition), n
G_ROWS = ([(1, "x", 2), (2, "x", 1), (3, "y", 5)], "k int, g string, n int")


def _repeat() -> Any:
    """A stateless UDTF: ``n`` rows (i, s) per call. Local: pickled by value for the workers."""

    @udtf(returnType="i int, t string")
    class Repeat:
        def eval(self, n: int, s: str) -> Any:
            for i in range(n):
                yield i, s.upper()

    return Repeat


def _running() -> Any:
    """A stateful UDTF over a TABLE argument: a running total per row, the total at terminate."""

    @udtf(returnType="k int, total int")
    class Running:
        def __init__(self) -> None:
            self.total = 0

        def eval(self, row: Any) -> Any:
            self.total += row["n"]
            yield row["k"], self.total

        def terminate(self) -> Any:
            yield None, self.total

    return Running


def _row_args(k: int) -> list[Label]:
    """Repeat's argument cells of T's row ``k``."""
    return [("T", "n", k), ("T", "s", k)]


def test_lateral_udtf_calls_depend_on_their_argument_row(spark: Any, store_path: Path) -> None:
    """SQL ``LATERAL`` (inner, left outer, named arguments) and ``DataFrame.lateralJoin``:
    each output row of a stateless UDTF depends on its argument row's
    argument cells; the left side's columns are copies; a call on literals
    has no parents."""
    repeat = _repeat()
    spark.udtf.register("repeat_rows", repeat)

    @provplug.step("Lateral", output=("BySql", "ByLeftJoin", "ByFrame", "ByName", "OnLiterals"))
    def lateral(t: Any) -> Any:
        t.createOrReplaceTempView("t_rows")
        by_frame = t.alias("t").lateralJoin(repeat(F.col("t.n").outer(), F.col("t.s").outer()))
        return (
            spark.sql("SELECT t.k, r.i, r.t FROM t_rows t, LATERAL repeat_rows(t.n, t.s) r"),
            spark.sql("SELECT t.k, r.i, r.t FROM t_rows t LEFT JOIN LATERAL repeat_rows(t.n, t.s) r"),
            by_frame.select("k", "i", "t"),
            spark.sql("SELECT t.k, r.i, r.t FROM t_rows t, LATERAL repeat_rows(s => t.s, n => t.n) r"),
            repeat(F.lit(2), F.lit("z")),
        )

    capture(spark, store_path, {"T": T_ROWS}, lambda f: lateral(f["T"]))
    produced = {1: [(0, "P"), (1, "P")], 2: [(0, "Q")]}  # by hand: n rows per T row, none for n = 0
    assert sorted(tuple(r.values()) for r in table_rows(store_path, "BySql")) == [
        (k, i, t) for k, rows in produced.items() for i, t in rows
    ]
    # Spark 4 pads no row for a UDTF call that yields none, LEFT JOIN or not (as without provplug)
    assert sorted(tuple(r.values()) for r in table_rows(store_path, "ByLeftJoin")) == [
        (k, i, t) for k, rows in produced.items() for i, t in rows
    ]
    assert sorted(tuple(r.values()) for r in table_rows(store_path, "OnLiterals")) == [(0, "Z"), (1, "Z")]

    def calls() -> dict[tuple[str, Any], list[Label]]:
        return {
            cell: parents
            for k, rows in produced.items()
            for i, _ in rows
            for cell, parents in {
                ("k", (k, i)): [("T", "k", k)],
                ("i", (k, i)): _row_args(k),
                ("t", (k, i)): _row_args(k),
            }.items()
        }

    want = expect("Lateral", "BySql", calls()) | expect("Lateral", "ByFrame", calls())
    want |= expect("Lateral", "ByName", calls())
    want |= expect("Lateral", "ByLeftJoin", calls())
    keys = {name: ("k", "i") for name in ("BySql", "ByLeftJoin", "ByFrame", "ByName")}
    assert labelled_triples(store_path, keys) == want
    assert_lineage_matches_oracle(store_path)


def test_a_stateful_udtf_over_a_partitioned_table_argument(spark: Any, store_path: Path) -> None:
    """``running(TABLE(t) PARTITION BY g ORDER BY k)`` and its DataFrame form
    ``running(t.asTable().partitionBy("g").orderBy("k"))``: one instance per
    partition. Its first ``eval`` sees the initial state (that row only);
    later ones, and ``terminate``, depend on every row the instance had
    received. A TABLE argument is the whole row: every column is a parent."""
    spark.udtf.register("running_total", _running())

    running_total = _running()

    @provplug.step("Running", output=("Totals", "TotalsByFrame"))
    def running(g: Any) -> Any:
        g.createOrReplaceTempView("g_rows")
        return (
            spark.sql("SELECT * FROM running_total(TABLE(g_rows) PARTITION BY g ORDER BY k)"),
            running_total(g.asTable().partitionBy("g").orderBy("k")),
        )

    capture(spark, store_path, {"G": G_ROWS}, lambda f: running(f["G"]))

    def rows(*ks: int) -> list[Label]:
        return [("G", c, k) for k in ks for c in ("k", "g", "n")]

    # by hand: partition x (k 1 then 2): totals 2, 3, terminate 3; partition y (k 3): 5, terminate 5
    received = {(1, 2): rows(1), (2, 3): rows(1, 2), (None, 3): rows(1, 2), (3, 5): rows(3), (None, 5): rows(3)}
    want = set()
    for out in ("Totals", "TotalsByFrame"):
        stored = sorted((tuple(r.values()) for r in table_rows(store_path, out)), key=str)
        assert stored == sorted(received, key=str), out
        want |= expect("Running", out, {(c, key): parents for key, parents in received.items() for c in ("k", "total")})
    assert labelled_triples(store_path, {"Totals": ("k", "total"), "TotalsByFrame": ("k", "total")}) == want
    assert_lineage_matches_oracle(store_path)


def test_other_lateral_subqueries_and_udtfs_are_refused_with_the_reason(spark: Any, store_path: Path) -> None:
    @provplug.step("Sub", output="Out")
    def lateral_subquery(t: Any) -> Any:
        t.createOrReplaceTempView("t_sub")
        return spark.sql("SELECT t.k, s.m FROM t_sub t, LATERAL (SELECT t.n * 2 AS m) s")

    with pytest.raises(CaptureError, match=r"lateral subquery .* only a lateral call of a Python UDTF"):
        capture(spark, store_path, {"T": T_ROWS}, lambda f: lateral_subquery(f["T"]), strict=True)
    assert not store_path.exists()

    from pyspark.sql.types import IntegerType, StructType
    from pyspark.sql.udtf import AnalyzeResult

    @udtf
    class Analyzed:
        @staticmethod
        def analyze(n: Any) -> Any:
            return AnalyzeResult(StructType().add("v", IntegerType()))

        def eval(self, n: int) -> Any:
            yield (n,)

    spark.udtf.register("analyzed_udtf", Analyzed)

    @provplug.step("Analyzed", output="Out")
    def analyzed(t: Any) -> Any:
        t.createOrReplaceTempView("t_an")
        return spark.sql("SELECT t.k, a.v FROM t_an t, LATERAL analyzed_udtf(t.n) a")

    with pytest.raises(CaptureError, match="analyzed_udtf: its class has an analyze method"):
        capture(spark, store_path, {"T": T_ROWS}, lambda f: analyzed(f["T"]), strict=True)
    assert not store_path.exists()

    import pyarrow as pa
    from pyspark.sql.functions import arrow_udtf

    class Batches:
        def eval(self, batch: pa.RecordBatch) -> Any:
            yield pa.table({"k": batch.column("k")})

    batches = arrow_udtf(Batches, returnType="k int")

    @provplug.step("Arrow", output="Out")
    def arrow(t: Any) -> Any:
        return batches(t.asTable())

    with pytest.raises(CaptureError, match="PyArrow UDTF Batches exactly: it receives batches"):
        capture(spark, store_path, {"T": T_ROWS}, lambda f: arrow(f["T"]), strict=True)
    assert not store_path.exists()


def test_a_lateral_udtf_call_in_a_captured_script(spark: Any, store_path: Path, tmp_path: Path) -> None:
    """Under script capture (``provplug run``, ``capture_writes``) the written
    rows are the plain run's and each derives from its argument row's cells."""
    spark.udtf.register("repeat_rows", _repeat())
    csv, out = tmp_path / "words.csv", tmp_path / "repeated"
    csv.write_text("k,n,s\n1,2,p\n2,1,q\n3,0,r\n")
    query = "SELECT w.k, r.i, r.t FROM words w, LATERAL repeat_rows(w.n, w.s) r"
    with provplug.capture_writes(spark, store=store_path):
        spark.read.option("header", True).schema("k int, n int, s string").csv(str(csv)).createOrReplaceTempView(
            "words"
        )
        spark.sql(query).write.parquet(str(out))
    plain = spark.sql(query).collect()  # the same query without capture
    assert sorted(tuple(r) for r in spark.read.parquet(str(out)).collect()) == sorted(tuple(r) for r in plain)
    assert sorted(tuple(r) for r in plain) == [(1, 0, "P"), (1, 1, "P"), (2, 0, "Q")]
    args = {1: [("words", "n", 1), ("words", "s", 1)], 2: [("words", "n", 2), ("words", "s", 2)]}
    want = expect(
        "write:repeated",
        "repeated",
        {
            cell: parents
            for k, i in ((1, 0), (1, 1), (2, 0))
            for cell, parents in {
                ("k", (k, i)): [("words", "k", k)],
                ("i", (k, i)): args[k],
                ("t", (k, i)): args[k],
            }.items()
        },
    )
    assert labelled_triples(store_path, {"repeated": ("k", "i")}) == want
    assert_lineage_matches_oracle(store_path)


def test_a_batching_udtf_depends_on_the_rows_of_its_batch(spark: Any, store_path: Path) -> None:
    """A UDTF that buffers two rows, emits them and clears its buffer: once
    the buffer is empty again (its initial state) the rows before it no
    longer count. By hand, partition x (k 1, 2, 3): k 1 and 2 are emitted
    together (batch of 2, from rows 1 and 2), k 3 by terminate (row 3 alone);
    partition y: k 4 by terminate (row 4)."""

    @udtf(returnType="k int, size int")
    class Batches:
        def __init__(self) -> None:
            self.buffer: list[int] = []

        def eval(self, row: Any) -> Any:
            self.buffer = [*self.buffer, row["k"]]
            if len(self.buffer) == 2:
                yield from self._flush()

        def terminate(self) -> Any:
            yield from self._flush()

        def _flush(self) -> Any:
            done, self.buffer = self.buffer, []
            for k in done:
                yield k, len(done)

    spark.udtf.register("in_batches", Batches)

    @provplug.step("Batch", output="Batched")
    def batched(b: Any) -> Any:
        b.createOrReplaceTempView("b_rows")
        return spark.sql("SELECT * FROM in_batches(TABLE(b_rows) PARTITION BY g ORDER BY k)")

    rows = ([(1, "x"), (2, "x"), (3, "x"), (4, "y")], "k int, g string")
    capture(spark, store_path, {"B": rows}, lambda f: batched(f["B"]))
    assert sorted(tuple(r.values()) for r in table_rows(store_path, "Batched")) == [(1, 2), (2, 2), (3, 1), (4, 1)]
    batch = {1: (1, 2), 2: (1, 2), 3: (3,), 4: (4,)}
    want = expect(
        "Batch",
        "Batched",
        {(col, k): [("B", c, r) for r in batch[k] for c in ("k", "g")] for k in batch for col in ("k", "size")},
    )
    assert labelled_triples(store_path) == want
    assert_lineage_matches_oracle(store_path)
