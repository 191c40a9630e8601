"""The Parquet store: creation and removal under concurrent writers, damaged
files, commit crashes and the rows of Arrow view-typed sources."""

from __future__ import annotations

import multiprocessing
import random
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

TABLE4 = DATA / "paper_table4_triples.csv"
CYCLE = "src,dst,op\n1,2,R\n2,3,R\n3,1,R\n"


def _store(path: Path):
    from provplug.store.parquet import ParquetStore

    return ParquetStore(str(path))


def _stage_one_table(txn) -> None:
    from provplug.model import TableInfo

    txn.add_table(TableInfo(txn.reserve("tables"), "t", txn.run_id, "imported"))


def _assert_valid(path: Path, runs: int) -> None:
    """The store reads, has its whole skeleton, and accepts one more import."""
    from provplug.ingest.importer import import_provenance

    store = _store(path)
    store.check()
    for sub in ("runs", "_staging", "_ids/tables", "_ids/ops"):
        assert (path / sub).is_dir(), sub
    assert store.stats()["runs"] == runs
    import_provenance(store, TABLE4)
    assert store.stats()["runs"] == runs + 1


# -- item 2 of issue 18: creation racing a failed first write -----------------


def test_failed_creator_does_not_remove_a_store_another_writer_is_opening(store_path: Path, monkeypatch) -> None:
    """B creates the store and fails while A has found it but not yet staged a run."""
    store_a, store_b = _store(store_path), _store(store_path)
    a_opening, b_failed = threading.Event(), threading.Event()
    real_gc = store_a.collect_garbage

    def paused_gc() -> list[str]:
        if not a_opening.is_set():
            a_opening.set()
            b_failed.wait(10)
        return real_gc()

    monkeypatch.setattr(store_a, "collect_garbage", paused_gc)
    errors: list[str] = []

    def writer_a() -> None:
        try:
            with store_a.transaction("import") as txn:
                _stage_one_table(txn)
        except BaseException:
            errors.append(traceback.format_exc())

    thread = threading.Thread(target=writer_a)
    with pytest.raises(RuntimeError, match="bad input"), store_b.transaction("import") as txn:
        _stage_one_table(txn)
        thread.start()
        assert a_opening.wait(10)
        raise RuntimeError("bad input")
    b_failed.set()
    thread.join(30)
    assert not errors, errors[0]
    _assert_valid(store_path, runs=1)


def test_failed_creator_keeps_a_store_in_which_another_run_is_staged(store_path: Path) -> None:
    """B creates the store and fails while A has a run staged; A commits after."""
    creator = _store(store_path).transaction("import")
    _stage_one_table(creator.__enter__())
    writer = _store(store_path).transaction("import")
    _stage_one_table(writer.__enter__())
    assert creator.__exit__(RuntimeError, RuntimeError("bad input"), None) is False  # B fails: re-raised
    writer.__exit__(None, None, None)
    _assert_valid(store_path, runs=1)


def test_failed_first_write_still_leaves_nothing(store_path: Path) -> None:
    with pytest.raises(RuntimeError), _store(store_path).transaction("import") as txn:
        _stage_one_table(txn)
        raise RuntimeError("bad input")
    assert not store_path.exists()
    assert not list(store_path.parent.glob(f".{store_path.name}*"))  # nothing left beside it either


def test_failed_first_write_into_an_empty_directory_leaves_it_empty(store_path: Path) -> None:
    store_path.mkdir()
    with pytest.raises(RuntimeError), _store(store_path).transaction("import") as txn:
        _stage_one_table(txn)
        raise RuntimeError("bad input")
    assert store_path.is_dir() and not any(store_path.iterdir())


def _racing_import(store: str, triples: str, start: object, delay: float) -> None:
    """A child process: wait for the others, then import (exit 3 on bad input)."""
    from provplug.errors import ImportInputError
    from provplug.ingest.importer import import_provenance
    from provplug.store.open import open_store
    from provplug.store.parquet import ParquetStore

    # A slow listing of _staging widens the window between finding the store
    # and staging a run in it, which a failed creator's cleanup must respect.
    real_gc = ParquetStore.collect_garbage

    def slow_gc(self: ParquetStore) -> list[str]:
        time.sleep(delay)
        return real_gc(self)

    ParquetStore.collect_garbage = slow_gc  # type: ignore[method-assign]  # patched in this child process only
    start.wait()  # type: ignore[attr-defined]  # a multiprocessing Event, typed object to pickle
    time.sleep(delay)
    try:
        import_provenance(open_store(store), triples)
    except ImportInputError:
        sys.exit(3)
    except BaseException:
        traceback.print_exc()
        sys.exit(1)
    sys.exit(0)


