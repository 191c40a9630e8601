"""Deleting a run another run's lineage reads (issue 26): ``delete-run`` and
``gc --keep-last`` refuse, naming the reading run, unless ``--force``; when
forced, the reading run's answers mark the version they read as missing, and
every query method still answers (the index builds and agrees)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import snapshot

import provplug
from provplug.errors import NotIndexedError
from provplug.testing import assert_lineage_matches_oracle

pytest.importorskip("pyspark")

PEOPLE = {"name": ["ann", "bob", "cid", "dan"], "city": ["NY", "NY", "LA", "NY"], "age": [30, 40, 50, 10]}


@provplug.step("Totals", output="totals")
def _totals(adults: Any) -> Any:
    from pyspark.sql import functions as F

    return adults.groupBy("city").agg(F.sum("age2").alias("total"))


def _chain(spark: Any, store: Path, folder: Path) -> None:
    """Run 1 (stage) writes adults; run 2 (report) reads it: a linked read."""
    from pyspark.sql import functions as F

    pq.write_table(pa.table(PEOPLE), folder / "people.parquet")
    adults = str(folder / "adults")
    with provplug.capture_writes(spark, store=store, label="stage"):
        people = spark.read.parquet(str(folder / "people.parquet"))
        people.where(F.col("age") > 20).select("name", "city", (F.col("age") * 2).alias("age2")).write.parquet(adults)
    with provplug.capture(spark, store=store, label="report") as run:
        _totals(run.source(spark.read.parquet(adults), "adults"))


@pytest.fixture
def chained(spark: Any, tmp_path: Path) -> Path:
    store = tmp_path / "store.prov"
    _chain(spark, store, tmp_path)
    return store


@pytest.mark.parametrize("command", [("delete-run", "1"), ("gc", "--keep-last", "1")])
def test_deleting_a_run_another_run_read_is_refused_naming_the_reader(
    cli: Any, chained: Path, command: tuple[str, ...]
) -> None:
    before = snapshot(chained)
    result = cli(command[0], chained, *command[1:])
    assert result.code != 0
    [line] = result.err.strip().splitlines()
    assert "run 2 (label report" in line and "run 1 (label stage" in line and "--force" in line
    assert snapshot(chained) == before


def test_a_forced_deletion_marks_the_missing_version_in_the_readers_answers(cli: Any, chained: Path) -> None:
    before = provplug.open(chained).lineage(table="totals", column="total", where="city = 'NY'", method="rq")
    assert {r["table"] for r in before.lineage} == {"adults", "people"} and before.missing_versions == []
    assert cli("index", chained).code == 0
    result = cli("delete-run", chained, "1", "--force")
    assert result.code == 0, result.err
    assert "run 2 (report) read" in result.out and "missing" in result.out
    # The index still links run 2's cells to the deleted ones: it is refused until rebuilt.
    with pytest.raises(NotIndexedError):
        provplug.open(chained).lineage(table="totals", column="total", where="city = 'NY'", method="ccprov")
    assert cli("index", chained).code == 0
    for method in ("rq", "ccprov", "csprov"):
        answer = provplug.open(chained).lineage(table="totals", column="total", where="city = 'NY'", method=method)
        # Lineage stops at run 2's copy of the version run 1 wrote, and says why.
        assert {(r["table"], r["row"]["name"]) for r in answer.lineage} == {("adults", "ann"), ("adults", "bob")}
        [missing] = answer.missing_versions
        assert (missing["table"], missing["number"], missing["version_of"]) == (
            "adults",
            2,
            {"number": 1, "label": "stage"},
        )
        assert "missing version: adults of run 2 (report) is the version run 1 (stage) wrote" in answer.render()
    assert_lineage_matches_oracle(chained, methods=("rq", "ccprov", "csprov"), sample=20)


def test_gc_deletes_a_run_read_only_by_runs_it_deletes_too(cli: Any, chained: Path) -> None:
    result = cli("gc", chained, "--keep-last", "0")
    assert result.code == 0, result.err
    assert provplug.open_store(chained).runs() == []


def test_gc_force_deletes_and_says_which_run_read_it(cli: Any, chained: Path) -> None:
    result = cli("gc", chained, "--keep-last", "1", "--force")
    assert result.code == 0, result.err
    assert "deleted run 1" in result.out and "run 2 (report) read" in result.out
