"""The user's Parquet files written by the step's own writer job
(:mod:`provplug_spark.direct`): a plain local Parquet write under
``capture_writes`` is written once, by the tasks that store its rows, and
reads back in Spark exactly as Spark's own write of the same rows; anything
else is replayed by Spark's writer. Who wrote a file is in its footer:
pyarrow's writer says ``parquet-cpp-arrow``, Spark's ``parquet-mr``."""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from provplug_spark.session import SparkCaptureSession

import provplug
from provplug.store.open import open_store

from .helpers import F, table_rows

ROWS = [
    (
        1,
        "a",
        dt.date(2024, 1, 2),
        dt.datetime(2024, 1, 2, 3, 4, 5),
        decimal.Decimal("1.50"),
        [1, 2],
        {"k": 1},
        (1, "x"),
    ),
    (2, None, None, None, None, [], {}, None),
    (3, "c", dt.date(1999, 12, 31), dt.datetime(1999, 12, 31, 23, 59), decimal.Decimal("-0.25"), None, None, (2, None)),
]
SCHEMA = (
    "id long, name string, day date, at timestamp, amount decimal(10,2), "
    "tags array<int>, counts map<string,int>, pair struct<n:int,s:string>"
)


def _frame(spark: Any) -> Any:
    return spark.createDataFrame(ROWS, SCHEMA).repartition(2, "id")


def _writers(folder: Path) -> set[str]:
    """Who wrote the Parquet files of ``folder`` (their footers' created_by)."""
    return {pq.read_metadata(p).created_by.split(" version")[0] for p in folder.rglob("*.parquet")}


def _read(spark: Any, folder: Path) -> tuple[str, list[tuple[Any, ...]]]:
    frame = spark.read.parquet(str(folder))
    return frame.schema.simpleString(), sorted((tuple(r) for r in frame.collect()), key=lambda r: r[0])


def test_a_plain_parquet_write_is_written_by_the_capture_job_and_reads_back_as_sparks(
    spark: Any, tmp_path: Path
) -> None:
    frame = _frame(spark)
    frame.write.parquet(str(tmp_path / "plain"))
    with provplug.capture_writes(spark, store=tmp_path / "s.prov"):
        frame.write.parquet(str(tmp_path / "captured"))
    captured = tmp_path / "captured"
    assert _writers(captured) == {"parquet-cpp-arrow"}
    assert _writers(tmp_path / "plain") == {"parquet-mr"}
    assert _read(spark, captured) == _read(spark, tmp_path / "plain")
    names = sorted(os.listdir(captured))
    assert names[0] == "_SUCCESS" and all(n.startswith("part-") and n.endswith(".snappy.parquet") for n in names[1:])
    stored = sorted(r["id"] for r in table_rows(tmp_path / "s.prov", "captured"))
    assert stored == [1, 2, 3]


