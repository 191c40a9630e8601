"""`provplug index` on the paper's examples: Table 4 components, Tables 6-8 sets,
bad --splits, crash safety, re-indexing, stats."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from conftest import DATA, snapshot

TABLE4 = (DATA / "paper_table4_triples.csv", DATA / "paper_table4_values.csv")
TABLE7 = (DATA / "paper_table7_triples.csv", DATA / "paper_table7_values.csv")
TABLE7_SPLITS = [["T1", "T2"], ["T3", "T4"], ["T5", "T6"]]


def read_index(store: Any) -> dict[str, Any]:
    """The live generation, read with pyarrow only (as a Spark-free reader would)."""
    from provplug.index import current_dir

    d = current_dir(store)
    part = "hive"
    return {
        "value_sets": pads.dataset(f"{d}/value_sets", partitioning=part).to_table().to_pylist(),
        "triples": pads.dataset(f"{d}/triples", partitioning=part).to_table().to_pylist(),
        "setdeps": pads.dataset(f"{d}/setdeps", partitioning=part).to_table().to_pylist(),
        "rsetdeps": pads.dataset(f"{d}/rsetdeps", partitioning=part).to_table().to_pylist(),
        "sets": pq.read_table(f"{d}/sets.parquet").to_pylist(),
        "components": pq.read_table(f"{d}/components.parquet").to_pylist(),
        "meta": json.loads(Path(d, "meta.json").read_text()),
    }


def groups(rows: list[dict[str, Any]], key: str) -> dict[int, set[int]]:
    out: dict[int, set[int]] = defaultdict(set)
    for r in rows:
        out[r[key]].add(r["value_id"])
    return dict(out)


def imported(path: Path, pair: tuple[Path, Path]) -> Any:
    import provplug
    from provplug.ingest.importer import import_provenance

    store = provplug.open_store(path)
    import_provenance(store, *pair)
    return store


def test_table4_components_are_the_papers_seven_ccid_groups(store_path: Path) -> None:
    from provplug.index import build_index

    store = imported(store_path, TABLE4)
    build_index(store, engine="local")
    idx = read_index(store)
    # Table 4's ccid column, by hand: the triples' values grouped per component.
    paper = [{1, 13}, {4, 16}, {7, 19}, {2, 5, 14, 17, 22}, {8, 20, 24}, {3, 6, 15, 18, 23}, {9, 21, 25}]
    comps = groups(idx["value_sets"], "ccid")
    assert sorted(map(sorted, comps.values())) == sorted(map(sorted, paper))
    assert all(ccid == min(members) for ccid, members in comps.items())
    # Small components (theta 25,000) are one set each, csid == ccid.
    assert all(r["csid"] == r["ccid"] for r in idx["value_sets"])
    assert idx["setdeps"] == []
    assert {r["ccid"]: r["nodes"] for r in idx["components"]} == {min(g): len(g) for g in paper}
    by_triple = {(t["src"], t["dst"]): t["ccid"] for t in idx["triples"]}
    assert by_triple[(14, 22)] == 2 and by_triple[(21, 25)] == 9


def _check_table7(idx: dict[str, Any]) -> None:
    sets = groups(idx["value_sets"], "csid")
    assert sorted(map(sorted, sets.values())) == [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]
    s1, s2, s3, s4 = 1, 4, 7, 10  # csid = smallest value id of the set
    assert sorted((d["src_csid"], d["dst_csid"]) for d in idx["setdeps"]) == [(s1, s2), (s2, s3), (s2, s4)]
    assert sorted((d["src_csid"], d["dst_csid"]) for d in idx["rsetdeps"]) == [(s1, s2), (s2, s3), (s2, s4)]
    # Table 7's src_csid / dst_csid columns.
    got = {(t["src"], t["dst"]): (t["src_csid"], t["dst_csid"]) for t in idx["triples"]}
    assert got[(2, 4)] == (s1, s2) and got[(5, 7)] == (s2, s3) and got[(6, 10)] == (s2, s4)
    assert got[(10, 11)] == (s4, s4) and got[(1, 3)] == (s1, s1)
    assert {r["csid"]: (r["split"], r["nodes"], r["triples"]) for r in idx["sets"]} == {
        1: ("sp1", 3, 2),
        4: ("sp2", 3, 4),
        7: ("sp3", 3, 3),
        10: ("sp3", 3, 3),
    }
    # Buckets hold what the layout says they hold.
    from provplug.index import layout

    for row in idx["triples"]:
        assert row["bucket"] == layout.bucket(row["dst_csid"], layout.TRIPLE_BUCKETS)


def test_table7_sets_and_set_dependencies_from_python(store_path: Path) -> None:
    from provplug.index import build_index

    store = imported(store_path, TABLE7)
    meta = build_index(store, theta=4, splits=TABLE7_SPLITS, engine="local")
    assert meta["counts"] == {"triples": 12, "values": 12, "components": 1, "sets": 4, "set_dependencies": 3}
    _check_table7(read_index(store))


def test_table7_via_cli_with_progress_and_stats(cli, store_path: Path, tmp_path: Path) -> None:
    import provplug

    imported(store_path, TABLE7)
    splits = tmp_path / "splits.json"
    splits.write_text(json.dumps(TABLE7_SPLITS))
    r = cli("index", store_path, "--theta", "4", "--splits", splits)
    assert r.code == 0, r
    assert "4 sets, 3 set dependencies" in r.out
    assert "[provplug] components:" in r.err and "published" in r.err
    _check_table7(read_index(provplug.open_store(store_path)))
    stats = json.loads(cli("stats", store_path, "--json").out)
    assert (stats["components"], stats["sets"], stats["set_dependencies"]) == (1, 4, 3)
    assert (stats["largest_component"], stats["largest_set"]) == (12, 3)
    assert [(r["split"], r["sets"], r["largest_set"]) for r in stats["per_split"]] == [
        ("sp1", 1, 3),
        ("sp2", 1, 3),
        ("sp3", 2, 3),
    ]


def test_stats_without_index_have_no_index_keys(cli, store_path: Path) -> None:
    imported(store_path, TABLE7)
    stats = json.loads(cli("stats", store_path, "--json").out)
    assert "sets" not in stats and stats["triples"] == 12


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[["T1","T2"],["T3","T9"]]', "unknown table 'T9'"),
        ('[["T1","T2"],["T2","T3"]]', "overlap: table 'T2'"),
        ('[["T1","T3"]]', "not weakly connected"),
        ('[["T5","T6", ["T5"]]]', "overlap: table 'T5'"),
        ('[["T1", 3]]', "neither a table name nor a list"),
        ('{"T1": 1}', "non-empty JSON list"),
        ('[["T1",', "not valid JSON"),
    ],
)
def test_bad_splits_are_one_line_errors_and_write_nothing(
    cli, store_path: Path, tmp_path: Path, content: str, message: str
) -> None:
    imported(store_path, TABLE7)
    before = snapshot(store_path)
    splits = tmp_path / "bad.json"
    splits.write_text(content)
    r = cli("index", store_path, "--splits", splits, "--quiet")
    assert r.code == 2, r
    assert message in r.err
    assert r.err.count("\n") == 1 and r.err.startswith("provplug: error: ")
    assert snapshot(store_path) == before


def test_bad_splits_leave_an_existing_index_untouched(cli, store_path: Path, tmp_path: Path) -> None:
    imported(store_path, TABLE7)
    assert cli("index", store_path, "--quiet").code == 0
    before = snapshot(store_path)
    splits = tmp_path / "bad.json"
    splits.write_text('[["T1","T3"]]')
    assert cli("index", store_path, "--splits", splits, "--quiet").code == 2
    assert snapshot(store_path) == before


def test_missing_store_and_bad_theta(cli, tmp_path: Path, store_path: Path) -> None:
    r = cli("index", tmp_path / "nowhere")
    assert r.code == 2 and "no provplug store" in r.err
    imported(store_path, TABLE7)
    r = cli("index", store_path, "--theta", "0")
    assert r.code == 2 and "theta" in r.err


def test_crash_during_build_keeps_the_old_index(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provplug.index import build_index, current_generation, local_engine

    store = imported(store_path, TABLE7)
    build_index(store, theta=4, splits=TABLE7_SPLITS, engine="local")
    live = current_generation(store)
    before = snapshot(store_path)

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(local_engine, "write_parquet", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        build_index(store, theta=2, engine="local")
    assert current_generation(store) == live
    assert snapshot(store_path) == before


def test_reindex_after_new_import_equals_indexing_from_scratch(tmp_path: Path) -> None:
    """Two imports indexed in between and after == both imports indexed once."""
    import provplug
    from provplug.index import build_index
    from provplug.ingest.importer import import_provenance

    extra_triples = tmp_path / "more.csv"
    extra_triples.write_text("src,dst,op\n12,30,op2\n30,31,op2\n40,41,op2\n")
    extra_values = tmp_path / "more_values.csv"
    extra_values.write_text("value_id,table\n30,T7\n31,T8\n40,T7\n41,T8\n")

    def content(store: Any) -> dict[str, Any]:
        idx = read_index(store)
        return {k: sorted(map(json.dumps, v), key=str) if isinstance(v, list) else v["counts"] for k, v in idx.items()}

    a = provplug.open_store(tmp_path / "a")
    import_provenance(a, *TABLE7)
    build_index(a, theta=4, engine="local")
    import_provenance(a, extra_triples, extra_values)
    build_index(a, theta=4, engine="local", full=True)  # the incremental build answers alike, with other files

    b = provplug.open_store(tmp_path / "b")
    import_provenance(b, *TABLE7)
    import_provenance(b, extra_triples, extra_values)
    build_index(b, theta=4, engine="local")
    assert content(a) == content(b)
    assert read_index(a)["meta"]["splits"] == read_index(b)["meta"]["splits"]
    # Only the live and the previous generation are kept.
    assert len([p for p in (tmp_path / "a" / "index").iterdir() if p.name.startswith("gen-")]) == 2


def test_a_splits_plugin_replaces_the_automatic_choice(store_path: Path) -> None:
    """`provplug_choose_splits` (firstresult): a plugin's answer is used when no
    --splits is given, and gives the paper's sets exactly as the explicit splits do."""
    import provplug
    from provplug.index import build_index
    from provplug.plugin.manager import Plugins

    seen: list[Any] = []

    class PaperSplits:
        @provplug.hookimpl
        def provplug_choose_splits(self, workflow: Any, stats: Any) -> list[Any]:
            seen.append(sorted(workflow.tables))
            return TABLE7_SPLITS

    plugins = Plugins.load(autoload=False)
    plugins.pm.register(PaperSplits())
    store = imported(store_path, TABLE7)
    build_index(store, theta=4, engine="local", plugins=plugins)
    assert seen == [["T1", "T2", "T3", "T4", "T5", "T6"]]
    _check_table7(read_index(store))


