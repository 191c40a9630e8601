"""The run recorder and the writers: the one way rows and triples get into a run."""

from __future__ import annotations

import dataclasses
import datetime as dt
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from provplug import ids, schema
from provplug.errors import CaptureError
from provplug.ingest.recorder import StagedRun
from provplug.model import OpInfo, TableInfo
from provplug.plugin.protocols import RunRecorder
from provplug.plugin.writers import (
    Destination,
    PartWriter,
    RowsWriter,
    SourceFile,
    TripleWriter,
    filesystem_for,
    local_destination,
    triples_table,
)
from provplug.store.parquet import ParquetStore


def _read(destination: Destination) -> pa.Table:
    return pads.dataset(destination.files(), format="parquet", filesystem=destination.filesystem()).to_table()


# -- triples_table -------------------------------------------------------------------


def test_triples_table_broadcasts_scalars_and_derives_source_tables() -> None:
    src = [ids.value_id(3, 0, 5), ids.value_id(4, 1, 6)]
    dst = [ids.value_id(7, 0, 0), ids.value_id(7, 1, 0)]
    table = triples_table(np.array(src), dst, 9, dst_table=7)
    assert table.schema == schema.TRIPLES
    assert table.to_pydict() == {"src": src, "dst": dst, "op": [9, 9], "src_table": [3, 4], "dst_table": [7, 7]}


def test_triples_table_takes_arrays_for_imported_ids() -> None:
    table = triples_table(pa.array([1, 2]), [3, 4], np.array([10, 11]), src_table=[5, 6], dst_table=np.array([7, 8]))
    assert table.column("op").to_pylist() == [10, 11]
    assert table.column("src_table").to_pylist() == [5, 6]
    assert table.column("dst_table").to_pylist() == [7, 8]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"src": [1, 2], "dst": [3], "op": 1, "dst_table": 1},
        {"src": [1, 2], "dst": [3, 4], "op": [1], "dst_table": 1},
        {"src": [1, 2], "dst": [3, 4], "op": 1, "dst_table": [1, 2, 3]},
    ],
)
def test_triples_table_rejects_arrays_of_other_lengths(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"items for|src ids"):
        triples_table(**kwargs)


def test_an_empty_triples_table_has_the_schema() -> None:
    assert triples_table([], [], 1, dst_table=1).schema == schema.TRIPLES


# -- writers -------------------------------------------------------------------------


def test_triple_writer_buffers_row_groups_rolls_parts_and_counts(tmp_path: Path) -> None:
    out = local_destination(tmp_path / "triples")
    src = np.arange(1, 26, dtype=np.int64)
    with TripleWriter(out, "t1", row_group_rows=4, file_rows=10) as writer:
        for lo in range(0, 25, 3):  # batches of 3: row groups of 6, parts of 12
            writer.write(src[lo : lo + 3], src[lo : lo + 3] + 100, 5, dst_table=2, src_table=1)
    assert writer.rows == 25
    files = writer.close()
    assert [Path(f.path).name for f in files] == ["t1-00000.parquet", "t1-00001.parquet", "t1-00002.parquet"]
    assert [f.rows for f in files] == [12, 12, 1] and {f.dataset for f in files} == {"triples"}
    assert out.files() == [f.path for f in files]
    first = pq.ParquetFile(files[0].path)
    assert [first.metadata.row_group(i).num_rows for i in range(first.num_row_groups)] == [6, 6]
    assert first.metadata.row_group(0).column(0).compression == "ZSTD"
    table = _read(out).sort_by("src")
    assert table.schema == schema.TRIPLES
    assert table.column("src").to_pylist() == src.tolist()
    assert set(table.column("op").to_pylist()) == {5}


def test_a_writer_of_no_rows_writes_no_file(tmp_path: Path) -> None:
    out = local_destination(tmp_path / "triples")
    with TripleWriter(out) as writer:
        writer.write([], [], 1, dst_table=1)
    assert writer.close() == [] and writer.rows == 0 and not out.exists()


