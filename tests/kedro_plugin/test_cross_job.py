"""A Kedro run reading a dataset a ``provplug run`` script wrote (issue 26):
its free input is the version the script's run wrote, and lineage from the
Kedro output goes back, across the run boundary, to the script's sources."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import provplug

kedro_io = pytest.importorskip("kedro.io")
pytest.importorskip("kedro_datasets.spark")
from kedro.pipeline import node, pipeline  # noqa: E402
from provplug_kedro.hooks import ProvplugHooks  # noqa: E402

from .test_hooks import run_like_a_session  # noqa: E402

# By hand: the script keeps the adults (age > 20) and doubles their age:
# ann NY 60, bob NY 80, cid LA 100; the Kedro node sums age2 by city: NY 140 from ann's and bob's ages.
PEOPLE = {"name": ["ann", "bob", "cid", "dan"], "city": ["NY", "NY", "LA", "NY"], "age": [30, 40, 50, 10]}
JOB = """
    import sys
    from pyspark.sql import SparkSession, functions as F
    spark = SparkSession.builder.getOrCreate()
    people = spark.read.parquet(sys.argv[1])
    people.where(F.col("age") > 20).select("name", "city", (F.col("age") * 2).alias("age2")) \\
        .write.mode("overwrite").parquet(sys.argv[2])
"""


def _by_city(adults: Any) -> Any:
    from pyspark.sql import functions as F

    return adults.groupBy("city").agg(F.sum("age2").alias("total"))


def _kedro_run(store: Path, adults: Path, out: Path, project: Path) -> None:
    from kedro.io import DataCatalog
    from kedro_datasets.spark import SparkDataset

    catalog = DataCatalog(
        {
            "adults@spark": SparkDataset(filepath=str(adults), file_format="parquet"),
            "by_city@spark": SparkDataset(filepath=str(out), file_format="parquet", save_args={"mode": "overwrite"}),
        }
    )
    flow = pipeline([node(_by_city, "adults@spark", "by_city@spark", name="by_city")])
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, project)


def test_a_kedro_run_reading_a_scripts_output_links_to_the_scripts_run(spark: Any, cli: Any, tmp_path: Path) -> None:
    store, adults = tmp_path / "store.prov", tmp_path / "stage" / "adults"
    pq.write_table(pa.table(PEOPLE), tmp_path / "people.parquet")
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    result = cli("run", "--store", store, "--label", "stage", script, tmp_path / "people.parquet", adults)
    assert result.code == 0, result.err
    _kedro_run(store, adults, tmp_path / "final" / "by_city", tmp_path)

    answer = provplug.open(store).lineage(table="by_city", column="total", where="city = 'NY'", method="rq")
    people = {(r["column"], r["row"]["name"]) for r in answer.lineage if r["table"] == "people"}
    assert people == {("age", "ann"), ("age", "bob")}
    [boundary] = answer.run_boundaries
    assert boundary["op"] == "read:adults"
    assert (boundary["from"]["table"], boundary["from"]["number"], boundary["from"]["label"]) == ("adults", 1, "stage")
    assert (boundary["to"]["table"], boundary["to"]["number"]) == ("adults", 2)
    assert "run boundary: adults of run 1 (stage) -> read:adults -> adults of run 2" in answer.render()
