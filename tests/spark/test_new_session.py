"""Writes from ``spark.newSession()`` (issue 25): sessions of one
SparkContext are captured into one run, and lineage crosses from a write of
one session to a read of it in the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.testing import assert_lineage_matches_oracle

from .helpers import expect, labelled_triples

F = pytest.importorskip("pyspark.sql.functions")


def test_writes_of_a_new_session_join_the_run_of_the_first(spark: Any, store_path: Path, tmp_path: Path) -> None:
    people, adults, greetings = tmp_path / "people.csv", tmp_path / "adults", tmp_path / "greetings"
    people.write_text("name,age\nann,30\nbob,20\ncid,40\n")
    other = spark.newSession()
    other.conf.set("spark.sql.shuffle.partitions", "3")  # its own settings, as a new session may have
    with provplug.capture_writes(spark, store=store_path) as writes:
        read = spark.read.option("header", True).option("inferSchema", True).csv(str(people))
        read.filter(F.col("age") > 25).write.parquet(str(adults))
        # The other session reads what the first wrote, through a view only it knows.
        other.read.parquet(str(adults)).createOrReplaceTempView("adults_view")
        shouts = other.createDataFrame([("ann", "HI"), ("cid", "YO")], "who string, word string")
        other.sql(
            "SELECT a.name, concat(s.word, ' ', a.name) AS greeting FROM adults_view a JOIN {s} s ON a.name = s.who",
            s=shouts,
        ).write.parquet(str(greetings))
    assert writes.run is not None
    assert sorted(tuple(r) for r in spark.read.parquet(str(greetings)).collect()) == [
        ("ann", "HI ann"),
        ("cid", "YO cid"),
    ]
    want = expect(
        "write:adults",
        "adults",
        {(col, n): [("people", col, n)] for n in ("ann", "cid") for col in ("name", "age")},
    )
    want |= expect(
        "write:greetings",
        "greetings",
        {
            cell: parents
            for n, word in (("ann", "HI"), ("cid", "YO"))
            for cell, parents in {
                ("name", n): [("adults", "name", n)],
                ("greeting", n): [("adults", "name", n), ("greetings-input", "word", n)],
            }.items()
        },
    )
    assert labelled_triples(store_path) == want
    assert_lineage_matches_oracle(store_path)
