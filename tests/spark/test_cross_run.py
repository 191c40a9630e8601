"""Lineage across runs (issue 26): a run that reads a dataset an earlier run
wrote is linked to the rows of the version it read — the latest committed
write of that dataset, when its files are still the ones that write left —
and lineage answers cross the run boundary and mark it. Files changed
outside provplug are a new source version."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import provplug
from provplug.testing import assert_lineage_matches_oracle

from .helpers import labelled_triples

# people (name, city, age) — by hand: the adults (age > 20) are ann (NY, 30), bob (NY, 40), cid (LA, 50).
PEOPLE = {"name": ["ann", "bob", "cid", "dan"], "city": ["NY", "NY", "LA", "NY"], "age": [30, 40, 50, 10]}
KEYS = {"people": ["name"], "adults": ["name"], "by_city": ["city"]}

JOB1 = """
    import sys
    from pyspark.sql import SparkSession, functions as F
    spark = SparkSession.builder.getOrCreate()
    people = spark.read.parquet(sys.argv[1])
    adults = people.where(F.col("age") > 20).select("name", "city", (F.col("age") * 2).alias("age2"))
    adults.write.mode("overwrite").parquet(sys.argv[2])
"""
JOB2 = """
    import sys
    from pyspark.sql import SparkSession, functions as F
    spark = SparkSession.builder.getOrCreate()
    adults = spark.read.parquet(sys.argv[1])
    adults.groupBy("city").agg(F.sum("age2").alias("total")).write.mode("overwrite").parquet(sys.argv[2])