def test_a_store_directory_that_vanishes_while_checked_does_not_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's failed creation may remove the directory between
    seeing it and listing it: that is no store yet, not an error (the race
    below met it once in twenty rounds)."""
    from provplug.store.open import open_store

    folder = tmp_path / "vanishing.prov"
    folder.mkdir()
    store = open_store(folder)
    seen = store._info

    def then_removed(path: str) -> Any:
        info = seen(path)
        if path == store.root and folder.exists():
            folder.rmdir()  # gone after it was seen as a directory
        return info

    monkeypatch.setattr(store, "_info", then_removed)
    assert store.exists() is False


@pytest.mark.skipif(sys.platform == "win32", reason="needs fork")
def test_creation_races_failing_imports(tmp_path: Path) -> None:
    """One valid and three cyclic imports race to create a new store, 20 times:
    the store is always whole, holds the valid run and accepts another."""
    ctx = multiprocessing.get_context("fork")
    cycle = tmp_path / "cycle.csv"
    cycle.write_text(CYCLE)
    rng = random.Random(18)
    for round_no in range(20):
        store = tmp_path / f"s{round_no}.prov"
        start = ctx.Event()
        inputs = [TABLE4, cycle, cycle, cycle]
        procs = [
            ctx.Process(target=_racing_import, args=(str(store), str(f), start, rng.uniform(0, 0.03))) for f in inputs
        ]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 3, 3, 3], f"round {round_no}"
        _assert_valid(store, runs=1)


# -- item 5: a crash inside commit -------------------------------------------


def _crash_in_commit(store: str, at: str) -> None:
    """A child process that stages a run and dies (no cleanup) inside commit:
    while writing the manifest, or at the rename that publishes the run."""
    import os

    from provplug.store import parquet as store_module

    real_write, real_rename = store_module.ParquetStore.write_text, os.rename

    def write(self: object, path: str, text: str) -> None:
        if at == "manifest" and path.endswith(store_module.MANIFEST):
            os._exit(9)
        real_write(self, path, text)  # type: ignore[arg-type]  # self is the ParquetStore it patches

    def rename(src: str, dst: str) -> None:
        if at == "rename" and "/runs/" in dst:
            os._exit(9)
        real_rename(src, dst)

    store_module.ParquetStore.write_text = write  # type: ignore[method-assign]  # the crash is injected here
    os.rename = rename  # type: ignore[assignment]  # a child process that dies: never restored
    with _store(Path(store)).transaction("import") as txn:
        _stage_one_table(txn)
        txn.reserve("ops")


@pytest.mark.skipif(sys.platform == "win32", reason="needs fork")
@pytest.mark.parametrize("at", ["manifest", "rename"])
def test_garbage_collection_removes_a_run_whose_writer_died_in_commit(store_path: Path, at: str) -> None:
    proc = multiprocessing.get_context("fork").Process(target=_crash_in_commit, args=(str(store_path), at))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 9
    (leftover,) = (store_path / "_staging").iterdir()
    assert sorted(p.name for p in (store_path / "_ids").rglob("*") if p.is_file()) == [
        "1",
        "1",
        "1",
    ]  # a table id, an op id, the run number
    store = _store(store_path)
    assert store.runs() == []  # never half visible
    assert store.collect_garbage() == [leftover.name]
    assert not any((store_path / "_staging").iterdir())
    assert not any(p.is_file() for p in (store_path / "_ids").rglob("*"))  # its ids are free again
    _assert_valid(store_path, runs=0)


def test_committed_run_keeps_no_bookkeeping(store_path: Path) -> None:
    with _store(store_path).transaction("import") as txn:
        _stage_one_table(txn)
    (run,) = (store_path / "runs").iterdir()
    assert sorted(p.name for p in run.iterdir()) == ["_manifest.json", "ops.parquet", "tables.parquet"]


def test_ownerless_staging_folder_is_collected_once_old(store_path: Path) -> None:
    """A writer killed right after making its folder (or a commit by an older
    provplug, which dropped the owner record first) leaves no owner record."""
    import os

    store = _store(store_path)
    store.create()
    old, fresh = store_path / "_staging" / "old-run", store_path / "_staging" / "fresh-run"
    for folder in (old, fresh):
        folder.mkdir()
        (folder / "_manifest.json").write_text("{}")
    (fresh / "_owner.json").write_text('{"pid": ')  # being written right now
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    assert store.collect_garbage() == ["old-run"]
    assert sorted(p.name for p in (store_path / "_staging").iterdir()) == ["fresh-run"]


# -- item 4: damaged store files are one-line errors naming them -------------


def _imported(path: Path):
    from provplug.ingest.importer import import_provenance

    store = _store(path)
    import_provenance(store, TABLE4)
    (run,) = (path / "runs").iterdir()
    return store, run


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_truncated_marker_is_a_one_line_error(cli, store_path: Path) -> None:
    from provplug.errors import DamagedStoreError

    store, _ = _imported(store_path)
    _truncate(store_path / "provplug-store.json")
    with pytest.raises(DamagedStoreError, match=r"provplug-store\.json"):
        store.check()
    r = cli("stats", store_path)
    assert r.code != 0 and r.err.count("\n") == 1 and "provplug-store.json" in r.err, r


def test_run_without_manifest_is_damage_not_absence(cli, store_path: Path) -> None:
    from provplug.errors import DamagedStoreError

    store, run = _imported(store_path)
    (run / "_manifest.json").unlink()
    with pytest.raises(DamagedStoreError, match=f"run {run.name} has no _manifest.json"):
        store.runs()
    r = cli("stats", store_path)
    assert r.code != 0 and r.err.count("\n") == 1 and run.name in r.err, r


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_manifest(store_path: Path, damage: str) -> None:
    from provplug.errors import DamagedStoreError

    store, run = _imported(store_path)
    manifest = run / "_manifest.json"
    _truncate(manifest) if damage == "truncate" else manifest.write_text('["not", "a", "manifest"]')
    with pytest.raises(DamagedStoreError, match=r"_manifest\.json"):
        store.stats()


def test_truncated_triples_file_is_found_by_verify_and_triples(store_path: Path) -> None:
    from provplug.errors import DamagedStoreError

    store, run = _imported(store_path)
    assert store.verify() == store.stats()
    (part,) = (run / "triples").iterdir()
    _truncate(part)
    store.stats()  # counts come from manifests: no file is read
    for check in (store.verify, store.stored_triples, lambda: store.triples().to_table()):
        with pytest.raises(DamagedStoreError, match=part.name) as caught:
            check()
        assert "\n" not in str(caught.value)


def test_verify_finds_a_lost_triples_file(store_path: Path) -> None:
    from provplug.errors import DamagedStoreError

    store, run = _imported(store_path)
    (part,) = (run / "triples").iterdir()
    part.unlink()
    with pytest.raises(DamagedStoreError, match="holds 0 triples, its manifest says 15"):
        store.verify()


@pytest.mark.parametrize("dataset", ["tables.parquet", "ops.parquet", "values.parquet"])
def test_truncated_catalogue_file(store_path: Path, dataset: str) -> None:
    from provplug.errors import DamagedStoreError

    store, run = _imported(store_path)
    _truncate(run / dataset)
    read = {"tables.parquet": store.tables, "ops.parquet": store.ops, "values.parquet": store.values}[dataset]
    for check in (read, store.verify):
        with pytest.raises(DamagedStoreError, match=dataset):
            check()


def test_missing_catalogue_file(store_path: Path) -> None:
    from provplug.errors import DamagedStoreError

    store, run = _imported(store_path)
    (run / "tables.parquet").unlink()
    with pytest.raises(DamagedStoreError, match=r"tables\.parquet is missing"):
        store.tables()


# -- item 7: Parquet sources with Arrow view types ---------------------------


def _run_with_rows(path: Path, files: dict[str, object]):
    """A run storing the rows of one source table as the given files."""
    import pyarrow.parquet as pq

    from provplug.model import TableInfo

    store = _store(path)
    with store.transaction("capture") as txn:
        table_id = txn.reserve("tables")
        folder = Path(txn.path("rows", str(table_id)))
        folder.mkdir(parents=True)
        for name, table in files.items():
            pq.write_table(table, folder / name)
        txn.mark_dataset("rows")
        columns = tuple(next(iter(files.values())).column_names)  # type: ignore[attr-defined]  # values are pyarrow Tables
        txn.add_table(TableInfo(table_id, "src", txn.run_id, "source", columns, rows=4, stored_rows=True))
    return store, txn.run_id, table_id


def _view_table(first: int, n: int):
    import pyarrow as pa

    return pa.table(
        {
            "name": pa.array([f"n{i}" for i in range(first, first + n)], pa.string_view()),
            "blob": pa.array([b"b%d" % i for i in range(first, first + n)], pa.binary_view()),
            "tags": pa.array([[f"t{i}"] for i in range(first, first + n)], pa.list_(pa.string_view())),
            "n": pa.array(range(first, first + n), pa.int64()),
        }
    )


def test_read_rows_of_a_string_view_source_with_a_filter(store_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from provplug import schema

    files = {schema.positional_name(0): _view_table(0, 2), schema.positional_name(2): _view_table(2, 2)}
    store, run_id, table_id = _run_with_rows(store_path, files)
    rows = store.read_rows(run_id, table_id, pc.field(schema.ROW_COLUMN).isin(pa.array([1, 2], pa.int64())))
    assert rows is not None
    assert rows.schema.field("name").type == pa.string()
    assert rows.schema.field("blob").type == pa.binary()
    assert rows.schema.field("tags").type == pa.list_(pa.string())
    assert rows.to_pylist() == [
        {"name": "n1", "blob": b"b1", "tags": ["t1"], "n": 1, schema.ROW_COLUMN: 1},
        {"name": "n2", "blob": b"b2", "tags": ["t2"], "n": 2, schema.ROW_COLUMN: 2},
    ]


def test_read_rows_with_row_numbers_and_views(store_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from provplug import schema

    table = _view_table(0, 4).append_column(schema.ROW_COLUMN, pa.array([10, 11, 12, 13], pa.int64()))
    store, run_id, table_id = _run_with_rows(store_path, {"part-0.parquet": table})
    rows = store.read_rows(run_id, table_id, pc.field("name") == "n3")
    assert rows is not None and rows.schema.field("name").type == pa.string()
    assert rows.column(schema.ROW_COLUMN).to_pylist() == [13]


def test_truncated_rows_file(store_path: Path) -> None:
    from provplug import schema
    from provplug.errors import DamagedStoreError

    store, run_id, table_id = _run_with_rows(store_path, {schema.positional_name(0): _view_table(0, 4)})
    (rows_file,) = (store_path / "runs" / run_id / "rows" / str(table_id)).iterdir()
    _truncate(rows_file)
    for check in (lambda: store.read_rows(run_id, table_id), store.verify):
        with pytest.raises(DamagedStoreError, match=rows_file.name):
            check()


def test_garbage_collection_frees_only_the_dead_runs_own_reservations(store_path: Path) -> None:
    """A writer logs the id it is about to try before trying it: if it dies
    then, the logged id may be another writer's, which must stay reserved."""
    import json
    import socket
    import subprocess

    store = _store(store_path)
    store.create()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    staging = store_path / "_staging" / "dead-run"
    staging.mkdir()
    owner = {"pid": dead.pid, "host": socket.gethostname(), "run_id": "dead-run"}
    (staging / "_owner.json").write_text(json.dumps(owner))
    (staging / "_reservations").write_text("tables:1\ntables:2")
    (store_path / "_ids" / "tables" / "1").write_text("live-run")  # it lost id 1 to a live writer
    (store_path / "_ids" / "tables" / "2").write_text("dead-run")
    assert store.collect_garbage() == ["dead-run"]
    assert sorted(p.name for p in (store_path / "_ids" / "tables").iterdir()) == ["1"]
