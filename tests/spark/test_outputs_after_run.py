"""DataFrames a capture run hands out (``run.source`` and step outputs) keep
working after the ``with`` block, as they would without provplug: whether the
run kept rows or not, committed or failed, and whatever later happens to the
store (issue 11, "Outputs stay usable")."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.store.open import open_store

from .helpers import F

PEOPLE = [("Steve", "NY", 30), ("Mark", "NY", 40), ("Mary", "LA", 20), ("John", "LA", 50)]
PEOPLE_DDL = "Name string, City string, Age int"
# By hand: adults are Steve, Mark, John; average age NY (30+40)/2, LA 50.
ADULTS = {"Steve", "Mark", "John"}
AVERAGES = {("LA", 50.0), ("NY", 35.0)}


@provplug.step("R1", output="Person2")
def adults(df: Any) -> Any:
    return df.filter(F.col("Age") >= 25)


@provplug.step("R2", output="AvgAge")
def avg_age(df: Any) -> Any:
    return df.groupBy("City").agg(F.avg("Age").alias("Age"))


def _people_parquet(spark: Any, tmp_path: Path) -> str:
    path = str(tmp_path / "people.parquet")
    spark.createDataFrame(PEOPLE, PEOPLE_DDL).coalesce(1).write.parquet(path)
    return path


def _captured(spark: Any, tmp_path: Path, store: Path, **kwargs: Any) -> tuple[Any, Any, Any, Any]:
    """A Parquet-file source (stored as copies), a driver-built source and two chained steps."""
    with provplug.capture(spark, store=store, **kwargs) as run:
        files = run.source(spark.read.parquet(_people_parquet(spark, tmp_path)), "Person1")
        built = run.source(spark.createDataFrame([("NY", "east")], "City string, Coast string"), "Coasts")
        p2 = adults(files)
        avg = avg_age(p2)
        assert {r.Name for r in p2.collect()} == ADULTS  # used inside the block too
    return files, built, p2, avg


def _averages(frame: Any) -> set[tuple[str, float]]:
    return {(r.City, r.Age) for r in frame.collect()}


@pytest.mark.parametrize("store_rows", [True, False])
def test_outputs_and_sources_work_after_the_block(
    spark: Any, tmp_path: Path, store_path: Path, store_rows: bool
) -> None:
    files, built, p2, avg = _captured(spark, tmp_path, store_path, store_rows=store_rows)
    assert _averages(avg) == AVERAGES
    assert p2.count() == 3 and files.count() == 4
    assert [tuple(r) for r in built.collect()] == [("NY", "east")]
    # a further transform, a join of an output with a source, and a write
    assert {r.Name for r in p2.filter(F.col("City") == "NY").collect()} == {"Steve", "Mark"}
    assert {(r.City, r.Coast) for r in avg.join(built, "City").collect()} == {("NY", "east")}
    avg.write.parquet(str(tmp_path / "avg.parquet"))
    assert _averages(spark.read.parquet(str(tmp_path / "avg.parquet"))) == AVERAGES
    assert len(open_store(store_path).runs()) == 1  # and the run is committed as before


def test_outputs_work_after_a_failed_run(spark: Any, tmp_path: Path, store_path: Path) -> None:
    kept: dict[str, Any] = {}
    with pytest.raises(ValueError, match="the user's own error"), provplug.capture(spark, store=store_path) as run:
        kept["p2"] = adults(run.source(spark.createDataFrame(PEOPLE, PEOPLE_DDL), "Person1"))
        kept["avg"] = avg_age(kept["p2"])
        raise ValueError("the user's own error")
    assert not store_path.exists()  # nothing committed: the failed first run removed the store it made
    assert _averages(kept["avg"]) == AVERAGES
    assert {r.Name for r in kept["p2"].collect()} == ADULTS


def test_outputs_do_not_read_the_store_after_the_block(spark: Any, tmp_path: Path, store_path: Path) -> None:
    _files, _built, p2, avg = _captured(spark, tmp_path, store_path)
    shutil.rmtree(store_path)
    assert _averages(avg) == AVERAGES
    assert {r.Name for r in p2.collect()} == ADULTS
