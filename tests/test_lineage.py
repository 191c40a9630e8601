"""Lineage queries on the paper's examples: Table 4 (imported and with rows),
Tables 6-8 (connected sets), the CLI, errors, plugins, and the no-JVM rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, EXAMPLES, REPO, snapshot

import provplug
from provplug import ids
from provplug.errors import LineageQueryError, NotIndexedError
from provplug.index import build_index
from provplug.ingest.importer import import_provenance
from provplug.store.open import open_store

METHODS = ("rq", "ccprov", "csprov", "auto")
T7_SPLITS = [["T1", "T2"], ["T3", "T4"], ["T5", "T6"]]


def _import(path: Path, name: str) -> Path:
    import_provenance(open_store(path), DATA / f"{name}_triples.csv", DATA / f"{name}_values.csv")
    return path


@pytest.fixture
def table4(tmp_path: Path) -> Path:
    store = _import(tmp_path / "t4.prov", "paper_table4")
    build_index(store, engine="local")
    return store


@pytest.fixture
def table7(tmp_path: Path) -> Path:
    store = _import(tmp_path / "t7.prov", "paper_table7")
    build_index(store, theta=4, splits=T7_SPLITS, engine="local")
    return store


@pytest.fixture
def people(paper_rows_store: tuple[Path, dict[int, int]]) -> tuple[Path, dict[int, int]]:
    return paper_rows_store


def _edges(answer: dict[str, Any]) -> set[tuple[int, int, str]]:
    return {(e["src"], e["dst"], e["op"]) for e in answer["edges"]}


# -- Table 4 ------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_table4_lineage_of_23_by_every_method(table4: Path, method: str) -> None:
    answer = provplug.open(table4).lineage(value_id=23, method=method).to_dict()
    assert {r["value_id"] for r in answer["lineage"]} == {15, 18, 3, 6}
    assert _edges(answer) == {(15, 23, "R2"), (18, 23, "R2"), (3, 15, "R1"), (6, 18, "R1")}
    assert answer["query"] == [{"value_id": 23, "table": "AvgAge", "column": "Age", "row": None, "value": None}]
    assert {(r["table"], r["column"]) for r in answer["lineage"]} == {("Person2", "Age"), ("Person1", "Age")}
    assert answer["method"] == method and answer["direction"] == "up"
    assert answer["stats"]["path"] == "driver"


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20])
def test_imported_values_are_located_the_same_whether_the_mapping_is_kept_or_read_each_time(
    table4: Path, monkeypatch: pytest.MonkeyPatch, cache_bytes: int
) -> None:
    from provplug.query import catalog

    monkeypatch.setattr(catalog, "MAPPING_CACHE_BYTES", cache_bytes)
    store = provplug.open(table4)
    answers = [store.lineage(value_id=v).to_dict() for v in (23, 23, 15)]
    assert answers[0] == {**answers[1], "stats": answers[0]["stats"]}
    assert {(r["table"], r["column"]) for r in answers[2]["lineage"]} == {("Person1", "Age")}
    kept = catalog.catalog_for(store.store)._mapping  # the opened store's catalogue
    assert (kept is not None) == (cache_bytes > 0)  # a mapping beyond the cap is never loaded whole


def test_imported_values_are_read_from_the_row_groups_holding_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: Any
) -> None:
    """A query reads the value mapping's row groups whose value_id range holds
    one of its values, not the others (a store of many runs and values)."""
    import pyarrow.parquet as pq

    from provplug.ingest import importer
    from provplug.query import catalog

    monkeypatch.setattr(importer, "VALUES_ROW_GROUP", 3)
    store = _import(tmp_path / "t4.prov", "paper_table4")
    build_index(store, engine="local")
    groups = pq.ParquetFile(open_store(store).run_paths("values.parquet")[0]).metadata.num_row_groups
    whole = provplug.open(store).lineage(value_id=23).to_dict()["lineage"]  # a first query reads what it needs
    monkeypatch.setattr(catalog, "MAPPING_CACHE_BYTES", 0)  # never the whole mapping
    read = mocker.spy(pq.ParquetFile, "read_row_group")
    answer = provplug.open(store).lineage(value_id=23).to_dict()["lineage"]
    assert answer == whole and {(r["table"], r["column"]) for r in answer} >= {("Person1", "Age")}
    wanted = {23, *(r["value_id"] for r in answer)}
    values = pq.read_table(open_store(store).run_paths("values.parquet")[0]).column("value_id").to_pylist()
    holding = {i // 3 for i, v in enumerate(values) if v in wanted}  # the groups (3 rows each) with a wanted id
    assert {call.args[1] for call in read.call_args_list} == holding < set(range(groups))


def test_table4_downstream_of_person1_city(table4: Path) -> None:
    # City 2 (Steve's NY) -> City 14 -> City 22 (the NY group's key)
    answer = provplug.open(table4).lineage(value_id=2, direction="down").to_dict()
    assert {r["value_id"] for r in answer["lineage"]} == {14, 22}
    assert _edges(answer) == {(2, 14, "R1"), (14, 22, "R2")}


@pytest.mark.parametrize("method", METHODS)
def test_where_clause_shows_rows_and_values(people: tuple[Path, dict[int, int]], method: str) -> None:
    path, packed = people
    answer = provplug.open(path).lineage(table="AvgAge", column="Age", where="City = 'NY'", method=method).to_dict()
    assert [q["value_id"] for q in answer["query"]] == [packed[23]]
    rows = answer["rows"]  # each stored row once; a cell names its row "TABLE_ID:ROW"
    assert rows[answer["query"][0]["row"]] == {"City": "NY", "Age": 35.0} and answer["query"][0]["value"] == 35.0
    by_id = {r["value_id"]: r for r in answer["lineage"]}
    assert set(by_id) == {packed[i] for i in (15, 18, 3, 6)}
    assert rows[by_id[packed[15]]["row"]] == {"Name": "Steve", "City": "NY", "Age": 30}
    assert by_id[packed[6]] == {
        "value_id": packed[6],
        "table": "Person1",
        "column": "Age",
        "row": f"{ids.unpack(packed[6])[0]}:1",
        "value": 40,  # Mark is Person1's row 1
    }
    assert rows[by_id[packed[6]]["row"]] == {"Name": "Mark", "City": "NY", "Age": 40}
    assert _edges(answer) == {
        (packed[15], packed[23], "R2"),
        (packed[18], packed[23], "R2"),
        (packed[3], packed[15], "R1"),
        (packed[6], packed[18], "R1"),
    }


def test_where_clause_grammar(people: tuple[Path, dict[int, int]]) -> None:
    path, packed = people
    store = provplug.open(path)
    cases = {
        "Age > 30 AND NOT (City = 'LA')": [16],  # Mark only
        "Name IN ('Steve', 'Shane')": [13, 19],
        "Name LIKE 'M%' OR Age BETWEEN 35 AND 45": [16, 19],
        "\"City\" <> 'NY'": [19],
        "age >= 30": [13, 16, 19],  # identifiers fold case, as in SQL
    }
    for predicate, names in cases.items():
        answer = store.lineage(table="Person2", column="Name", where=predicate)
        assert [q["value_id"] for q in answer.to_dict()["query"]] == sorted(packed[i] for i in names), predicate


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        ("1=0 UNION ALL SELECT 5", "adds to the query"),  # a set operation: row 5 does not exist
        ("1=1; SELECT 7", "holds 2 statements"),
        ("1=1; DROP TABLE provplug_rows", "holds other statements"),
        ("1=1) UNION (SELECT 5", "syntax error"),
        ("1=1 ORDER BY 1 LIMIT 1", "adds to the query"),
        ("1=1 GROUP BY City", "adds to the query"),
        ("Age IN (SELECT 5)", "holds a subquery"),
        ("EXISTS (SELECT 1)", "holds a subquery"),
        ("Age", "is of type"),  # DuckDB would cast a number to boolean silently
        ("count(*) > 0", "cannot contain aggregates"),
    ],
)
def test_where_is_one_boolean_expression(people: tuple[Path, dict[int, int]], predicate: str, message: str) -> None:
    path, _ = people
    with pytest.raises(LineageQueryError, match="--where") as caught:
        provplug.open(path).lineage(table="Person2", column="Name", where=predicate)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_where_comment_cannot_hide_the_rest(people: tuple[Path, dict[int, int]]) -> None:
    path, packed = people
    answer = provplug.open(path).lineage(table="Person2", column="Name", where="Name = 'Mark' -- OR TRUE")
    assert [q["value_id"] for q in answer.to_dict()["query"]] == [packed[16]]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("AvgAge.Age", ("AvgAge", "Age")),
        ("sales.orders.amount", ("sales.orders", "amount")),  # bare: split at the last dot
        ('"a.b"."c.d"', ("a.b", "c.d")),
        ('a.b."c.d"', ("a.b", "c.d")),
        ('"a.b".c', ("a.b", "c")),
        ('"say ""hi""".C', ('say "hi"', "C")),
        ('T.""""', ("T", '"')),
    ],
)
def test_table_column_quoting(target: str, expected: tuple[str, str]) -> None:
    from provplug.cli.lineage import parse_target

    assert parse_target(target) == expected