def test_a_closed_writer_refuses_more(tmp_path: Path) -> None:
    writer = TripleWriter(local_destination(tmp_path))
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write([1], [2], 1, dst_table=1)


def test_triple_writer_casts_a_compatible_table(tmp_path: Path) -> None:
    out = local_destination(tmp_path)
    loose = pa.table(
        {"dst": [2], "src": [1], "op": [3], "src_table": [1], "dst_table": [1]}
    )  # int64 tables, other order
    with TripleWriter(out) as writer:
        writer.write_table(loose)
    assert _read(out).schema == schema.TRIPLES


def test_rows_writer_appends_row_numbers_and_rejects_the_reserved_column(tmp_path: Path) -> None:
    out = local_destination(tmp_path / "rows")
    with RowsWriter(out, "r") as writer:
        writer.write(pa.table({"name": ["ann", "bo"], "age": [30, 40]}), [7, 8])
        writer.write(pa.record_batch({"name": ["cy"], "age": [50]}), np.array([9]))
        with pytest.raises(ValueError, match="row numbers"):
            writer.write(pa.table({"name": ["x"], "age": [1]}), [1, 2])
        with pytest.raises(CaptureError, match=schema.ROW_COLUMN):
            writer.write(pa.table({schema.ROW_COLUMN: [1]}), [1])
        with pytest.raises(ValueError, match=schema.ROW_COLUMN):
            writer.write_table(pa.table({"name": ["x"]}))
    table = _read(out)
    assert table.column_names == ["name", "age", schema.ROW_COLUMN]
    assert table.column(schema.ROW_COLUMN).to_pylist() == [7, 8, 9]
    assert writer.rows == 3


def test_part_writer_writes_any_table(tmp_path: Path) -> None:
    out = local_destination(tmp_path / "keys")
    with PartWriter(out, "k", dataset="keys") as writer:
        writer.write_table(pa.table({"k": [1, 2]}))
    (written,) = writer.close()
    assert written.dataset == "keys" and written.rows == 2 and written.path == out.file("k-00000.parquet")


def test_a_destination_pickles_as_strings_and_opens_its_filesystem(tmp_path: Path) -> None:
    out = Destination("relative/store.prov", str(tmp_path / "d"), str(tmp_path / "d"))
    again = pickle.loads(pickle.dumps(out))
    assert again == out and vars(again) == vars(out)
    assert isinstance(again.filesystem(), pafs.LocalFileSystem)
    assert filesystem_for("relative/store.prov") is filesystem_for("relative/store.prov")
    child = out.child("a", "b")
    assert child.path == f"{tmp_path}/d/a/b" and child.spark_path == f"{tmp_path}/d/a/b"
    child.create()
    child.write_text("x.json", "{}")
    assert child.read_text("x.json") == "{}" and child.files() == [child.file("x.json")]
    out.delete()
    assert not out.exists()
    out.delete()  # nothing to delete: no error


def test_discard_files_keeps_the_used_attempts(tmp_path: Path) -> None:
    out = local_destination(tmp_path)
    paths = []
    for attempt in (0, 1):
        with TripleWriter(out, f"t1-rows-p00000-a{attempt}") as writer:
            writer.write([1], [2], 1, dst_table=1)
        paths += [f.path for f in writer.close()]
    with TripleWriter(out, "other") as writer:
        writer.write([1], [2], 1, dst_table=1)
    out.discard_files("t1-rows-", keep={paths[1]})
    assert [Path(p).name for p in out.files()] == ["other-00000.parquet", "t1-rows-p00000-a1-00000.parquet"]


# -- the recorder --------------------------------------------------------------------


@pytest.fixture
def store(store_path: Path) -> ParquetStore:
    return ParquetStore(str(store_path))


def _stage(store: ParquetStore, store_rows: bool, body: Callable[[StagedRun], None]) -> None:
    with store.transaction("capture") as txn:
        run = StagedRun(store, txn, store_rows=store_rows)
        body(run)
        run.finish()


def test_a_staged_run_is_a_run_recorder(store: ParquetStore) -> None:
    def body(run: StagedRun) -> None:
        assert isinstance(run, RunRecorder)

    _stage(store, True, body)


