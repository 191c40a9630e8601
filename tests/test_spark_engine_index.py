"""The Spark index engine on stores whose triples span several files (so
several input partitions, whose local components must be merged), against
the local engine: identical index files, on the in-task path and with every
component forced through the level-synchronous Spark path."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_index import read_index
from test_index_properties import random_provenance, write_import
from test_index_spark import comparable


def multi_run_store(tmp: Path, seed: int, runs: int) -> tuple[Any, list[tuple[int, int, str]]]:
    """One random provenance graph imported as ``runs`` runs, its triples dealt
    at random: every run holds pieces of most components."""
    import provplug
    from provplug.ingest.importer import import_provenance

    rng = random.Random(seed)
    triples, table_of = random_provenance(rng, 5, 20)
    store = provplug.open_store(tmp / f"multi{seed}.prov")
    dealt: list[list[tuple[int, int, str]]] = [[] for _ in range(runs)]
    for t in triples:
        dealt[rng.randrange(runs)].append(t)
    for k, part in enumerate(dealt):
        folder = tmp / f"run{k}"
        folder.mkdir()
        on_part = {x for s, d, _ in part for x in (s, d)}
        import_provenance(store, *write_import(folder, part, {v: t for v, t in table_of.items() if v in on_part}))
    return store, triples


@pytest.mark.parametrize("forced", [False, True], ids=["in-task", "level-synchronous"])
def test_spark_engine_on_many_input_partitions_matches_the_local_engine(
    spark: Any, tmp_path: Path, monkeypatch: Any, forced: bool
) -> None:
    import pyarrow.parquet as pq

    from provplug.index import build_index, current_dir, spark_engine, sparkwcc
    from provplug.progress import Progress

    store, triples = multi_run_store(tmp_path, seed=5, runs=4)
    files = [store.to_spark_path(p) for p in store.run_paths("triples")]
    assert spark.read.parquet(*files).rdd.getNumPartitions() > 1  # the merge has work to do
    build_index(store, theta=8, engine="local")
    local = comparable(read_index(store))
    assert local["meta"]["counts"]["triples"] == len(triples)
    assert any("." in (json.loads(r)["split"] or "") for r in local["sets"])  # sub-splits were used

    if forced:
        monkeypatch.setattr(spark_engine, "COMPONENT_TASK_LIMIT", 0)
        monkeypatch.setattr(sparkwcc, "TASK_EDGE_LIMIT", 0)
    lines: list[str] = []

    class Recorder(Progress):
        def done(self, stage: str, done: int | None = None, unit: str = "items") -> None:
            lines.append(stage)

    meta = build_index(store, theta=8, engine="spark", spark=spark, progress=Recorder(enabled=False))
    assert meta["engine"] == "spark"
    assert comparable(read_index(store)) == local
    assert any("star round" in line for line in lines) == forced
    for part in Path(current_dir(store), "value_sets").glob("bucket=*/*.parquet"):  # sorted, as the layout says
        ids = pq.read_table(part).column("value_id").to_pylist()
        assert ids == sorted(ids)


@pytest.mark.parametrize("path", ["blobs", "rows"])
def test_spark_engine_in_many_input_groups_matches_the_local_engine(
    spark: Any, tmp_path: Path, monkeypatch: Any, path: str
) -> None:
    """Input groups of a few triples each (most components span several
    groups, so the link graph does the work), with the component labels
    broadcast to the tasks (``blobs``) or joined to the triples as rows."""
    from provplug.index import build_index, spark_engine, spark_input

    store, _ = multi_run_store(tmp_path, seed=9, runs=3)
    build_index(store, theta=8, engine="local")
    local = comparable(read_index(store))
    monkeypatch.setattr(spark_input, "GROUP_TRIPLES", 7)
    assert len(spark_input.input_groups(store, 2).groups) > 10
    if path == "rows":
        monkeypatch.setattr(spark_engine, "BROADCAST_ROWS", 0)
    build_index(store, theta=8, engine="spark", spark=spark)
    assert comparable(read_index(store)) == local


def test_input_groups_deal_every_triple_exactly_once(tmp_path: Path) -> None:
    from collections import Counter

    from provplug.index.spark_input import input_groups
    from provplug.store.triples import triple_table

    store, triples = multi_run_store(tmp_path, seed=3, runs=3)
    columns = ("src", "dst", "op", "src_table", "dst_table")
    every = Counter(zip(*(triple_table(store, columns).column(c).to_pylist() for c in columns), strict=True))
    for group_triples in (5, 13, 10**9):
        source = input_groups(store, 2, group_triples)
        dealt: Counter[tuple[int, ...]] = Counter()
        sizes = []
        for g in range(len(source.groups)):
            table = source.read(g, columns)
            sizes.append(0 if table is None else table.num_rows)
            if table is not None:
                dealt.update(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
        assert dealt == every
        assert len(sizes) == max(2, -(-len(triples) // group_triples))
        assert max(sizes) - min(sizes) <= 1  # consecutive equal ranges of the stored rows


def test_file_rows_cut_row_groups_and_join_consecutive_ones() -> None:
    from provplug.index.spark_input import FileRows, _file_rows

    files = [("a", [3, 3, 3]), ("b", [2, 4])]
    assert _file_rows(files, 2, 10) == [FileRows("a", (0, 1, 2), 2, 9), FileRows("b", (0,), 0, 1)]
    assert _file_rows(files, 4, 5) == [FileRows("a", (1,), 1, 2)]
    assert _file_rows(files, 9, 15) == [FileRows("b", (0, 1), 0, 6)]


def test_a_table_no_run_defines_is_store_damage_on_spark(spark: Any, store_path: Path) -> None:
    from conftest import snapshot
    from test_index import _store_with_an_undefined_table

    from provplug.errors import DamagedStoreError
    from provplug.index import build_index

    store = _store_with_an_undefined_table(store_path)
    before = snapshot(store_path)
    with pytest.raises(DamagedStoreError, match="no committed run defines"):
        build_index(store, engine="spark", spark=spark)
    assert snapshot(store_path) == before


def test_blob_shuffle_delivers_each_row_to_its_owner(spark: Any) -> None:
    import numpy as np
    import pyarrow as pa

    from provplug.index.spark_shuffle import BLOB_DDL, owner_keys, receive, send, shuffled, spread

    partitions = 5
    keys = owner_keys(spark, partitions)
    ids = np.arange(1, 2_000, dtype=np.int64) * 64  # shared low bits: spread must still use every owner
    assert set(spread(ids, partitions)) == set(range(partitions))

    def sender(batches: Any) -> Any:
        for b in batches:
            for start in b.column("id").to_pylist():
                chunk = ids[start::2]
                yield from send(pa.table({"x": chunk}), spread(chunk, partitions), keys)

    def receiver(batches: Any) -> Any:
        from pyspark import TaskContext

        table = receive(batches)
        if table is not None:
            xs = table.column("x").to_numpy()
            owner = np.full(len(xs), TaskContext.get().partitionId())
            yield pa.RecordBatch.from_pydict({"x": xs, "owner": owner})

    sent = spark.range(2, numPartitions=2).mapInArrow(sender, BLOB_DDL)
    got = shuffled(sent, partitions).mapInArrow(receiver, "x long, owner long").toArrow()
    xs, owners = got.column("x").to_numpy(), got.column("owner").to_numpy()
    assert sorted(xs.tolist()) == ids.tolist()
    assert (owners == spread(xs, partitions)).all()


def test_components_that_lie_in_one_group_each_need_no_links(spark: Any, tmp_path: Path) -> None:
    """Two one-triple components, one per input group: an empty link graph,
    every component labelled by its own local root; the same index."""
    import provplug
    from provplug.index import build_index
    from provplug.index.spark_input import input_groups
    from provplug.ingest.importer import import_provenance

    store = provplug.open_store(tmp_path / "tiny.prov")
    import_provenance(store, *write_import(tmp_path, [(1, 2, "f"), (3, 4, "f")], {1: "A", 2: "B", 3: "A", 4: "B"}))
    groups = input_groups(store, 2)
    assert [groups.read(g, ("src",)) is not None for g in range(len(groups.groups))] == [True, True]
    build_index(store, theta=2, engine="local")
    local = comparable(read_index(store))
    assert local["meta"]["counts"]["components"] == 2
    build_index(store, theta=2, engine="spark", spark=spark)
    assert comparable(read_index(store)) == local


def test_commit_keeps_exactly_the_reported_files_and_fills_empty_buckets(tmp_path: Path) -> None:
    """A task attempt that failed after writing leaves files no successful
    attempt reported: the commit deletes them; a bucket no task wrote gets
    its empty file."""
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from provplug.index import layout
    from provplug.index.spark_output import BUCKETED, TaskOutput, commit, prepare

    fs = pafs.LocalFileSystem()
    output = TaskOutput(fs, str(tmp_path / "gen"), str(tmp_path / "gen" / "_scratch" / "parts"))
    prepare(fs, output)
    pairs = pa.table({"src_csid": [5, 7, 7], "dst_csid": [1, 17, 2]})
    reported = list(output.bucketed("setdeps", pairs))  # buckets 1 (two rows) and 2
    assert sorted((w["bucket"], w["rows"]) for w in reported) == [(1, 2), (2, 1)]
    stray = tmp_path / "gen" / "setdeps" / "bucket=1" / "part-failed-attempt.parquet"
    pq.write_table(pairs.cast(layout.SETDEPS), stray)
    rows = commit(fs, output.generation, reported)
    assert rows["setdeps"] == 3 and rows["triples"] == 0
    assert not stray.exists()
    for name, spec in BUCKETED.items():
        for k in range(spec.buckets):
            files = sorted((tmp_path / "gen" / name / f"bucket={k}").glob("*.parquet"))
            assert len(files) == 1
            table = pq.read_table(files[0])
            assert table.schema.equals(spec.schema)
            assert table.num_rows == sum(w["rows"] for w in reported if w["dataset"] == name and w["bucket"] == k)
    assert pq.read_table(tmp_path / "gen" / "setdeps" / "bucket=1").to_pydict() == {
        "src_csid": [5, 7],
        "dst_csid": [1, 17],
    }
