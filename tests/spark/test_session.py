"""The capture session (provplug_spark.session): steps and runs, background
writes, pending outputs, lifecycle hooks, and what a failure leaves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.errors import CaptureError
from provplug.store.open import open_store

from .helpers import (
    T_ROWS,
    F,
    capture,
    count_all,
    count_per_key,
    expect,
    labelled_triples,
    ops,
)


# -- steps ---------------------------------------------------------------------------------
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


def test_steps_run_unchanged_outside_a_capture(spark: Any) -> None:
    @provplug.step("R1", output="Person2")
    def adults(df: Any) -> Any:
        return df.filter(F.col("Age") >= 25)

    people = spark.createDataFrame([("Steve", 30), ("Mary", 20)], "Name string, Age int")
    out = adults(people)
    assert out.columns == ["Name", "Age"]
    assert [r.Name for r in out.collect()] == ["Steve"]


def test_lifecycle_hooks_fire_for_the_run_and_every_step(spark: Any, store_path: Path) -> None:
    from provplug.plugin.manager import get_plugins

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
        ("step_started", "A"),
        ("step_finished", "A:builtin:None"),
        ("step_started", "B"),
        ("step_finished", "B:builtin:None"),
        ("run_finished", "committed"),
    ]
    assert {n: o["triples"] for n, o in ops(store_path).items()} == {"A": 4, "B": 2}
    assert all(o["started"] <= o["finished"] for o in ops(store_path).values())
    events.clear()
    with pytest.raises(CaptureError):
        capture(spark, store_path, {"T": T_ROWS}, lambda f: bad(f["T"]), strict=True)
    assert events == [
        ("run_started", "spark"),
        ("step_started", "Bad"),
        ("step_failed", "Bad"),
        ("run_finished", "failed"),
    ]


def test_store_rows_off_keeps_ids_only(spark: Any, store_path: Path) -> None:
    @provplug.step("F", output="Out")
    def big(df: Any) -> Any:
        return df.where(F.col("b") > 150).select("k", "a")

    capture(spark, store_path, {"T": T_ROWS}, lambda f: big(f["T"]).count(), store_rows=False)
    s = open_store(store_path)
    assert s.run_paths("rows") == []
    assert {t["name"]: (t["stored_rows"], t["rows"]) for t in s.tables().to_pylist()} == {
        "T": (False, 2),
        "Out": (False, 1),
    }
    assert s.triples().count_rows() == 2


def test_a_pending_output_answers_schema_questions_while_it_is_written(spark: Any, store_path: Path) -> None:
    """``.columns``/``.schema`` of a step output wait for its write outside
    PySpark's cached_property lock (one lock for all DataFrames before Python
    3.12), so the writer thread's own schema lookups do not deadlock."""
    import threading

    seen: list[Any] = []

    def body(f: dict[str, Any]) -> None:
        counts = count_per_key(f["T"])
        seen.extend([counts.columns, counts.schema.simpleString(), counts.count()])

    worker = threading.Thread(
        target=capture,
        daemon=True,
        args=(spark, store_path, {"T": ([(1, "a"), (2, "b"), (2, "c")], "k int, v string")}, body),
    )
    worker.start()
    worker.join(timeout=300)
    assert not worker.is_alive(), "capture deadlocked"
    assert seen == [["k", "n"], "struct<k:int,n:bigint>", 2]


# -- failures commit nothing ---------------------------------------------------------------
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


def test_a_failed_output_write_surfaces_where_the_output_is_used(spark: Any, store_path: Path, mocker: Any) -> None:
    """A step's output is written in the background: its DataFrame raises the
    write's error when first used, the run fails and nothing is committed."""
    from conftest import snapshot
    from provplug_spark import session as spark_session

    rows = {"T": ([(1, "a"), (2, "b")], "k int, v string")}
    capture(spark, store_path, rows, lambda f: count_per_key(f["T"]))
    before = snapshot(store_path)
    real = spark_session.SparkCaptureSession._run_writer

    def failing(self: Any, frame: Any, body: Any, target: Any, runs: Any = None) -> Any:
        if target.op_id != 0:  # a step output's write (a source's has no op)
            raise OSError("disk full")
        return real(self, frame, body, target, runs)

    mocker.patch.object(spark_session.SparkCaptureSession, "_run_writer", failing)
    # raised where the output is used, and again when the capture block ends
    with pytest.raises(OSError, match="disk full"), provplug.capture(spark, store=store_path) as run:
        counts = count_per_key(run.source(spark.createDataFrame(*rows["T"]), "T"))  # returns at once
        with pytest.raises(OSError, match="disk full"):
            counts.count()
    assert snapshot(store_path) == before


def test_a_failed_background_triple_write_fails_the_run(
    spark: Any, store_path: Path, mocker: Any, joined_global_aggregates: None
) -> None:
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