@pytest.mark.parametrize("target", ["Age", ".Age", "T.", '"a.b".c.d', '"a.b"', 'T."c', 'T.c"d', '"".c', 'a"b.c'])
def test_bad_table_column_is_one_line(target: str) -> None:
    from provplug.cli.lineage import parse_target

    with pytest.raises(LineageQueryError, match=r"expected TABLE\.COLUMN"):
        parse_target(target)


def test_a_table_and_column_with_dots_can_be_addressed(tmp_path: Path, cli: Any) -> None:
    from test_lineage_support import write_store_with_rows

    path = tmp_path / "dots.prov"
    # Table "a.b" (column "c.d") and table "a" (column "b.c.d" as well as "b.c"):
    # every cell of "a.b"."c.d" derives from the same row's cell of a."b.c".
    rows = [("x", 1), ("y", 2)]
    write_store_with_rows(
        open_store(path),
        [("a.b", ("c.d", "n"), rows), ("a", ("b.c", "b.c.d"), rows)],
        [((1, 0, r), (0, 0, r)) for r in range(2)],
    )
    build_index(path, engine="local")
    for target in ('"a.b"."c.d"', 'a.b."c.d"'):
        result = cli("lineage", path, target, "--where", "n = 2", "--json")
        assert result.code == 0, result
        answer = json.loads(result.out)
        assert [(q["table"], q["column"], q["value"]) for q in answer["query"]] == [("a.b", "c.d", "y")]
        assert [(r["table"], r["column"], r["value"]) for r in answer["lineage"]] == [("a", "b.c", "y")]
    down = json.loads(cli("lineage", path, 'a."b.c"', "--direction", "down", "--json").out)
    assert {(r["table"], r["column"]) for r in down["lineage"]} == {("a.b", "c.d")}
    # bare, the last dot splits: a.b.c.d is column "d" of a table "a.b.c"
    assert "unknown table 'a.b.c'" in cli("lineage", path, "a.b.c.d").err