def test_rows_and_triples_through_the_recorder_commit_with_the_run(store: ParquetStore) -> None:
    def body(run: StagedRun) -> None:
        people = run.new_table("People", "source", ["name"])
        out = run.new_table("Upper", "output", ["name"])
        with pytest.raises(CaptureError, match="twice"):
            run.new_table("People", "output", [])
        for table in (people, out):
            with run.rows_writer(table.table_id) as rows:
                rows.write(pa.table({"name": ["ann", "bo"]}), [0, 1])
            run.record_table(_counted(table, 2))
        op_id = run.new_op_id()
        run.record_op(OpInfo(op_id, "Upper", run.run_id, "udf", (people.table_id,), (out.table_id,)))
        with run.triples_writer() as triples:
            triples.write(
                [ids.value_id(people.table_id, 0, r) for r in (0, 1)],
                [ids.value_id(out.table_id, 0, r) for r in (0, 1)],
                op_id,
                dst_table=out.table_id,
            )
        finished = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
        done = run.finish_op(op_id, triples=triples.rows, finished=finished)
        assert (done.triples, done.finished) == (2, finished)
        with pytest.raises(CaptureError, match="not staged"):
            run.finish_op(op_id + 1000, triples=0)
        run.scratch_destination("keys", "1").write_text("k.json", "{}")
        run.attach_text("engine_lineage.json", "{}")
        with pytest.raises(ValueError):
            run.attach_text("triples", "")

    _stage(store, True, body)
    (manifest,) = store.runs()
    assert manifest["datasets"] == ["engine_lineage.json", "ops.parquet", "rows", "tables.parquet", "triples"]
    assert manifest["counts"]["triples"] == 2
    assert store.triples().to_table().num_rows == 2
    assert store.ops().column("triples").to_pylist() == [2]
    run_dir = Path(store.path("runs", manifest["run_id"]))
    assert not (run_dir / "_scratch").exists()
    table_id = store.tables().column("table_id").to_pylist()[0]
    rows = store.read_rows(manifest["run_id"], table_id)
    assert rows is not None and rows.column(schema.ROW_COLUMN).to_pylist() == [0, 1]


def _counted(table: TableInfo, rows: int) -> TableInfo:
    return dataclasses.replace(table, rows=rows, stored_rows=True)


def test_rows_are_dropped_when_the_run_keeps_none(store: ParquetStore) -> None:
    def body(run: StagedRun) -> None:
        table = run.new_table("People", "source", ["name"])
        with run.rows_writer(table.table_id) as rows:  # an adapter may need them while the run lasts
            rows.write(pa.table({"name": ["ann"]}), [0])
        run.record_table(table)

    _stage(store, False, body)
    (manifest,) = store.runs()
    assert "rows" not in manifest["datasets"] and "triples" not in manifest["datasets"]
    assert not Path(store.path("runs", manifest["run_id"], "rows")).exists()


def test_a_source_is_stored_as_positional_copies(store: ParquetStore, tmp_path: Path) -> None:
    parts = []
    for i, n in enumerate((2, 0, 3)):
        path = tmp_path / f"in-{i}.parquet"
        pq.write_table(pa.table({"x": list(range(n))}, schema=pa.schema([("x", pa.int64())])), path)
        parts.append(SourceFile(pafs.LocalFileSystem(), str(path), n))

    def body(run: StagedRun) -> None:
        table = run.new_table("Src", "source", ["x"])
        assert run.copy_positional_rows(table.table_id, parts) == 5
        run.record_table(_counted(table, 5))

    _stage(store, True, body)
    (manifest,) = store.runs()
    table_id = store.tables().column("table_id").to_pylist()[0]
    names = sorted(p.name for p in Path(store.path("runs", manifest["run_id"], "rows", str(table_id))).iterdir())
    assert names == [schema.positional_name(0), schema.positional_name(2)]
    rows = store.read_rows(manifest["run_id"], table_id)
    assert rows is not None and sorted(rows.column(schema.ROW_COLUMN).to_pylist()) == [0, 1, 2, 3, 4]


