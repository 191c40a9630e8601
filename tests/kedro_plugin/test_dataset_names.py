"""Kedro datasets' table names (issue 25): the transcoding suffix is dropped
(``companies@spark`` is the table ``companies``), the dataset's file is
recorded as its identity, and the names are the same in every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import provplug

kedro_io = pytest.importorskip("kedro.io")
pytest.importorskip("kedro_datasets.spark")
from kedro.pipeline import node, pipeline  # noqa: E402
from provplug_kedro.hooks import ProvplugHooks  # noqa: E402
from provplug_spark.naming import DatasetId, path_identity  # noqa: E402

from .test_hooks import run_like_a_session  # noqa: E402


def _busy(companies: Any) -> Any:
    return companies.filter(companies["rating"] > 3)


def test_transcoded_datasets_are_named_without_their_suffix_in_every_run(spark: Any, tmp_path: Path) -> None:
    from kedro.io import DataCatalog
    from kedro_datasets.spark import SparkDataset

    from provplug.cli.main import main

    raw = tmp_path / "data" / "01_raw" / "companies.parquet"
    spark.createDataFrame([(1, 5), (2, 2), (3, 4)], "id int, rating int").write.parquet(str(raw))
    primary = tmp_path / "data" / "03_primary" / "output"
    store = tmp_path / "store.prov"
    for _ in range(2):
        catalog = DataCatalog(
            {
                "companies@spark": SparkDataset(filepath=str(raw), file_format="parquet"),
                "busy_companies@spark": SparkDataset(
                    filepath=str(primary), file_format="parquet", save_args={"mode": "overwrite"}
                ),
            }
        )
        flow = pipeline([node(_busy, "companies@spark", "busy_companies@spark", name="busy")])
        run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)

    target = provplug.open_store(store)
    runs = [m["run_id"] for m in sorted(target.runs(), key=lambda m: m["started"])]
    tables = target.tables().to_pylist()
    named = [
        sorted((t["name"], t["origin"], t["namespace"], t["dataset"]) for t in tables if t["run_id"] == run)
        for run in runs
    ]
    assert (
        named[0]
        == named[1]
        == [
            ("busy_companies", "output", "file", str(primary)),
            ("companies", "source", "file", str(raw)),
        ]
    )
    assert main(["index", str(store)]) == 0
    answer = provplug.open(store).lineage(table="busy_companies", column="rating", where="id = 3", run="latest")
    assert sorted((v["table"], v["column"], v["value"]) for v in answer.to_dict()["lineage"]) == [
        ("companies", "rating", 4)
    ]


def test_a_relative_filepath_is_the_project_s_and_a_protocol_names_the_namespace(tmp_path: Path) -> None:
    """Kedro runs from the project's root, so a relative filepath is a file under it;
    fsspec datasets keep the protocol apart from the path."""
    from kedro.io import DataCatalog, MemoryDataset
    from kedro_datasets.pandas import CSVDataset
    from kedro_datasets.spark import SparkDataset
    from provplug_kedro.hooks import _catalog_identity

    catalog = DataCatalog(
        {
            "local@spark": SparkDataset(filepath="data/01_raw/shuttles", file_format="parquet"),
            "remote": CSVDataset(filepath="s3://lake/raw/reviews.csv"),
            "kept": MemoryDataset(1),
        }
    )
    assert (_catalog_identity(catalog, "local@spark", str(tmp_path))) == path_identity(
        str(tmp_path / "data" / "01_raw" / "shuttles")
    )
    assert _catalog_identity(catalog, "remote", str(tmp_path)) == DatasetId("s3://lake", "raw/reviews.csv")
    assert _catalog_identity(catalog, "kept", str(tmp_path)) is None
    assert _catalog_identity(catalog, "absent", str(tmp_path)) is None
