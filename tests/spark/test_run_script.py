"""Capture of unmodified PySpark scripts (issue 11): ``provplug run`` and
``provplug.capture_writes``. Every DataFrame write is a step ``write:<name>``
whose output is the written dataset and whose inputs are what its plan reads;
a dataset written and read back links the two writes; the written files are
the script's own; a failed script commits nothing and keeps its status."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, REPO, snapshot

import provplug
from provplug.store.open import open_store

from .helpers import Label, expect, labelled_triples, ops

SCRIPT = EXAMPLES / "sales_script" / "sales.py"
DATA = EXAMPLES / "sales_script" / "data"
KEYS = {
    "orders": ["order_id"],
    "customers": ["customer_id"],
    "enriched": ["order_id"],
    "by_region": ["region"],
    "big_regions": ["region"],
}

# By hand from examples/sales_script/data. orders (order_id, customer_id, amount):
# 10 1 5.0 | 11 2 7.0 | 12 1 3.0 | 13 3 4.0 | 14 2 1.0; customers: 1 north, 2 south, 3 north.
CUSTOMER = {10: 1, 11: 2, 12: 1, 13: 3, 14: 2}
NORTH, SOUTH = [10, 12, 13], [11, 14]  # totals 12.0 (3 orders) and 8.0 (2 orders): only north is over 10


def _enriched() -> set[Any]:
    """Join using customer_id: the merged key from both sides, every other column from its side."""
    return expect(
        "write:enriched",
        "enriched",
        {
            cell: parents
            for o, c in CUSTOMER.items()
            for cell, parents in {
                ("customer_id", o): [("orders", "customer_id", o), ("customers", "customer_id", c)],
                ("order_id", o): [("orders", "order_id", o)],
                ("amount", o): [("orders", "amount", o)],
                ("region", o): [("customers", "region", c)],
            }.items()
        },
    )


def _by_region() -> set[Any]:
    """groupBy(region) over the in-memory join (the script does not read ``enriched`` back, so
    its plan reads the two sources): the key from every member's customer's region,
    sum(amount) and count(order_id) from the members' orders."""
    by_source = {"region": "customers", "total": "orders", "orders": "orders"}
    source_column = {"region": "region", "total": "amount", "orders": "order_id"}
    return expect(
        "write:by_region",
        "by_region",
        {
            (column, region): [
                (by_source[column], source_column[column], CUSTOMER[o] if column == "region" else o) for o in members
            ]
            for region, members in (("north", NORTH), ("south", SOUTH))
            for column in ("region", "total", "orders")
        },
    )


def _big_regions() -> set[Any]:
    """by_region read back, filtered (predicate not a parent), avg_order = total / orders."""
    return expect(
        "write:big_regions",
        "big_regions",
        {
            ("region", "north"): [("by_region", "region", "north")],
            ("total", "north"): [("by_region", "total", "north")],
            ("orders", "north"): [("by_region", "orders", "north")],
            ("avg_order", "north"): [("by_region", "total", "north"), ("by_region", "orders", "north")],
        },
    )


def _source_ancestors(triples: set[Any], cell: Label) -> set[Label]:
    """The cells ``cell`` derives from that have no parent themselves."""
    parents: dict[Label, set[Label]] = {}
    for src, dst, _op in triples:
        parents.setdefault(dst, set()).add(src)
    found, pending = set(), [cell]
    while pending:
        for parent in parents.get(pending.pop(), ()):
            if parent in parents:
                pending.append(parent)
            else:
                found.add(parent)
    return found


def _rows(spark: Any, path: Path, fmt: str) -> list[tuple[Any, ...]]:
    reader = spark.read.option("header", True) if fmt == "csv" else spark.read
    return sorted(tuple(r) for r in reader.format(fmt).load(str(path)).collect())


def _plain_run(out: Path) -> None:
    """The script as it runs without provplug (same session: getOrCreate)."""
    runpy.run_path(str(SCRIPT), run_name="sales")["main"](["sales.py", str(DATA), str(out)])


