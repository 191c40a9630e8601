"""Sources (provplug_spark.sources): a Parquet source stored as copies of its
files, numbered by position, or written when read with fewer columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import provplug
from provplug import schema
from provplug.store.open import open_store

from .helpers import (
    F,
    expect,
    labelled_triples,
    stored_rows,
    table_rows,
)


@pytest.mark.parametrize("first_rows", ["by name", "parsed"])
def test_parquet_source_is_stored_as_copies_numbered_by_position(
    spark: Any, store_path: Path, tmp_path: Path, mocker: Any, first_rows: str
) -> None:
    """A source read from Parquet files is copied, not rewritten: its row
    numbers are file offset + position, in the triples, the stored rows and
    the answers of lineage queries alike (an empty file takes no number).
    A copy's first row is looked up by its name, or parsed from the name
    when the table has more copies than the lookup takes."""
    if first_rows == "parsed":
        mocker.patch("provplug_spark.rules.FIRST_ROWS_BY_NAME", 1)
    parts = [[("ann", "NY", 30), ("bob", "LA", 41)], [], [("cid", "NY", 52), ("dan", "SF", 23), ("eve", "LA", 35)]]
    folder = tmp_path / "people"
    folder.mkdir()
    for i, rows in enumerate(parts):
        table = pa.Table.from_pylist(
            [dict(zip(("name", "city", "age"), r, strict=True)) for r in rows],
            schema=pa.schema([("name", pa.string()), ("city", pa.string()), ("age", pa.int64())]),
        )
        pq.write_table(table, folder / f"part-{i}.parquet")

    @provplug.step("Older", output="OldByCity")
    def older(people: Any) -> Any:
        return people.filter(F.col("age") > 25).groupBy("city").agg(F.max("age").alias("oldest"))

    with provplug.capture(spark, store=store_path) as run:
        older(run.source(spark.read.parquet(str(folder)), "People"))

    people = next(t for t in open_store(store_path).tables().to_pylist() if t["name"] == "People")
    copies = sorted(
        p.name for p in Path(open_store(store_path).run_paths("rows")[0], str(people["table_id"])).iterdir()
    )
    assert copies == ["pos-000000000000.parquet", "pos-000000000002.parquet"]
    assert people["rows"] == 5
    positions = {r["name"]: r[schema.ROW_COLUMN] for r in stored_rows(store_path)[people["table_id"]]}
    assert positions == {"ann": 0, "bob": 1, "cid": 2, "dan": 3, "eve": 4}
    want = expect(
        "Older",
        "OldByCity",
        {
            ("city", "NY"): [("People", "city", "ann"), ("People", "city", "cid")],
            ("oldest", "NY"): [("People", "age", "ann"), ("People", "age", "cid")],
            ("city", "LA"): [("People", "city", "bob"), ("People", "city", "eve")],
            ("oldest", "LA"): [("People", "age", "bob"), ("People", "age", "eve")],
        },
    )
    assert labelled_triples(store_path, {"People": ("name",)}) == want
    from provplug.index import build_index

    build_index(store_path, engine="local")
    answer = provplug.open(store_path).lineage(table="OldByCity", column="oldest", where="city = 'NY'").to_dict()
    shown = {(v["table"], v["column"], v["value"]) for v in answer["lineage"]}
    assert shown == {("People", "age", 30), ("People", "age", 52)}


def test_parquet_source_read_with_fewer_columns_is_written_not_copied(
    spark: Any, store_path: Path, tmp_path: Path
) -> None:
    pq.write_table(pa.table({"name": ["ann", "bob"], "age": [30, 41], "secret": ["x", "y"]}), tmp_path / "p.parquet")

    @provplug.step("Ages", output="AgeOnly")
    def ages(people: Any) -> Any:
        return people.select("age")

    with provplug.capture(spark, store=store_path) as run:
        ages(run.source(spark.read.schema("name string, age long").parquet(str(tmp_path / "p.parquet")), "People"))
    people = next(t for t in open_store(store_path).tables().to_pylist() if t["name"] == "People")
    folder = Path(open_store(store_path).run_paths("rows")[0], str(people["table_id"]))
    assert not any(p.name.startswith(schema.POSITIONAL_PREFIX) for p in folder.iterdir())
    assert sorted(r["name"] for r in table_rows(store_path, "People")) == ["ann", "bob"]
    assert all(set(r) == {"name", "age"} for r in table_rows(store_path, "People"))
    assert labelled_triples(store_path, {"People": ("name",), "AgeOnly": ("age",)}) == expect(
        "Ages", "AgeOnly", {("age", 30): [("People", "age", "ann")], ("age", 41): [("People", "age", "bob")]}
    )


def test_a_parquet_source_with_string_view_columns_is_answered(spark: Any, store_path: Path, tmp_path: Path) -> None:
    """Arrow writers such as tpchgen-cli store strings as ``string_view``:
    capture, index and answers (with --where over those columns) all work."""
    fields = pa.schema([("name", pa.string_view()), ("city", pa.string_view()), ("age", pa.int64())])
    rows = [("ann", "NY", 30), ("bob", "LA", 41), ("cid", "NY", 52)]
    folder = tmp_path / "people"
    folder.mkdir()
    pq.write_table(
        pa.Table.from_pylist([dict(zip(fields.names, r, strict=True)) for r in rows], schema=fields),
        folder / "part-0.parquet",
    )
    assert pq.read_schema(folder / "part-0.parquet").field("city").type == pa.string_view()

    @provplug.step("Older", output="Old")
    def older(people: Any) -> Any:
        return people.filter(F.col("age") > 35).select("name", "city")

    with provplug.capture(spark, store=store_path) as run:
        older(run.source(spark.read.parquet(str(folder)), "People"))
    from provplug.index import build_index

    build_index(store_path, engine="local")
    answer = provplug.open(store_path).lineage(table="Old", column="city", where="name = 'cid'").to_dict()
    assert [(v["table"], v["column"], v["value"], answer["rows"][v["row"]]["name"]) for v in answer["lineage"]] == [
        ("People", "city", "NY", "cid")
    ]
    down = provplug.open(store_path).lineage(table="People", column="name", where="city = 'LA'", direction="down")
    assert [(v["table"], v["value"]) for v in down.to_dict()["lineage"]] == [("Old", "bob")]


def test_a_copys_first_row_is_looked_up_by_name_not_parsed_per_row() -> None:
    """Parsing each row's file name costs more than reading the row; with the
    copies known, the first rows are a CASE on the name (the parse stays as
    the fallback for a name not listed)."""
    from provplug_spark.rules import FIRST_ROWS_BY_NAME, _first_row

    names = [schema.positional_name(0), schema.positional_name(2)]
    looked_up = _first_row(names)
    assert looked_up.startswith("(CASE _metadata.file_name WHEN 'pos-000000000000.parquet' THEN 0 ")
    assert "WHEN 'pos-000000000002.parquet' THEN 2 ELSE CAST(substring(" in looked_up
    assert _first_row([]) == _first_row([schema.positional_name(i) for i in range(FIRST_ROWS_BY_NAME + 1)])
    assert _first_row([]).startswith("CAST(substring(_metadata.file_name")


def test_a_table_of_one_copy_is_numbered_by_the_row_index_alone() -> None:
    """With one copy there is no name to look up: the row number is its
    first row plus the row index, and Spark is not asked for file names (it
    would build them into a struct for every row read)."""
    from provplug_spark.rules import _first_row, _positional_row

    assert _positional_row([schema.positional_name(0)]) == "0 + _metadata.row_index"
    assert _positional_row([schema.positional_name(7)]) == "7 + _metadata.row_index"
    two = [schema.positional_name(0), schema.positional_name(2)]
    assert _positional_row(two) == f"{_first_row(two)} + _metadata.row_index"
    assert "file_name" in _positional_row(two)
    assert _positional_row(["part-0.parquet"]) == f"{_first_row(['part-0.parquet'])} + _metadata.row_index"