def _store_with_an_undefined_table(path: Path) -> Any:
    """One run whose triples name a table id the run reserved but never
    recorded (as when a run's catalogue is lost)."""
    from provplug import ids
    from provplug.ingest.recorder import StagedRun
    from provplug.model import OpInfo, TableInfo
    from provplug.store.open import open_store

    store = open_store(path)
    with store.transaction("capture") as txn:
        lost, kept = txn.reserve("tables"), txn.reserve("tables")
        txn.add_table(TableInfo(kept, "B", txn.run_id, "output", ("x",), 3, False))
        op = txn.reserve("ops")
        txn.add_op(OpInfo(op, "f", txn.run_id, "builtin", (lost,), (kept,)))
        run = StagedRun(store, txn)
        with run.triples_writer("part") as writer:
            rows = range(3)
            writer.write(
                [ids.value_id(lost, 0, r) for r in rows],
                [ids.value_id(kept, 0, r) for r in rows],
                op,
                src_table=lost,
                dst_table=kept,
            )
        run.finish()
    return store


def test_triples_of_an_undefined_table_are_store_damage_not_a_split_problem(cli, store_path: Path) -> None:
    _store_with_an_undefined_table(store_path)
    before = snapshot(store_path)
    result = cli("index", store_path, "--local", "--quiet")
    assert result.code == 2 and result.err.count("\n") == 1, result
    assert "damaged store" in result.err and "no committed run defines" in result.err
    assert "split" not in result.err
    assert snapshot(store_path) == before