"""


def _script(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def jobs(tmp_path: Path) -> dict[str, Path]:
    pq.write_table(pa.table(PEOPLE), tmp_path / "people.parquet")
    return {
        "people": tmp_path / "people.parquet",
        "adults": tmp_path / "stage" / "adults",
        "by_city": tmp_path / "final" / "by_city",
        "job1": _script(tmp_path, "job1.py", JOB1),
        "job2": _script(tmp_path, "job2.py", JOB2),
    }


def _run(cli: Any, store: Path, label: str, script: Path, *args: Path) -> None:
    result = cli("run", "--store", store, "--label", label, script, *args)
    assert result.code == 0, result.err


def _chain(cli: Any, store: Path, jobs: dict[str, Path]) -> None:
    _run(cli, store, "stage", jobs["job1"], jobs["people"], jobs["adults"])
    _run(cli, store, "report", jobs["job2"], jobs["adults"], jobs["by_city"])


def test_a_second_job_reading_the_first_jobs_output_links_to_its_rows(
    spark: Any, cli: Any, store_path: Path, jobs: dict[str, Path]
) -> None:
    _chain(cli, store_path, jobs)
    triples = labelled_triples(store_path, KEYS)
    # The read of adults in run 2 is the version run 1 wrote: each cell is the same cell of run 1's table.
    link = {(s, d, op) for s, d, op in triples if op == "read:adults"}
    assert link == {
        (("adults", c, n), ("adults", c, n), "read:adults")
        for n in ("ann", "bob", "cid")
        for c in ("name", "city", "age2")
    }
    answer = provplug.open(store_path).lineage(table="by_city", column="total", where="city = 'NY'", method="rq")
    data = answer.to_dict()
    sources = {(r["table"], r["column"], r["row"]["name"]) for r in answer.lineage if r["table"] == "people"}
    # By hand: NY's total = 2*30 + 2*40, from ann's and bob's ages in run 1's source (dan is under 20).
    assert sources == {("people", "age", "ann"), ("people", "age", "bob")}
    runs = {(r["table"], r["run"]["number"], r["run"]["label"]) for r in data["lineage"]}
    assert ("people", 1, "stage") in runs and ("adults", 2, "report") in runs and ("adults", 1, "stage") in runs
    [boundary] = data["run_boundaries"]
    assert boundary["op"] == "read:adults"
    assert (boundary["from"]["number"], boundary["from"]["label"], boundary["to"]["number"]) == (1, "stage", 2)
    assert "run boundary: adults of run 1 (stage) -> read:adults -> adults of run 2 (report)" in answer.render()
    assert_lineage_matches_oracle(store_path, methods=("rq", "ccprov", "csprov"), sample=30)
    # Run 2 only read adults: the table resolves to the run that wrote it, which alone wrote it.
    result = cli("lineage", store_path, "adults.age2", "--where", "name = 'ann'", "--format", "json")
    assert result.code == 0, result.err
    run = json.loads(result.out)["run"]
    assert (run["number"], run["label"]) == (1, "stage")
    copy = provplug.open(store_path).lineage(table="adults", column="age2", where="name = 'ann'", run="2")
    assert sorted((r["table"], r["value"], r["run"]["number"]) for r in copy.lineage) == [
        ("adults", 60, 1),
        ("people", 30, 1),
    ]


def test_overwriting_the_dataset_outside_provplug_makes_a_new_source_version(
    spark: Any, cli: Any, store_path: Path, jobs: dict[str, Path]
) -> None:
    _run(cli, store_path, "stage", jobs["job1"], jobs["people"], jobs["adults"])
    # Outside provplug: the same rows rewritten (new files) — no longer the files run 1 left.
    spark.read.parquet(str(jobs["adults"])).write.mode("overwrite").parquet(str(jobs["adults"]) + "-copy")
    spark.read.parquet(str(jobs["adults"]) + "-copy").write.mode("overwrite").parquet(str(jobs["adults"]))
    _run(cli, store_path, "report", jobs["job2"], jobs["adults"], jobs["by_city"])
    assert not any(op.startswith("read:") for _, _, op in labelled_triples(store_path, KEYS))
    answer = (
        provplug.open(store_path).lineage(table="by_city", column="total", where="city = 'NY'", method="rq").to_dict()
    )
    assert {r["table"] for r in answer["lineage"]} == {"adults"}  # run 2's own source: lineage stops there
    assert answer["run_boundaries"] == []


def test_touching_a_file_is_a_new_version_too(cli: Any, store_path: Path, jobs: dict[str, Path]) -> None:
    _run(cli, store_path, "stage", jobs["job1"], jobs["people"], jobs["adults"])
    part = next(p for p in jobs["adults"].iterdir() if p.name.startswith("part-"))
    stat = part.stat()
    os.utime(part, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    _run(cli, store_path, "report", jobs["job2"], jobs["adults"], jobs["by_city"])
    versions = json.loads((next((store_path / "runs").iterdir()) / "versions.json").read_text())
    assert versions["writes"] and not any(op.startswith("read:") for _, _, op in labelled_triples(store_path, KEYS))


@provplug.step("Totals", output="totals")
def _totals(adults: Any) -> Any:
    from pyspark.sql import functions as F

    return adults.groupBy("city").agg(F.sum("age2").alias("total"))


def test_capture_writes_then_provplug_capture_link_the_same_way(
    spark: Any, store_path: Path, jobs: dict[str, Path]
) -> None:
    from pyspark.sql import functions as F

    with provplug.capture_writes(spark, store=store_path, label="stage"):
        people = spark.read.parquet(str(jobs["people"]))
        adults = people.where(F.col("age") > 20).select("name", "city", (F.col("age") * 2).alias("age2"))
        adults.write.mode("overwrite").parquet(str(jobs["adults"]))
    with provplug.capture(spark, store=store_path, label="report") as run:
        _totals(run.source(spark.read.parquet(str(jobs["adults"])), "adults"))
    answer = provplug.open(store_path).lineage(table="totals", column="total", where="city = 'NY'", method="rq")
    assert {(r["column"], r["row"]["name"]) for r in answer.lineage if r["table"] == "people"} == {
        ("age", "ann"),
        ("age", "bob"),
    }
    assert [(b["from"]["label"], b["op"], b["to"]["label"]) for b in answer.run_boundaries] == [
        ("stage", "read:adults", "report")
    ]


def test_a_fingerprint_names_every_file_with_size_and_mtime_and_reads_are_matched_below_the_dataset(
    tmp_path: Path,
) -> None:
    from provplug.errors import DamagedStoreError
    from provplug.store.versions import FileStamp, WrittenVersion, fingerprint, parse_versions, relative_files

    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "part-0.parquet").write_bytes(b"abc")
    (folder / "_SUCCESS").write_bytes(b"")
    stamps = fingerprint("file", str(folder))
    assert stamps is not None
    assert [(s.path, s.size) for s in stamps] == [("_SUCCESS", 0), ("part-0.parquet", 3)]
    assert WrittenVersion(1, "file", str(folder), stamps).data_files == {"part-0.parquet"}
    assert relative_files("file", str(folder), [f"file://{folder}/part-0.parquet"]) == {"part-0.parquet"}
    assert relative_files("file", str(folder), [f"file://{tmp_path}/other/part-0.parquet"]) is None
    assert fingerprint("file", str(tmp_path / "missing")) is None
    assert fingerprint("hive://metastore:9083", "db.table") is None  # a catalog table is not fingerprinted
    (folder / "part-0.parquet").write_bytes(b"abcd")
    assert fingerprint("file", str(folder)) != stamps
    assert FileStamp("part-0.parquet", 4, 0) in {
        FileStamp(s.path, s.size, 0) for s in fingerprint("file", str(folder)) or ()
    }
    with pytest.raises(DamagedStoreError, match=r"versions\.json"):
        parse_versions('{"format": "provplug-versions", "version": 9}', "runs/x/versions.json")