def test_run_captures_each_write_and_lineage_crosses_writes(
    spark: Any, cli: Any, store_path: Path, tmp_path: Path
) -> None:
    result = cli("run", "--store", store_path, SCRIPT, DATA, tmp_path / "out")
    assert result.code == 0, result.err
    assert "3 steps, 5 tables" in result.err
    triples = labelled_triples(store_path, KEYS)
    assert triples == _enriched() | _by_region() | _big_regions()
    # Across both writes: the average order of the north goes back to the amounts and
    # order ids of orders 10, 12 and 13; its region to the regions of customers 1 and 3.
    assert _source_ancestors(triples, ("big_regions", "avg_order", "north")) == {
        ("orders", c, o) for c in ("amount", "order_id") for o in NORTH
    }
    assert _source_ancestors(triples, ("big_regions", "region", "north")) == {
        ("customers", "region", 1),
        ("customers", "region", 3),
    }
    tables = {t["name"]: t for t in open_store(store_path).tables().to_pylist()}
    assert {n: t["origin"] for n, t in tables.items()} == {
        "orders": "source",
        "customers": "source",
        "enriched": "output",
        "by_region": "output",
        "big_regions": "output",
    }
    assert ops(store_path)["write:big_regions"]["inputs"] == [tables["by_region"]["table_id"]]
    # The files written are the script's own: the same rows as without provplug, and no provplug column.
    _plain_run(tmp_path / "plain")
    for name, fmt in (("enriched", "parquet"), ("by_region", "parquet"), ("big_regions", "csv")):
        assert _rows(spark, tmp_path / "out" / name, fmt) == _rows(spark, tmp_path / "plain" / name, fmt)
    assert _rows(spark, tmp_path / "out" / "big_regions", "csv") == [("north", "12.0", "3", "4.0")]


def _store_unchanged_by(cli: Any, store: Path, *args: Any) -> Any:
    open_store(store).create()
    before = snapshot(store)
    result = cli("run", "--store", store, *args)
    assert snapshot(store) == before
    return result


def test_a_script_that_raises_after_a_write_commits_nothing(cli: Any, store_path: Path, tmp_path: Path) -> None:
    result = _store_unchanged_by(cli, store_path, SCRIPT, DATA, tmp_path / "out", "--fail-after-first-write")
    assert result.code == 1
    assert "Traceback (most recent call last)" in result.err
    assert f'File "{SCRIPT}"' in result.err  # the script's frames, as Python prints them
    assert "RuntimeError: stopped after the first write" in result.err
    assert (tmp_path / "out" / "enriched").is_dir()  # the script's own write happened


def test_a_script_exit_status_is_kept_and_commits_nothing(cli: Any, store_path: Path, tmp_path: Path) -> None:
    result = _store_unchanged_by(cli, store_path, SCRIPT, DATA, tmp_path / "out", "--exit-3")
    assert result.code == 3
    assert "status 3; nothing captured" in result.err


def test_a_missing_script_is_one_line_and_status_2(cli: Any, store_path: Path, tmp_path: Path) -> None:
    result = cli("run", "--store", store_path, tmp_path / "nope.py")
    assert (result.code, result.err.strip().count("\n")) == (2, 0)
    assert "no such script" in result.err and not store_path.exists()


def test_a_script_that_writes_nothing_commits_nothing(spark: Any, cli: Any, store_path: Path, tmp_path: Path) -> None:
    script = tmp_path / "reads_only.py"
    script.write_text(
        "import sys\nfrom pyspark.sql import SparkSession\n"
        "print(SparkSession.builder.getOrCreate().range(3).count(), sys.argv[1:], __name__)\n"
    )
    result = cli("run", "--store", store_path, script, "a", "--b")
    assert result.code == 0
    assert result.out.strip() == "3 ['a', '--b'] __main__"
    assert "wrote no DataFrame" in result.err and not store_path.exists()