def test_spark_engine_does_not_drop_triples_of_an_undefined_table(spark: Any, store_path: Path) -> None:
    from provplug.errors import DamagedStoreError
    from provplug.index import build_index

    store = _store_with_an_undefined_table(store_path)
    with pytest.raises(DamagedStoreError, match="triples name table id"):
        build_index(store, engine="spark", spark=spark)


def test_one_index_build_at_a_time(store_path: Path) -> None:
    """The build lock is created as id reservations are (``Store.create_exclusive``):
    a live builder's lock refuses a second build; a dead builder's is taken over;
    a finished build leaves none."""
    import subprocess
    import sys

    from provplug.errors import StoreError
    from provplug.index import build_index
    from provplug.index.generation import LOCK
    from provplug.store import files as storefiles

    store = imported(store_path, TABLE7)
    lock = store_path / "index" / LOCK
    lock.parent.mkdir()
    lock.write_text(storefiles.process_record())  # this process: alive
    with pytest.raises(StoreError, match="another provplug index build is running"):
        build_index(store, theta=4, splits=TABLE7_SPLITS, engine="local")
    assert lock.exists() and not (store_path / "index" / "CURRENT").exists()

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    lock.write_text(json.dumps({"pid": int(dead.stdout), "host": json.loads(storefiles.process_record())["host"]}))
    build_index(store, theta=4, splits=TABLE7_SPLITS, engine="local")
    assert not lock.exists()
    _check_table7(read_index(store))


def test_storefiles_process_record_names_this_process() -> None:
    import os

    from provplug.store import files as storefiles

    record = json.loads(storefiles.process_record(run_id="r1"))
    assert record["pid"] == os.getpid() and record["run_id"] == "r1"
    assert not storefiles.process_gone(record["host"], record["pid"])
    assert not storefiles.process_gone("another-host", 2**22 + 12345)  # never known to be gone


def test_spark_ddl_is_derived_from_the_arrow_schemas() -> None:
    import pyarrow as pa

    from provplug import schema
    from provplug.index import layout
    from provplug.query.spark_rq import INDEXED_TRIPLES_DDL, TRIPLE_COLUMNS_DDL
    from provplug.sparksession import spark_ddl

    assert TRIPLE_COLUMNS_DDL == "`src` bigint, `dst` bigint, `op` bigint, `src_table` int, `dst_table` int"
    assert spark_ddl(layout.INDEXED_TRIPLES) == INDEXED_TRIPLES_DDL
    assert "`inputs` array<int>" in spark_ddl(schema.OPS) and "`started` timestamp" in spark_ddl(schema.OPS)
    with pytest.raises(TypeError, match="no Spark type"):
        spark_ddl(pa.schema([pa.field("d", pa.decimal128(10, 2))]))
