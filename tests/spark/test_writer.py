"""Writing rows and triples from Spark tasks (provplug_spark.writer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provplug.store.open import open_store

from .helpers import (
    capture,
    count_all,
    count_per_key,
    ops,
)


def test_rows_and_triples_keep_only_the_files_of_used_task_attempts(spark: Any, store_path: Path, mocker: Any) -> None:
    """Writer tasks name files by partition and attempt; a file no used
    attempt reported (a failed or duplicate attempt's) is deleted."""
    from provplug_spark import session as spark_session

    strays: list[Path] = []
    real = spark_session.SparkCaptureSession._run_writer

    def with_stray(self: Any, frame: Any, body: Any, target: Any, runs: Any = None) -> Any:
        for destination in (target.rows, target.triples):
            if destination is not None:
                stray = Path(destination.file(f"{target.stem(0, 7)}-00000.parquet"))
                stray.write_bytes(b"half a file from a lost attempt")
                strays.append(stray)
        return real(self, frame, body, target, runs)

    mocker.patch.object(spark_session.SparkCaptureSession, "_run_writer", with_stray)
    capture(
        spark, store_path, {"T": ([(1, "a"), (2, "b"), (2, "c")], "k int, v string")}, lambda f: count_per_key(f["T"])
    )
    assert strays and not any(p.exists() for p in strays)
    run_dir = Path(open_store(store_path).run_paths("rows")[0]).parent
    assert not [p for p in run_dir.rglob("*-a7-*.parquet")]
    assert ops(store_path)["Count"]["triples"] == len(open_store(store_path).triples().to_table())


def test_cells_are_deduplicated_only_where_one_id_can_come_twice(mocker: Any) -> None:
    """Ids are base + row number, so two terms of different bases (two
    columns of one table: ``price * (1 - discount)``) never yield one id:
    such a cell is not sorted to deduplicate (on TPC-H q1 that sorting was
    most of the writer's time). Two terms of one base are deduplicated even
    unflagged; a flagged term (an array that may repeat) always."""
    import numpy as np
    import pyarrow as pa
    from provplug_spark import writer
    from provplug_spark.terms import Term

    from provplug import ids

    lists = pa.array([[0, 1], [1, 2]], pa.list_(pa.int64()))
    again = pa.array([[1, 5], [2]], pa.list_(pa.int64()))
    batch = pa.RecordBatch.from_arrays([lists, again], names=["a", "b"])
    rows = np.array([0, 1], np.int64)
    price, discount, out = ids.value_id(3, 0, 0), ids.value_id(3, 1, 0), ids.value_id(9, 0, 0)
    unique = mocker.spy(writer.sortedints, "unique")

    two_columns = writer.Cell(0, (Term("a", False, price), Term("a", False, discount)), dedupe=False)
    src, dst = writer.cell_pairs(batch, rows, [two_columns], table_id=9)
    assert unique.call_count == 0
    assert sorted(zip(src.tolist(), dst.tolist(), strict=True)) == sorted(
        [(price + r, out + i) for i, rs in enumerate([[0, 1], [1, 2]]) for r in rs]
        + [(discount + r, out + i) for i, rs in enumerate([[0, 1], [1, 2]]) for r in rs]
    )

    one_column_twice = writer.Cell(0, (Term("a", False, price), Term("b", False, price)), dedupe=False)
    src, dst = writer.cell_pairs(batch, rows, [one_column_twice], table_id=9)
    assert unique.call_count == 1
    assert sorted(zip(src.tolist(), dst.tolist(), strict=True)) == [
        (price + 0, out),
        (price + 1, out),
        (price + 1, out + 1),
        (price + 2, out + 1),
        (price + 5, out),
    ]

    repeats = pa.RecordBatch.from_arrays([pa.array([[4, 4, 6]], pa.list_(pa.int64()))], names=["a"])
    flagged = writer.Cell(0, (Term("a", False, price),), dedupe=True)
    src, dst = writer.cell_pairs(repeats, rows[:1], [flagged], table_id=9)
    assert sorted(src.tolist()) == [price + 4, price + 6]


def test_a_cell_over_two_columns_of_one_table_is_not_flagged_for_deduplication(
    spark: Any, store_path: Path, mocker: Any
) -> None:
    """``sum(a * b)`` per group reads two columns of one table: its terms
    have two bases and lists of distinct rows, so the writer is not asked
    to deduplicate; the triples are the hand-derived ones, each once."""
    from provplug_spark.session import SparkCaptureSession

    import provplug

    from .helpers import F, expect, labelled_triples

    layouts: list[Any] = []
    original = SparkCaptureSession._write

    def spied(self: Any, frame: Any, layout: Any, *args: Any, **kwargs: Any) -> Any:
        layouts.append(layout)
        return original(self, frame, layout, *args, **kwargs)

    mocker.patch.object(SparkCaptureSession, "_write", spied)

    @provplug.step("Sums", output="Out")
    def sums(t: Any) -> Any:
        return t.groupBy("k").agg(F.sum(F.col("a") * F.col("b")).alias("s"))

    rows = ([(1, 2, 3, "x"), (1, 4, 5, "y"), (2, 6, 7, "z")], "k int, a int, b int, id string")
    capture(spark, store_path, {"T": rows}, lambda f: sums(f["T"]))
    (cell,) = [c for c in layouts[-1].cells if c.column == 1]
    assert len({t.base for t in cell.terms}) == 2 and not cell.dedupe
    want = expect(
        "Sums",
        "Out",
        {
            ("k", 1): [("T", "k", "x"), ("T", "k", "y")],
            ("s", 1): [("T", "a", "x"), ("T", "b", "x"), ("T", "a", "y"), ("T", "b", "y")],
            ("k", 2): [("T", "k", "z")],
            ("s", 2): [("T", "a", "z"), ("T", "b", "z")],
        },
    )
    assert labelled_triples(store_path, {"T": ("id",)}) == want
    assert ops(store_path)["Sums"]["triples"] == len(want)


def test_full_chunks_of_triples_go_in_turn_to_a_second_writer(tmp_path: Path, mocker: Any) -> None:
    """Once a full chunk (TRIPLE_CHUNK triples) comes, every other full chunk
    goes to a second writer (its own parts, written in a second thread)
    while this thread writes the next; every triple is written once."""
    import numpy as np
    import pyarrow.parquet as pq
    from provplug_spark import writer

    from provplug.plugin.writers import local_destination

    mocker.patch.object(writer, "TRIPLE_CHUNK", 4)
    triples = writer._TaskTriples(local_destination(tmp_path), "t1-rows-p00000-a0")
    chunks = [np.arange(3), np.arange(100, 104), np.arange(200, 204), np.arange(300, 304), np.arange(400, 402)]
    for chunk in chunks:
        triples.write(chunk.astype(np.int64), chunk.astype(np.int64) + 1000, 7, 1)
    written = triples.close()
    names = sorted(Path(w.path).name for w in written)
    assert names == ["t1-rows-p00000-a0-00000.parquet", "t1-rows-p00000-a0-h-00000.parquet"]
    # chunks 2 and 4 (the first and third full ones) went to the second writer
    assert [w.rows for w in sorted(written, key=lambda w: w.path)] == [3 + 4 + 2, 4 + 4]
    tables = [pq.read_table(w.path, columns=["src", "dst"]).to_pydict() for w in written]
    got = sorted((s, d) for t in tables for s, d in zip(t["src"], t["dst"], strict=True))
    assert got == sorted((int(s), int(s) + 1000) for c in chunks for s in c)


def test_triples_come_in_chunks_across_cells_and_rows(mocker: Any) -> None:
    """triple_chunks cuts a batch's triples into chunks of at most the
    limit, a cell's across two chunks where it must; together they are the
    cells' triples (hand-derived), for a task's consecutive row numbers and
    for row-aligned (any) ones alike."""
    import numpy as np
    import pyarrow as pa
    from provplug_spark import writer
    from provplug_spark.terms import Term

    from provplug import ids

    lists = pa.array([[0, 1, 2], None, [7]], pa.list_(pa.int64()))
    one = pa.array([5, 6, None], pa.int64())
    batch = pa.RecordBatch.from_arrays([lists, one], names=["l", "s"])
    a, b, out0, out1 = ids.value_id(3, 0, 0), ids.value_id(4, 2, 0), ids.value_id(9, 0, 0), ids.value_id(9, 1, 0)
    cells = [writer.Cell(0, (Term("l", False, a),), False), writer.Cell(1, (Term("s", True, b),), False)]
    for rows in (np.array([10, 11, 12], np.int64), np.array([40, 3, 17], np.int64)):
        want = [(a + r, out0 + rows[i]) for i, rs in enumerate([[0, 1, 2], [], [7]]) for r in rs] + [
            (b + 5, out1 + rows[0]),
            (b + 6, out1 + rows[1]),
        ]
        chunks = list(writer.triple_chunks(batch, rows, cells, 9, limit=3))
        assert [len(src) for src, _ in chunks] == [3, 3]  # column 0's four across both
        got = [(int(s), int(d)) for src, dst in chunks for s, d in zip(src, dst, strict=True)]
        assert got == [(int(s), int(d)) for s, d in want]


def test_writer_jobs_share_one_python_function_and_carry_their_own_body(
    spark: Any, store_path: Path, mocker: Any
) -> None:
    """Every writer job of a run maps its rows with one Python UDF, made once
    (its JVM function built on first use); each job's own body (its target
    and layout) rides on the job as a local property, cleared after the job."""
    from provplug_spark.writer import TASK_PROPERTY
    from pyspark.sql.udf import UserDefinedFunction

    made = mocker.spy(UserDefinedFunction, "_create_judf")
    rows = {"T": ([(1, "a"), (2, "b"), (2, "c")], "k int, v string")}
    capture(spark, store_path, rows, lambda f: (count_per_key(f["T"]), count_all(f["T"])))
    steps = ops(store_path)
    assert set(steps) == {"Count", "Total"} and all(op["triples"] > 0 for op in steps.values())  # their jobs ran
    assert made.call_count == 1
    assert spark.sparkContext.getLocalProperty(TASK_PROPERTY) is None  # the user's later jobs carry none


def test_a_writer_task_without_its_jobs_body_fails_in_one_line(spark: Any) -> None:
    """A writer UDF run by a job that carries no body (never provplug's own
    jobs) fails with a named error, not an unpickling one."""
    import pytest
    from provplug_spark._jvm import Catalyst
    from provplug_spark.writer import RESULT_SCHEMA, writer_task
    from pyspark.errors import PythonException

    jvm = Catalyst(spark)
    job = jvm.map_in_arrow(spark.range(2), jvm.arrow_map(writer_task, RESULT_SCHEMA))
    with pytest.raises(
        PythonException, match=r"provplug's writer ran without its job's provplug\.writer\.task property"
    ):
        job.collect()


def test_without_pinned_threads_each_writer_job_carries_its_own_function(
    spark: Any, store_path: Path, mocker: Any
) -> None:
    """With PYSPARK_PIN_THREAD=false a local property set in one Python thread
    may reach another thread's job: each writer job then maps with a UDF of its
    own (its body inside), as PySpark's mapInArrow makes it."""
    from provplug_spark import session as spark_session

    mocker.patch.object(spark_session, "threads_pinned", return_value=False)
    carried = mocker.spy(spark_session, "task_property")
    rows = {"T": ([(1, "a"), (2, "b"), (2, "c")], "k int, v string")}
    capture(spark, store_path, rows, lambda f: (count_per_key(f["T"]), count_all(f["T"])))
    steps = ops(store_path)
    assert set(steps) == {"Count", "Total"} and all(op["triples"] > 0 for op in steps.values())
    assert carried.call_count == 0
