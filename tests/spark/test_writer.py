"""Writing rows and triples from Spark tasks (provplug_spark.writer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provplug.store.open import open_store

from .helpers import (
    capture,
    count_per_key,
    ops,
)


def test_rows_and_triples_keep_only_the_files_of_used_task_attempts(spark: Any, store_path: Path, mocker: Any) -> None:
    """Writer tasks name files by partition and attempt; a file no used
    attempt reported (a failed or duplicate attempt's) is deleted."""
    from provplug_spark import session as spark_session

    strays: list[Path] = []
    real = spark_session.SparkCaptureSession._run_writer

    def with_stray(self: Any, job: Any, target: Any, runs: Any = None) -> Any:
        for destination in (target.rows, target.triples):
            if destination is not None:
                stray = Path(destination.file(f"{target.stem(0, 7)}-00000.parquet"))
                stray.write_bytes(b"half a file from a lost attempt")
                strays.append(stray)
        return real(self, job, target, runs)

    mocker.patch.object(spark_session.SparkCaptureSession, "_run_writer", with_stray)
    capture(
        spark, store_path, {"T": ([(1, "a"), (2, "b"), (2, "c")], "k int, v string")}, lambda f: count_per_key(f["T"])
    )
    assert strays and not any(p.exists() for p in strays)
    run_dir = Path(open_store(store_path).run_paths("rows")[0]).parent
    assert not [p for p in run_dir.rglob("*-a7-*.parquet")]
    assert ops(store_path)["Count"]["triples"] == len(open_store(store_path).triples().to_table())