def test_a_failed_run_leaves_nothing(store: ParquetStore) -> None:
    def body(run: StagedRun) -> None:
        with run.triples_writer() as triples:
            triples.write([1], [2], run.new_op_id(), dst_table=1, src_table=1)
        raise RuntimeError("boom")

    store.create()
    with pytest.raises(RuntimeError):
        _stage(store, True, body)
    assert store.runs() == [] and store.stats()["triples"] == 0


def test_row_lineage_and_rules_commit_with_the_run_and_read_back(store: ParquetStore) -> None:
    from provplug.ingest import rowlineage
    from provplug.rowrules import ColumnRule, OpRowRules

    rules = OpRowRules(
        7,
        3,
        "exact",
        {"n": ColumnRule("aggregate", function="count_star"), "city": ColumnRule("copy", 2, "city")},
        {2: ("city",)},
    )

    def body(run: StagedRun) -> None:
        with run.row_lineage_writer() as writer:
            writer.write(7, 3, [0, 0, 1], [0, 1, 0], 2, [4, 5, 6])
        run.record_row_rules(rules)
        with pytest.raises(CaptureError, match="twice"):
            run.record_row_rules(rules)

    _stage(store, True, body)
    assert rowlineage.rules_of(store) == {3: rules}
    dataset = rowlineage.lineage_of(store)
    assert dataset is not None
    got = dataset.to_table().sort_by("in_row").to_pylist()
    assert [(r["out_row"], r["member"], r["in_table"], r["in_row"], r["optional"]) for r in got] == [
        (0, 0, 2, 4, False),
        (0, 1, 2, 5, False),
        (1, 0, 2, 6, False),
    ]
    assert rowlineage.lineage_of(store, run_ids=["no-such-run"]) is None


def test_row_lineage_parts_are_dictionary_and_delta_encoded(tmp_path: Path) -> None:
    from provplug.plugin.writers import RowLineageWriter

    with RowLineageWriter(local_destination(str(tmp_path)), "t") as writer:
        writer.write(7, 3, np.arange(1000), np.zeros(1000), 2, np.arange(1000) * 2)
    (path,) = [w.path for w in writer.written]
    group = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {group.column(i).path_in_schema: set(group.column(i).encodings) for i in range(group.num_columns)}
    for column in ("out_row", "member", "in_row"):
        assert "DELTA_BINARY_PACKED" in encodings[column], encodings
    for column in ("op", "out_table", "in_table"):
        assert encodings[column] & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}, encodings
    assert "RLE" in encodings["optional"]  # a boolean: run-length encoded (data page v2), no dictionary
    assert group.column(0).compression == "ZSTD"


def test_location_edges_commit_with_the_run_as_one_file(store: ParquetStore) -> None:
    from provplug.ingest.recorder import LOCATIONS as RECORDER_LOCATIONS
    from provplug.location import RowRuns, location_edge
    from provplug.store.locations import LOCATIONS, locations_of

    assert RECORDER_LOCATIONS == LOCATIONS
    edge = location_edge(5, 1, 2, {0: [0], 1: [0, 1]}, RowRuns.partitions([3, 2]))

    def body(run: StagedRun) -> None:
        run.record_location_edge(edge)
        with pytest.raises(CaptureError, match="recorded twice"):
            run.record_location_edge(edge)
        assert run.location_edges == (edge,)

    _stage(store, True, body)
    assert locations_of(store) == [edge]
    (manifest,) = store.runs()
    assert LOCATIONS in manifest["datasets"]


def test_a_run_without_location_edges_writes_no_locations_file(store: ParquetStore) -> None:
    from provplug.store.locations import LOCATIONS, locations_of

    _stage(store, True, lambda run: None)
    (manifest,) = store.runs()
    assert LOCATIONS not in manifest["datasets"] and locations_of(store) == []


def test_a_rule_refuses_an_unknown_aggregate() -> None:
    from provplug.rowrules import ColumnRule

    with pytest.raises(ValueError, match="unknown aggregate"):
        ColumnRule("aggregate", 1, "x", function="median")
