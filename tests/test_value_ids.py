"""Value ids given by hand (``lineage --value-id``) on a Spark-captured store:
Spark numbers a table's rows ``(partition << bits) | index``, so a valid row
number may exceed the table's row count; a row the table does not have is
still refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug import ids, schema
from provplug.errors import LineageQueryError
from provplug.store.open import open_store

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def two_partitions(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pyspark.sql import functions as F

    store = tmp_path_factory.mktemp("value-ids") / "store.prov"

    @provplug.step("double", output="doubled")
    def doubled(t: Any) -> Any:
        return t.select(F.col("k"), (F.col("v") * 2).alias("v2"))

    with provplug.capture(spark, store=store) as run:
        source = run.source(
            spark.createDataFrame([(i, i * 10) for i in range(8)], "k int, v int").repartition(2, "k"), "Numbers"
        )
        doubled(source)
    provplug.open(store).index(engine="local")
    return store


def _row_numbers(store: Path, name: str) -> tuple[int, list[int]]:
    s = open_store(store)
    (table,) = [t for t in s.tables().to_pylist() if t["name"] == name]
    rows = s.read_rows(table["run_id"], table["table_id"])
    return table["table_id"], sorted(rows.column(schema.ROW_COLUMN).to_pylist())


def test_a_row_of_a_later_partition_is_a_known_value(two_partitions: Path) -> None:
    table, rows = _row_numbers(two_partitions, "doubled")
    beyond = [r for r in rows if r >= len(rows)]
    assert beyond, rows  # the test needs a sparse row number (a second partition)
    value = ids.value_id(table, 1, beyond[0])
    answer = provplug.open(two_partitions).lineage(value_id=value)
    (asked,) = answer.query
    assert (asked["value_id"], asked["table"], asked["column"]) == (value, "doubled", "v2")
    (source,) = answer.lineage  # v2 = v * 2 of the same row
    assert (source["table"], source["column"]) == ("Numbers", "v")
    assert source["value"] * 2 == asked["value"] and source["row"]["k"] == asked["row"]["k"]


def test_a_row_the_table_does_not_have_is_refused(two_partitions: Path) -> None:
    table, rows = _row_numbers(two_partitions, "doubled")
    missing = max(rows) + 1
    with pytest.raises(LineageQueryError, match=f"unknown value id {ids.value_id(table, 1, missing)}"):
        provplug.open(two_partitions).lineage(value_id=ids.value_id(table, 1, missing))