def test_capture_writes_links_a_catalog_table_written_and_read_back(
    spark: Any, store_path: Path, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    csv = tmp_path / "people.csv"
    csv.write_text("name,age\nann,30\nbob,20\n")
    try:
        with provplug.capture_writes(spark, store=store_path) as writes:
            people = spark.read.option("header", True).csv(str(csv))  # a read no write uses costs nothing
            people.filter(F.col("age") > 25).write.saveAsTable("provplug_test_adults")
            spark.table("provplug_test_adults").select("name").write.json(str(tmp_path / "names.json"))
        assert writes.run is not None
    finally:
        spark.sql("DROP TABLE IF EXISTS provplug_test_adults")
    assert labelled_triples(store_path) == (
        expect(
            "write:provplug_test_adults",
            "provplug_test_adults",
            {("name", "ann"): [("people", "name", "ann")], ("age", "ann"): [("people", "age", "ann")]},
        )
        | expect("write:names", "names", {("name", "ann"): [("provplug_test_adults", "name", "ann")]})
    )
    assert [tuple(r) for r in spark.read.json(str(tmp_path / "names.json")).collect()] == [("ann",)]


def test_capture_writes_captures_a_v2_write(spark: Any, store_path: Path, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    try:
        with provplug.capture_writes(spark, store=store_path):
            spark.createDataFrame([(1, "x")], "k int, v string").writeTo("provplug_test_v2").using("parquet").create()
            spark.table("provplug_test_v2").select((F.col("k") + 1).alias("k1")).write.parquet(str(tmp_path / "k1"))
    finally:
        spark.sql("DROP TABLE IF EXISTS provplug_test_v2")
    # rows built in the driver are a source named after the write that reads them; the
    # table read back is the first write's output
    assert labelled_triples(store_path) == (
        expect(
            "write:provplug_test_v2",
            "provplug_test_v2",
            {("k", 1): [("provplug_test_v2-input", "k", 1)], ("v", 1): [("provplug_test_v2-input", "v", 1)]},
        )
        | expect("write:k1", "k1", {("k1", 2): [("provplug_test_v2", "k", 1)]})
    )


def _writes_are_plain_again(spark: Any, tmp_path: Path) -> Iterable[Any]:
    out = tmp_path / "after"
    spark.range(2).write.parquet(str(out))  # no capture: the patch is gone
    return spark.read.parquet(str(out)).collect()


def test_the_patch_is_removed_even_when_the_block_fails(spark: Any, store_path: Path, tmp_path: Path) -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    original = DataFrameWriter.parquet
    try:
        with provplug.capture_writes(spark, store=store_path):
            spark.range(3).write.parquet(str(tmp_path / "r"))
            raise KeyError("boom")
    except KeyError:
        pass
    assert DataFrameWriter.parquet is original
    assert len(list(_writes_are_plain_again(spark, tmp_path))) == 2 and not store_path.exists()


def test_provplug_run_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """As a user runs it: a script that builds its own session and stops it at
    the end. Its context's Python workers talk over Unix domain sockets."""
    script = tmp_path / "copy_people.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        from pyspark.sql import SparkSession, functions as F
        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        people = spark.read.option("header", True).csv(sys.argv[1])
        people.select(F.upper("name").alias("name")).write.parquet(sys.argv[2])
        print("workers over unix sockets:", spark.sparkContext.getConf().get("spark.python.unix.domain.socket.enabled"))
        spark.stop()
    """)
    )
    (tmp_path / "people.csv").write_text("name\nann\nbob\n")
    store, out = tmp_path / "s.prov", tmp_path / "upper.parquet"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "provplug",
            "run",
            "--store",
            str(store),
            str(script),
            str(tmp_path / "people.csv"),
            str(out),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert labelled_triples(store) == expect(
        "write:upper",
        "upper",
        {("name", "ANN"): [("people", "name", "ann")], ("name", "BOB"): [("people", "name", "bob")]},
    )
    assert sorted(f.name for f in out.glob("*.parquet"))  # the script's own files
    # The context the script started runs its Python workers (provplug's writer tasks) over Unix sockets.
    assert "workers over unix sockets: true" in done.stdout
