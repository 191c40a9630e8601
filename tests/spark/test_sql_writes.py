"""Every write is seen (issue 25): SQL ``INSERT INTO`` / ``INSERT OVERWRITE`` /
``CREATE TABLE ... AS SELECT`` run through ``spark.sql`` and
``DataFrameWriter.xml`` are captured as write steps, written from the stored
rows (one execution); a SQL write provplug cannot capture runs as Spark runs
it and is recorded as an uncaptured write, shown by ``provplug runs``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.store.open import open_store

from .helpers import F, expect, labelled_triples, ops, table_rows

EVENTS = [(1, "u20"), (2, "u02"), (3, "u07"), (4, "u11"), (5, "u05"), (6, "u13")]
TABLES = ("provplug_sql_t", "provplug_sql_o")


@pytest.fixture
def events(spark: Any, tmp_path: Path) -> Iterator[Any]:
    csv = tmp_path / "events.csv"
    csv.write_text("event_id,user\n" + "".join(f"{e},{u}\n" for e, u in EVENTS))
    frame = spark.read.option("header", True).option("inferSchema", True).csv(str(csv))
    frame.createOrReplaceTempView("provplug_ev")
    yield frame
    spark.catalog.dropTempView("provplug_ev")
    for table in TABLES:
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def _rows(frame: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in frame.collect())


def _stored(store: Path, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in table_rows(store, table))


def test_sql_ctas_insert_and_insert_overwrite_are_captured_once(
    spark: Any, events: Any, store_path: Path, cli: Any, tmp_path: Path
) -> None:
    with provplug.capture_writes(spark, store=store_path):
        spark.sql("CREATE TABLE provplug_sql_t USING parquet AS SELECT event_id, user, rand() AS r FROM provplug_ev")
        spark.sql("INSERT INTO provplug_sql_t SELECT event_id, user, rand() AS r FROM provplug_ev WHERE event_id > 4")
        spark.sql("CREATE TABLE provplug_sql_o (event_id int, user string) USING parquet")  # no rows: not a write
        spark.sql("INSERT OVERWRITE TABLE provplug_sql_o SELECT event_id, upper(user) FROM provplug_ev")
        count = spark.sql("SELECT count(*) AS n FROM provplug_sql_t").collect()[0]["n"]  # runs unchanged
        directory = tmp_path / "exported"
        spark.sql(
            f"INSERT OVERWRITE DIRECTORY '{directory}' USING parquet SELECT event_id, rand() AS r FROM provplug_ev"
        )
        # a write inside a CTE is not captured: done as Spark does it, and recorded
        spark.sql("WITH x AS (SELECT * FROM provplug_ev) INSERT INTO provplug_sql_o SELECT event_id, user FROM x")
    assert count == len(EVENTS) + 2
    columns = ["event_id", "user", "r"]
    # the table holds exactly the rows the two writes stored (their rand() included)
    assert _rows(spark.table("provplug_sql_t"), columns) == sorted(
        _stored(store_path, "provplug_sql_t", columns) + _stored(store_path, "provplug_sql_t-2", columns)
    )
    assert _stored(store_path, "provplug_sql_o", ["event_id", "user"]) == [(e, u.upper()) for e, u in EVENTS]
    assert _rows(spark.read.parquet(str(directory)), ["event_id", "r"]) == _stored(
        store_path, "exported", ["event_id", "r"]
    )
    assert set(ops(store_path)) == {
        "write:provplug_sql_t",
        "write:provplug_sql_t-2",
        "write:provplug_sql_o",
        "write:exported",
    }
    # by hand: the overwrite's user cell of event 1 comes from the user cell of event 1
    triples = labelled_triples(store_path, {"events": ["event_id"], "provplug_sql_o": ["event_id"]})
    assert {t for t in triples if t[2] == "write:provplug_sql_o"} == expect(
        "write:provplug_sql_o",
        "provplug_sql_o",
        {
            cell: parents
            for e, _ in EVENTS
            for cell, parents in {
                ("event_id", e): [("events", "event_id", e)],
                ("user", e): [("events", "user", e)],
            }.items()
        },
    )
    [run] = open_store(store_path).runs()
    assert [w["name"] for w in run["uncaptured_writes"]] == ["provplug_sql_o"]
    shown = cli("runs", store_path)
    assert "did not capture the write of provplug_sql_o: a write inside another SQL statement" in shown.out


def test_an_xml_write_is_captured_and_written_from_the_stored_rows(
    spark: Any, events: Any, store_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "noisy.xml"
    with provplug.capture_writes(spark, store=store_path):
        events.withColumn("r", F.rand()).write.option("rowTag", "event").xml(str(out))
    written = spark.read.option("rowTag", "event").schema("event_id int, user string, r double").xml(str(out))
    columns = ["event_id", "user", "r"]
    assert _rows(written, columns) == _stored(store_path, "noisy", columns)
    assert len(_rows(written, columns)) == len(EVENTS)


def test_only_statements_naming_a_write_keyword_are_parsed_for_writes(
    spark: Any, events: Any, store_path: Path, mocker: Any
) -> None:
    """A query without INSERT, CREATE or REPLACE runs without provplug's
    parse; a write in lower case after a comment is still captured."""
    from provplug_spark import sqlwrites

    parse = mocker.spy(sqlwrites, "parsed_statement")
    with provplug.capture_writes(spark, store=store_path):
        assert spark.sql("SELECT count(*) AS n FROM provplug_ev").collect()[0]["n"] == len(EVENTS)
        assert parse.call_count == 0
        spark.sql("/* daily */create table provplug_sql_t using parquet as select event_id, user from provplug_ev")
        assert parse.call_count == 1
    assert set(ops(store_path)) == {"write:provplug_sql_t"}
    assert _rows(spark.table("provplug_sql_t"), ["event_id", "user"]) == sorted(EVENTS)
