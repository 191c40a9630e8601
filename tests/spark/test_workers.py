"""Spark's Python workers must import provplug (provplug_spark.workers)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import snapshot

import provplug
from provplug.errors import CaptureError
from provplug.store.open import open_store

from .helpers import capture, count_per_key, table_rows

ROWS = ([(1, "a"), (2, "b"), (2, "c")], "k int, v string")


@contextlib.contextmanager
def workers_run(spark: Any, python: str) -> Iterator[None]:
    """Spark starts its Python workers with ``python`` meanwhile (PySpark reads
    ``pythonExec`` whenever it ships a Python function)."""
    sc = spark.sparkContext
    real = sc.pythonExec
    sc.pythonExec = python
    try:
        yield
    finally:
        sc.pythonExec = real


def without_site(tmp_path: Path) -> str:
    """This interpreter without its site-packages (so without provplug,
    pyarrow and NumPy); pyspark still comes from the workers' PYTHONPATH."""
    script = tmp_path / "python-without-provplug"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    return str(script)


def test_workers_without_provplug_fail_the_capture_at_once_in_one_line(
    spark: Any, store_path: Path, tmp_path: Path
) -> None:
    capture(spark, store_path, {"T": ROWS}, lambda f: count_per_key(f["T"]).collect())
    before = snapshot(store_path)
    python = without_site(tmp_path)
    with workers_run(spark, python), pytest.raises(CaptureError) as caught, provplug.capture(spark, store=store_path):
        pytest.fail("the capture must fail when it opens")
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        f"Spark's Python workers run {python}, i.e. {sys.executable} (PYSPARK_PYTHON / spark.pyspark.python), "
        f"which cannot import provplug_spark: set PYSPARK_PYTHON={sys.executable} before the SparkSession "
        "starts, or install provplug where the workers run"
    )
    assert snapshot(store_path) == before
    # The workers Spark starts again can: the context captures as before.
    capture(spark, store_path, {"S": ROWS}, lambda f: count_per_key(f["S"]).collect())
    assert len(open_store(store_path).runs()) == 2
    assert table_rows(store_path, "Counts")


def test_workers_that_do_not_start_fail_the_capture_with_spark_s_reason(
    spark: Any, store_path: Path, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-python")
    with workers_run(spark, missing), pytest.raises(CaptureError) as caught, provplug.capture(spark, store=store_path):
        pytest.fail("the capture must fail when it opens")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"Spark's Python workers run {missing} (PYSPARK_PYTHON / spark.pyspark.python), "
        f'which fail (IOException: Cannot run program "{missing}"'
    )
    assert message.endswith(
        f"set PYSPARK_PYTHON={sys.executable} before the SparkSession starts, or install provplug where the workers run"
    )
    assert not store_path.exists()


def test_the_workers_are_checked_once_per_context(spark: Any, store_path: Path, tmp_path: Path, mocker: Any) -> None:
    from provplug_spark import workers

    probe = mocker.spy(workers, "_run_probe")
    # The tests' session starts its workers as the driver's own interpreter: nothing to check.
    capture(spark, store_path, {"A": ROWS}, lambda f: count_per_key(f["A"]).collect())
    assert probe.call_count == 0
    # Another interpreter that has provplug: checked by the first capture only.
    python = tmp_path / "python-with-provplug"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    with workers_run(spark, str(python)):
        for name in ("B", "C"):
            capture(spark, store_path, {name: ROWS}, lambda f, name=name: count_per_key(f[name]).collect())
    assert probe.call_count == 1
    assert len(open_store(store_path).runs()) == 3


@pytest.mark.parametrize("strict", [False, True])
def test_capture_writes_whose_run_cannot_start_lets_every_write_through(
    spark: Any, store_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, strict: bool
) -> None:
    """Issue 25 (fail open): under ``capture_writes`` the run starts at the
    first write; when it cannot (here: workers without provplug), the
    script's writes are done as in a plain run and the reason is logged once.
    A strict capture fails the first write instead, writing nothing."""
    out = tmp_path / "out"
    rows = [[(1, "a")], [(2, "b")]]
    with workers_run(spark, without_site(tmp_path)), contextlib.ExitStack() as failing:
        if strict:
            failing.enter_context(pytest.raises(CaptureError, match="cannot import provplug_spark"))
        with provplug.capture_writes(spark, store=store_path, strict=strict):
            for mode, batch in zip(("overwrite", "append"), rows, strict=True):
                spark.createDataFrame(batch, "k long, v string").write.mode(mode).parquet(str(out))
    if strict:
        assert not out.exists()
        return
    assert sorted(tuple(r) for r in spark.read.parquet(str(out)).collect()) == [(1, "a"), (2, "b")]
    said = [r.getMessage() for r in caplog.records if "the run could not start" in r.getMessage()]
    assert len(said) == 1 and "cannot import provplug_spark" in said[0], said
    assert not store_path.exists() or not open_store(store_path).runs()  # nothing committed
