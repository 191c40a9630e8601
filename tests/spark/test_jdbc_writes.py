"""JDBC writes are seen (issue 25): ``DataFrameWriter.jdbc``, a V2
``writeTo(...).createOrReplace()`` into a JDBC catalog and SQL ``CREATE OR
REPLACE TABLE ... AS SELECT`` are captured and written from the stored rows,
into a real database: HSQLDB in-process (Debian's libhsqldb-java, which
.ci/run installs; the shared session has its jar on the class path)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import HSQLDB_JAR

import provplug

from .helpers import F, ops, table_rows

DRIVER = "org.hsqldb.jdbc.JDBCDriver"
EVENTS = [(1, "u20"), (2, "u02"), (3, "u07"), (4, "u11")]
CATALOG = "provplug_hsql"


@pytest.fixture
def database(spark: Any) -> Iterator[str]:
    """The URL of a fresh in-memory HSQLDB database (with PostgreSQL's type
    names: Spark's generic JDBC dialect makes strings TEXT), its catalog configured."""
    if not HSQLDB_JAR.is_file():
        reason = f"HSQLDB's JDBC driver is not installed ({HSQLDB_JAR}; apt-get install libhsqldb-java)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    url = f"jdbc:hsqldb:mem:provplug_{uuid.uuid4().hex};sql.syntax_pgs=true"
    confs = {"": "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog", ".url": url, ".driver": DRIVER}
    for key, value in confs.items():
        spark.conf.set(f"spark.sql.catalog.{CATALOG}{key}", value)
    yield url
    for key in confs:
        spark.conf.unset(f"spark.sql.catalog.{CATALOG}{key}")


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in frame.collect())


def _stored(store: Path, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in table_rows(store, table))


def test_jdbc_writes_are_captured_and_written_from_the_stored_rows(spark: Any, database: str, store_path: Path) -> None:
    events = spark.createDataFrame(EVENTS, "event_id int, user string")
    properties = {"driver": DRIVER}
    with provplug.capture_writes(spark, store=store_path):
        events.withColumn("r", F.rand()).write.jdbc(database, "NOISY", mode="overwrite", properties=properties)
        events.withColumn("u", F.expr("uuid()")).writeTo(f"{CATALOG}.PUBLIC.KEYED").createOrReplace()
        spark.sql(
            f"CREATE OR REPLACE TABLE {CATALOG}.PUBLIC.UPPER AS SELECT event_id, upper(user) AS name FROM {{e}}",
            e=events,
        )
    written = _rows(spark.read.jdbc(database, "NOISY", properties=properties))
    assert written == _stored(store_path, "NOISY", ["event_id", "user", "r"]) and len(written) == len(EVENTS)
    keyed = _rows(spark.table(f"{CATALOG}.PUBLIC.KEYED"))
    assert keyed == _stored(store_path, "KEYED", ["event_id", "user", "u"]) and len(keyed) == len(EVENTS)
    assert _rows(spark.table(f"{CATALOG}.PUBLIC.UPPER")) == [(e, u.upper()) for e, u in EVENTS]
    steps = ops(store_path)
    assert set(steps) == {"write:NOISY", "write:KEYED", "write:UPPER"}
    # the JDBC dataset is named by its URL and table, never the URL's parameters
    assert json.loads(steps["write:NOISY"]["params"])["dataset"] == f"{database.split(';')[0]}/NOISY"