def test_cli_tree_groups_by_op_and_table_with_values(people: tuple[Path, dict[int, int]], cli: Any) -> None:
    path, _ = people
    result = cli("lineage", path, "AvgAge.Age", "--where", "City = 'NY'")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("AvgAge.Age = 35.0")
    assert any("R2 from Person2" in line for line in lines)
    assert any("R1 from Person1" in line for line in lines)
    assert sum("Name=Steve" in line for line in lines) == 2 and sum("Name=Mark" in line for line in lines) == 2
    assert lines[-1].startswith("4 ancestors, 4 triples; method auto on driver")


@pytest.mark.skipif(
    not (EXAMPLES / "people_spark.py").exists(),
    reason="examples/people_spark.py (Spark capture example) not written yet",
)
def test_where_clause_on_a_captured_spark_store(tmp_path: Path, spark: Any, cli: Any) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("people_spark", EXAMPLES / "people_spark.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    store = tmp_path / "people.prov"
    example.capture_people(spark, str(store))
    assert cli("index", store).code == 0
    for method in METHODS:
        result = cli("lineage", store, "AvgAge.Age", "--where", "City = 'NY'", "--method", method, "--json")
        assert result.code == 0, result.err
        answer = json.loads(result.out)
        rows = [answer["rows"][r["row"]] for r in answer["lineage"]]  # each stored row once, by key
        assert sorted(r["Name"] for r in rows) == ["Mark", "Mark", "Steve", "Steve"]
        assert sorted(r["value"] for r in answer["lineage"]) == [30, 30, 40, 40]
        assert {e["op"] for e in answer["edges"]} and len(answer["edges"]) == 4


# -- Tables 6-8 ---------------------------------------------------------------------


def test_table7_csprov_reads_three_sets_cli(table7: Path, cli: Any) -> None:
    result = cli("lineage", table7, "--value-id", "8", "--method", "csprov", "--json")
    assert result.code == 0, result.err
    answer = json.loads(result.out)
    assert {r["value_id"] for r in answer["lineage"]} == {7, 5, 4, 2, 3, 1}
    assert answer["stats"]["sets_read"] == 3  # S1, S2, S3: S4 is never read
    assert answer["stats"]["triples_scanned"] == 9  # the 3 triples into S4 are not
    assert _edges(answer) == {
        (1, 2, "op"),
        (1, 3, "op"),
        (2, 4, "op"),
        (3, 4, "op"),
        (4, 5, "op"),
        (5, 7, "op"),
        (7, 8, "op"),
    }
    assert answer == provplug.open(table7).lineage(value_id=8, method="csprov").to_dict() | {"stats": answer["stats"]}


def test_table7_ccprov_reads_the_whole_component(table7: Path) -> None:
    answer = provplug.open(table7).lineage(value_id=8, method="ccprov")
    assert answer.value_ids == {7, 5, 4, 2, 3, 1}
    assert answer.stats["sets_read"] == 4 and answer.stats["triples_scanned"] == 12


def test_table7_downstream_walks_rsetdeps(table7: Path) -> None:
    answer = provplug.open(table7).lineage(value_id=5, method="csprov", direction="down")
    assert answer.value_ids == {7, 8, 9}
    # Set-level: S2 derives S3 and S4 (via 6), so both are read; S1 is not.
    assert answer.stats["sets_read"] == 3 and answer.stats["triples_scanned"] == 10  # 4 into S2, 3 into S3, 3 into S4
    answer = provplug.open(table7).lineage(value_id=4, method="csprov", direction="down")
    assert answer.value_ids == {5, 6, 7, 8, 9, 10, 11, 12}


@pytest.mark.parametrize("method", METHODS)
def test_table7_spark_path_gives_the_same_answer(table7: Path, spark: Any, method: str) -> None:
    store = provplug.open(table7)
    for value, direction in ((8, "up"), (4, "down")):
        on_driver = store.lineage(value_id=value, method=method, direction=direction).to_dict()
        on_spark = store.lineage(value_id=value, method=method, direction=direction, tau=0, spark=spark).to_dict()
        assert on_spark["stats"]["path"] == "spark" and on_driver["stats"]["path"] == "driver"
        assert on_spark["lineage"] == on_driver["lineage"] and on_spark["edges"] == on_driver["edges"]


def test_a_query_on_spark_reports_its_rounds(table7: Path, spark: Any, cli: Any) -> None:
    # 8's 6 ancestors take 6 rounds, one Spark job each: 7; 5; 4; 2 and 3; 1; then one that finds
    # nothing new and ends the recursion. Progress goes to stderr, the answer to stdout.
    r = cli("lineage", table7, "--value-id", "8", "--tau", "0")
    assert r.code == 0, r
    lines = [line for line in r.err.splitlines() if "lineage on Spark (ancestors)" in line]
    assert lines and "6 values reached in 6 round(s)" in lines[-1], r.err
    assert "lineage on Spark" not in r.out


# -- the driver path starts no JVM ----------------------------------------------------


def test_driver_path_starts_no_jvm(table7: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, provplug
        answer = provplug.open({str(table7)!r}).lineage(value_id=8, method="auto")
        assert answer.stats["path"] == "driver", answer.stats
        for method in ("rq", "ccprov", "csprov"):
            provplug.open({str(table7)!r}).lineage(value_id=8, method=method, direction="down")
        children = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    stat = open(f"/proc/{{pid}}/stat").read()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                    children.append(stat)
        assert not children, children
        from pyspark import SparkContext
        assert SparkContext._active_spark_context is None
        assert SparkContext._gateway is None
        print(sorted(answer.value_ids))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "[1, 2, 3, 4, 5, 7]"


# -- errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--value-id", "999"], "unknown value id 999"),
        (["Nope.Age", "--where", "City = 'NY'"], "unknown table 'Nope'"),
        (["AvgAge.Nope", "--where", "City = 'NY'"], "has no column 'Nope'"),
        (["AvgAge.Age", "--where", "City = 'Paris'"], "no row of AvgAge satisfies"),
        (["AvgAge.Age", "--where", "City = "], "bad --where predicate"),
        (["AvgAge.Age", "--where", "City = 3"], "bad --where predicate"),
        (["AvgAge.Age", "--where", "Town = 'NY'"], "unknown column 'Town'"),
        (["--value-id", "1", "--method", "magic"], "unknown query method 'magic'"),
        (["AvgAge.Age", "--value-id", "1"], "not both"),
    ],
)
def test_bad_queries_fail_with_one_line(
    people: tuple[Path, dict[int, int]], cli: Any, args: list[str], message: str
) -> None:
    path, _ = people
    before = snapshot(path)
    result = cli("lineage", path, *args)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("provplug: error: ") and message in result.err, result.err
    assert result.err.count("\n") == 1
    assert snapshot(path) == before


