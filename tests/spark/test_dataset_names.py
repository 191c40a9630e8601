"""Dataset identity and table names (issue 25): a table is identified as
OpenLineage names datasets (namespace + name) and named by a readable alias
of that identity, the same in every run (provplug_spark.naming)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from provplug_spark.naming import (
    Aliases,
    DatasetId,
    alias,
    alias_candidates,
    jdbc_identity,
    kedro_name,
    path_identity,
    paths_identity,
    table_identity,
)

import provplug
from provplug import schema
from provplug.store.open import open_store


# -- identity (OpenLineage's naming spec) --------------------------------------------------
@pytest.mark.parametrize(
    ("uri", "namespace", "name"),
    [
        ("file:/data/sales/2024", "file", "/data/sales/2024"),
        ("file:///data/sales/", "file", "/data/sales"),
        ("/data/sales.csv", "file", "/data/sales.csv"),
        ("s3a://lake/raw/sales/part-0.parquet", "s3://lake", "raw/sales/part-0.parquet"),
        ("s3://lake/raw/sales", "s3://lake", "raw/sales"),
        ("gs://bkt/x/y", "gs://bkt", "x/y"),
        ("hdfs://namenode:8020/warehouse/sales", "hdfs://namenode:8020", "/warehouse/sales"),
    ],
)
def test_path_identity_follows_openlineage(uri: str, namespace: str, name: str) -> None:
    assert path_identity(uri) == DatasetId(namespace, name)


def test_a_relative_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert path_identity("out/report") == DatasetId("file", f"{tmp_path}/out/report")


def test_paths_read_together_are_their_common_folder() -> None:
    months = ["file:/d/flights/2024/01", "file:/d/flights/2024/02"]
    assert paths_identity(months) == DatasetId("file", "/d/flights/2024")
    assert paths_identity(["s3a://b/k/x", "s3a://b/k/y"]) == DatasetId("s3://b", "k")


def test_catalog_and_jdbc_tables() -> None:
    assert table_identity("sales.orders", "thrift://meta:9083", None) == DatasetId(
        "hive://meta:9083", "sales.orders", is_path=False
    )
    assert table_identity("default.t", None, "file:/w/spark-warehouse").namespace == "file:/w/spark-warehouse"
    assert jdbc_identity("jdbc:postgresql://db:5432/shop?ssl=true", "orders") == DatasetId(
        "postgres://db:5432", "shop.public.orders", is_path=False
    )
    assert jdbc_identity("jdbc:postgresql://db/shop", "sales.orders").namespace == "postgres://db:5432"
    assert jdbc_identity("jdbc:mysql://db:3307/shop", "orders") == DatasetId("mysql://db:3307", "shop.orders", False)


# -- aliases ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("/data/flights/2024/*", "flights"),  # a glob names its folder; a year says nothing
        ("/data/flights/2024/01", "flights"),
        ("/jobs/report/output", "report"),
        ("/jobs/staging/tmp", "staging"),
        ("/in/customers/data", "customers"),
        ("/in/customers.csv", "customers"),
        ("/lake/sales/2024-01-31/part-00000.snappy.parquet", "sales"),
        ("/lake/sales/20240131", "sales"),
        ("/lake/sales/country=FR/day=1", "sales"),
        ("/out", "out"),  # nothing meaningful: the last component
    ],
)
def test_alias_skips_what_says_nothing(name: str, expected: str) -> None:
    assert alias(DatasetId("file", name)) == expected


def test_a_table_alias_is_its_table_name() -> None:
    assert alias(DatasetId("hive://m:9083", "sales.orders", is_path=False)) == "orders"


def test_kedro_transcoding_suffix_is_dropped() -> None:
    assert (kedro_name("companies@spark"), kedro_name("companies@pandas"), kedro_name("shuttles")) == (
        "companies",
        "companies",
        "shuttles",
    )


def test_aliases_keep_a_dataset_s_name_and_tell_datasets_apart() -> None:
    jan, feb = DatasetId("file", "/d/trips/2024-01"), DatasetId("file", "/d/trips/2024-02")
    east, west = DatasetId("file", "/east/report/output"), DatasetId("file", "/west/report/output")
    names = Aliases()
    got = [names.claim(alias(i), i) for i in (jan, feb, east, west)]
    assert got == ["trips", "trips-2024-02", "report", "west-report"]
    assert names.claim(alias(jan), jan) == "trips-2"  # the same dataset again in the run (read, then written)
    assert list(alias_candidates(feb))[:2] == ["trips", "trips-2024-02"]


# -- under provplug run ------------------------------------------------------------------------
def _month_folders(base: Path) -> None:
    for month, rows in (("01", [(1, "AA", 10)]), ("02", [(2, "BB", 20), (3, "AA", 5)])):
        folder = base / "flights" / "2024" / month
        folder.mkdir(parents=True)
        pq.write_table(
            pa.Table.from_pylist([{"id": i, "carrier": c, "delay": d} for i, c, d in rows]), folder / "p.parquet"
        )
    (base / "carriers" / "data").mkdir(parents=True)
    (base / "carriers" / "data" / "carriers.csv").write_text("carrier,title\nAA,American\nBB,Blue\n")


def _script(spark: Any, base: Path) -> None:
    """A monthly job: month folders read by glob, a lookup in a folder ``data``,
    an intermediate written to ``tmp`` and read back, a report in ``output``."""
    from pyspark.sql import functions as F

    flights = spark.read.parquet(str(base / "flights" / "2024" / "*"))
    carriers = spark.read.option("header", True).csv(str(base / "carriers" / "data"))
    joined = flights.join(carriers, "carrier")
    joined.write.mode("overwrite").parquet(str(base / "staging" / "tmp"))
    staged = spark.read.parquet(str(base / "staging" / "tmp"))
    staged.groupBy("title").agg(F.sum("delay").alias("delay")).write.mode("overwrite").parquet(
        str(base / "report" / "output")
    )


def _tables_of_run(cli: Any, store: Path, run: int) -> dict[str, tuple[str, str | None, str | None]]:
    listed = json.loads(cli("tables", store, "--run", str(run), "--json").out)
    return {t["name"]: (t["origin"], t["namespace"], t["dataset"]) for t in listed}


def test_names_are_readable_and_equal_across_runs(spark: Any, cli: Any, store_path: Path, tmp_path: Path) -> None:
    base = tmp_path / "job"
    _month_folders(base)
    for _ in range(2):
        with provplug.capture_writes(spark, store=store_path):
            _script(spark, base)
    first, second = _tables_of_run(cli, store_path, 1), _tables_of_run(cli, store_path, 2)
    assert (
        first
        == second
        == {
            "flights": ("source", "file", str(base / "flights" / "2024")),
            "carriers": ("source", "file", str(base / "carriers" / "data")),
            "staging": ("output", "file", str(base / "staging" / "tmp")),
            "report": ("output", "file", str(base / "report" / "output")),
        }
    )
    ops = {o["name"] for o in open_store(store_path).ops().to_pylist()}
    assert ops == {"write:staging", "write:report"}


def test_two_month_folders_read_apart_are_two_named_tables(spark: Any, store_path: Path, tmp_path: Path) -> None:
    base = tmp_path / "job"
    _month_folders(base)

    def script() -> None:
        jan = spark.read.parquet(str(base / "flights" / "2024" / "01"))
        feb = spark.read.parquet(str(base / "flights" / "2024" / "02"))
        jan.unionByName(feb).write.mode("overwrite").parquet(str(base / "both" / "output"))

    names = []
    for _ in range(2):
        with provplug.capture_writes(spark, store=store_path) as writes:
            script()
        assert writes.run is not None
        run_id = writes.run.run_id
        names.append(sorted(t["name"] for t in open_store(store_path).tables().to_pylist() if t["run_id"] == run_id))
    assert names[0] == names[1] == ["both", "flights", "flights-2024-02"]


def test_a_store_without_identity_columns_still_reads(spark: Any, cli: Any, store_path: Path, tmp_path: Path) -> None:
    """Stores written before tables had an identity: tables.parquet without the two columns."""
    csv = tmp_path / "people" / "data.csv"
    csv.parent.mkdir()
    csv.write_text("name,age\nann,30\n")
    with provplug.capture_writes(spark, store=store_path):
        spark.read.option("header", True).csv(str(csv)).write.parquet(str(tmp_path / "adults" / "output"))
    (tables_file,) = Path(store_path).glob("runs/*/tables.parquet")
    old = pq.read_table(tables_file).drop_columns(["namespace", "dataset"])
    assert "namespace" not in old.schema.names
    pq.write_table(old, tables_file)
    listed = json.loads(cli("tables", store_path, "--json").out)
    assert sorted((t["name"], t["namespace"], t["dataset"]) for t in listed) == [
        ("adults", None, None),
        ("people", None, None),
    ]
    assert open_store(store_path).tables().schema == schema.TABLES
    open_store(store_path).verify()


def test_a_catalog_table_is_its_name_in_the_warehouse(spark: Any, cli: Any, store_path: Path, tmp_path: Path) -> None:
    csv = tmp_path / "people" / "data"
    csv.mkdir(parents=True)
    (csv / "p.csv").write_text("name,age\nann,30\n")
    warehouse = path_identity(spark.conf.get("spark.sql.warehouse.dir"))
    try:
        with provplug.capture_writes(spark, store=store_path):
            spark.read.option("header", True).csv(str(csv)).write.saveAsTable("provplug_test_named")
            spark.table("provplug_test_named").write.parquet(str(tmp_path / "copy" / "out"))
    finally:
        spark.sql("DROP TABLE IF EXISTS provplug_test_named")
    assert _tables_of_run(cli, store_path, 1) == {
        "people": ("source", "file", str(csv)),
        "provplug_test_named": ("output", f"file:{warehouse.name}", "default.provplug_test_named"),
        "copy": ("output", "file", str(tmp_path / "copy" / "out")),
    }