def test_overwrite_replaces_append_adds_and_compression_is_honoured(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    spark.range(5).write.parquet(str(out))
    old = {n for n in os.listdir(out) if n.startswith("part-")}
    with provplug.capture_writes(spark, store=tmp_path / "s.prov"):
        spark.range(10, 13).write.mode("overwrite").parquet(str(out))
        assert not old & set(os.listdir(out))
        assert sorted(r.id for r in spark.read.parquet(str(out)).collect()) == [10, 11, 12]
        spark.range(20, 22).write.mode("append").option("compression", "gzip").parquet(str(out))
    assert sorted(r.id for r in spark.read.parquet(str(out)).collect()) == [10, 11, 12, 20, 21]
    gz = [p for p in out.iterdir() if p.name.endswith(".gz.parquet")]
    assert gz and all(pq.read_metadata(p).row_group(0).column(0).compression == "GZIP" for p in gz)
    assert _writers(out) == {"parquet-cpp-arrow"}
    assert not [p for p in out.iterdir() if p.name.startswith("_provplug")]


def test_an_empty_result_leaves_one_file_with_its_schema(spark: Any, tmp_path: Path) -> None:
    empty = _frame(spark).where(F.col("id") < 0)
    with provplug.capture_writes(spark, store=tmp_path / "s.prov"):
        empty.write.format("parquet").save(str(tmp_path / "empty"))
    empty.write.parquet(str(tmp_path / "plain"))
    assert len(list((tmp_path / "empty").glob("*.parquet"))) == 1
    assert _read(spark, tmp_path / "empty") == _read(spark, tmp_path / "plain")


@pytest.mark.parametrize(
    "write",
    [
        lambda f, p: f.write.partitionBy("name").parquet(p),
        lambda f, p: f.write.option("parquet.block.size", 1 << 20).parquet(p),
        lambda f, p: f.select("id", "name").write.csv(p),
        lambda f, p: f.write.parquet(p, compression="lz4"),
    ],
    ids=["partitioned", "other-option", "csv", "other-codec"],
)
def test_other_writes_are_replayed_by_spark(spark: Any, tmp_path: Path, write: Any) -> None:
    with provplug.capture_writes(spark, store=tmp_path / "s.prov"):
        write(_frame(spark), str(tmp_path / "out"))
    assert _writers(tmp_path / "out") <= {"parquet-mr"}
    assert (tmp_path / "out" / "_SUCCESS").exists()


def test_an_existing_path_in_the_default_mode_fails_as_spark_fails(spark: Any, tmp_path: Path) -> None:
    spark.range(1).write.parquet(str(tmp_path / "out"))
    with (
        pytest.raises(Exception, match=r"PATH_ALREADY_EXISTS|already exists"),
        provplug.capture_writes(spark, store=tmp_path / "s.prov"),
    ):
        spark.range(2).write.parquet(str(tmp_path / "out"))
    assert [r.id for r in spark.read.parquet(str(tmp_path / "out")).collect()] == [0]


def test_a_failed_capture_job_leaves_nothing_and_spark_writes_the_users_files(
    spark: Any, tmp_path: Path, mocker: Any
) -> None:
    real = SparkCaptureSession._run_writer

    def failing(self: Any, frame: Any, body: Any, target: Any, runs: Any = None) -> Any:
        if target.direct is not None:
            assert os.path.isdir(target.direct.staging)  # the job would write there
            raise RuntimeError("the writer job failed")
        return real(self, frame, body, target, runs)

    mocker.patch.object(SparkCaptureSession, "_run_writer", failing)
    out = tmp_path / "fresh"
    with provplug.capture_writes(spark, store=tmp_path / "s.prov"):
        spark.range(3).write.parquet(str(out))  # the default mode: the path must not exist for Spark's write
    assert _writers(out) == {"parquet-mr"}
    assert sorted(r.id for r in spark.read.parquet(str(out)).collect()) == [0, 1, 2]
    assert not [p for p in out.iterdir() if p.name.startswith("_provplug")]
    [run] = open_store(tmp_path / "s.prov").runs()
    [uncaptured] = run["uncaptured_writes"]
    assert uncaptured["name"] == str(out) and "the writer job failed" in uncaptured["reason"]


def test_ignore_mode_over_an_existing_path_stores_nothing(spark: Any, tmp_path: Path) -> None:
    """Spark writes nothing there, so provplug stores nothing: a later read of the
    path is a source holding what was there."""
    old, fresh = tmp_path / "old", tmp_path / "fresh"
    spark.range(2).write.parquet(str(old))
    before = sorted(os.listdir(old))
    with provplug.capture_writes(spark, store=tmp_path / "s.prov"):
        spark.range(10, 15).write.mode("ignore").parquet(str(old))
        spark.range(20, 23).write.mode("ignore").parquet(str(fresh))
        spark.read.parquet(str(old)).write.parquet(str(tmp_path / "copy"))
    assert sorted(os.listdir(old)) == before
    writes = {o["name"] for o in open_store(tmp_path / "s.prov").ops().to_pylist()}
    assert writes == {"write:fresh", "write:copy"}
    assert sorted(r["id"] for r in table_rows(tmp_path / "s.prov", "old")) == [0, 1]  # the source as it was
    assert sorted(r["id"] for r in table_rows(tmp_path / "s.prov", "fresh")) == [20, 21, 22]


def test_a_write_the_job_made_itself_reads_no_stored_rows_back_until_they_are_used(
    spark: Any, tmp_path: Path, mocker: Any
) -> None:
    """The step's stored rows are read back (a listing and an analysis on the
    driver) only when later code reads what was written; a write nobody reads
    again never pays for it, and a read pays once."""
    read_back = mocker.spy(SparkCaptureSession, "_read_back")

    def tables_read_back() -> list[str]:
        return [c.args[1].name for c in read_back.call_args_list]

    with provplug.capture_writes(spark, store=tmp_path / "s.prov"):
        _frame(spark).write.parquet(str(tmp_path / "first"))
        assert "first" not in tables_read_back()
        again = spark.read.parquet(str(tmp_path / "first")).where(F.col("id") > 1)
        again.write.parquet(str(tmp_path / "second"))
    assert "first" in tables_read_back() and "second" not in tables_read_back()
    stored = sorted(r["id"] for r in table_rows(tmp_path / "s.prov", "second"))
    assert stored == [2, 3]