def test_where_on_imported_table_needs_rows(table4: Path) -> None:
    with pytest.raises(LineageQueryError, match="no stored rows"):
        provplug.open(table4).lineage(table="AvgAge", column="Age", where="City = 'NY'")


def test_unindexed_and_stale_stores(tmp_path: Path, cli: Any) -> None:
    path = _import(tmp_path / "s.prov", "paper_table4")
    result = cli("lineage", path, "--value-id", "23")
    assert result.code == 2 and "no lineage index" in result.err and "provplug index" in result.err
    # RQ recurses over the triple table itself and needs no index.
    assert provplug.open(path).lineage(value_id=23, method="rq").value_ids == {15, 18, 3, 6}
    build_index(path, engine="local")
    _import(path, "paper_table7")
    # The index answers for the run it covers (saying newer runs are not indexed yet) ...
    assert provplug.open(path).lineage(value_id=23).value_ids == {15, 18, 3, 6}
    # ... and refuses a value the newer import derives (its lineage changed).
    with pytest.raises(NotIndexedError, match="predates 1 run"):
        provplug.open(path).lineage(value_id=2)
    assert cli("lineage", tmp_path / "missing.prov", "--value-id", "1").code == 2


# -- plugins ------------------------------------------------------------------------


def test_methods_are_registered_through_the_hook_and_a_plugin_can_add_one(table4: Path) -> None:
    from provplug import hookimpl
    from provplug.plugin.manager import Plugins, reset_plugins
    from provplug.query.methods import ConnectedSetQuery

    plugins = Plugins.load(autoload=False)
    assert set(plugins.query_methods()) == set(METHODS)

    class Reversed(ConnectedSetQuery):
        name = "flipped"
        description = "csprov, walked the other way (a test plugin)"

        def run(self, context: Any, seeds: Any, direction: str) -> Any:
            return super().run(context, seeds, "down" if direction == "up" else "up")

    class Plugin:
        @hookimpl
        def provplug_register_query_methods(self, register: Any) -> None:
            register(Reversed())

    plugins.pm.register(Plugin(), name="flipped-plugin")
    reset_plugins(plugins)
    assert "flipped" in plugins.query_methods()
    answer = provplug.open(table4).lineage(value_id=3, method="flipped")
    assert answer.value_ids == {15, 23} and answer.method == "flipped"


def test_index_and_queries_take_any_store(tmp_path: Path) -> None:
    """The index and queries need only the ``Store`` protocol: a store that is
    not a ParquetStore (here one delegating to it) is indexed and queried
    like the built-in one."""
    from provplug.api import ProvenanceStore
    from provplug.plugin.protocols import Store
    from provplug.store.parquet import ParquetStore

    class Delegating:
        def __init__(self, inner: ParquetStore) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    _import(tmp_path / "t7.prov", "paper_table7")
    store = Delegating(ParquetStore(str(tmp_path / "t7.prov")))
    assert isinstance(store, Store) and not isinstance(store, ParquetStore)
    build_index(store, theta=4, splits=T7_SPLITS, engine="local")  # type: ignore[arg-type]
    answer = ProvenanceStore(store).lineage(value_id=10, method="csprov").to_dict()  # type: ignore[arg-type]
    expected = provplug.open(tmp_path / "t7.prov").lineage(value_id=10, method="csprov").to_dict()
    assert answer["lineage"] == expected["lineage"] and answer["edges"] == expected["edges"]
