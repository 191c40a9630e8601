"""Sources as Spark read them (issue 25): a source table holds exactly the
rows Spark read, whatever read options chose or skipped them. A read Spark
does file by file, whole, is stored as copies of the files it listed
(``pathGlobFilter``, ``recursiveFileLookup``, ``modifiedBefore/After`` only
choose files); one where Spark may skip files, adds partition values or
merges schemas is read through Spark; a file pyarrow cannot read never
fails the capture."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import provplug
from provplug import schema
from provplug.plugin.writers import SourceFile, local_destination
from provplug.store.open import open_store

from .helpers import F, expect, labelled_triples

Reader = Callable[[Any], Any]


def _parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _write_derived(df: Any, out: Path) -> None:
    """The script's one write: every row, ``v`` times ten, keyed by ``k``."""
    df.select("k", (F.col("v") * 10).alias("v10")).write.parquet(str(out))


def _captured(spark: Any, store: Path, read: Reader, out: Path) -> None:
    with provplug.capture_writes(spark, store=store) as writes:
        _write_derived(read(spark), out)
    assert writes.run is not None


def _table(store: Path, origin: str) -> dict[str, Any]:
    (found,) = [t for t in open_store(store).tables().to_pylist() if t["origin"] == origin]
    return found


def _source_rows(store: Path) -> list[tuple[Any, ...]]:
    table = _table(store, "source")
    rows = open_store(store).read_rows(table["run_id"], table["table_id"])
    assert rows is not None
    return sorted(tuple(r[c] for c in table["columns"]) for r in rows.to_pylist())


def _copied(store: Path) -> bool:
    """Whether the source was stored as copies of its files (numbered by position)."""
    table = _table(store, "source")
    folder = Path(open_store(store).run_paths("rows")[0], str(table["table_id"]))
    return all(schema.positional_offset(p.name) is not None for p in folder.glob("*.parquet"))


def _plain(spark: Any, read: Reader) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in read(spark).collect())


def _check(spark: Any, store: Path, tmp_path: Path, read: Reader, copied: bool) -> list[tuple[Any, ...]]:
    """Capture the script over ``read``; its source holds what plain Spark
    reads, its output is the plain run's, and each output cell's lineage is
    the source row with the same key. Returns the rows plain Spark read."""
    plain = _plain(spark, read)
    _write_derived(read(spark), tmp_path / "plain")
    _captured(spark, store, read, tmp_path / "captured")
    source, columns = _table(store, "source")["name"], _table(store, "source")["columns"]
    assert _source_rows(store) == plain
    assert _copied(store) is copied
    written = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "captured")).collect())
    assert written == sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "plain")).collect())
    output = _table(store, "output")["name"]
    key = {source: ["k"], output: ["k"]}
    at = {c: i for i, c in enumerate(columns)}
    want = expect(
        f"write:{output}",
        output,
        {
            cell: parents
            for row in plain
            for cell, parents in {
                ("k", row[at["k"]]): [(source, "k", row[at["k"]])],
                ("v10", row[at["k"]]): [(source, "v", row[at["k"]])],
            }.items()
        },
    )
    assert labelled_triples(store, key) == want
    return plain


@pytest.fixture
def spark_conf(spark: Any) -> Iterator[Callable[[str, str], None]]:
    """Set SQL confs for one test; unset afterwards."""
    changed: list[str] = []

    def set_conf(key: str, value: str) -> None:
        changed.append(key)
        spark.conf.set(key, value)

    yield set_conf
    for key in changed:
        spark.conf.unset(key)


def _folder_with_a_corrupt_file(tmp_path: Path) -> Path:
    """Spark's own ``datasource.py`` example: dir1 holds a Parquet file and a JSON file."""
    folder = tmp_path / "dir1"
    _parquet(folder / "file1.parquet", [{"k": 1, "v": 10}, {"k": 2, "v": 20}])
    (folder / "file3.json").write_text('{"k": 3, "v": 30}\n')
    return folder


def test_ignore_corrupt_files_option_under_capture_writes(spark: Any, store_path: Path, tmp_path: Path) -> None:
    """The issue's case: Spark skips the JSON file; capture no longer copies
    it (pyarrow: "Parquet magic bytes not found") and writes what plain Spark wrote."""
    folder = _folder_with_a_corrupt_file(tmp_path)

    def read(s: Any) -> Any:
        return s.read.option("ignoreCorruptFiles", "true").parquet(str(folder))

    assert _check(spark, store_path, tmp_path, read, copied=False) == [(1, 10), (2, 20)]


def test_ignore_corrupt_files_conf(spark: Any, spark_conf: Any, store_path: Path, tmp_path: Path) -> None:
    folder = _folder_with_a_corrupt_file(tmp_path)
    spark_conf("spark.sql.files.ignoreCorruptFiles", "true")
    assert _check(spark, store_path, tmp_path, lambda s: s.read.parquet(str(folder)), copied=False) == [
        (1, 10),
        (2, 20),
    ]


def test_ignore_missing_files_is_read_through_spark(spark: Any, store_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "events"
    _parquet(folder / "a.parquet", [{"k": 1, "v": 10}])
    _parquet(folder / "b.parquet", [{"k": 2, "v": 20}])

    def read(s: Any) -> Any:
        return s.read.option("ignoreMissingFiles", "true").parquet(str(folder))

    assert _check(spark, store_path, tmp_path, read, copied=False) == [(1, 10), (2, 20)]


def test_path_glob_filter_copies_only_the_matching_files(spark: Any, store_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "events"
    _parquet(folder / "a.parquet", [{"k": 1, "v": 10}])
    _parquet(folder / "b.parquet", [{"k": 2, "v": 20}, {"k": 3, "v": 30}])
    _parquet(folder / "b.parquet.bak", [{"k": 9, "v": 90}])  # Parquet too: only the filter leaves it out

    def read(s: Any) -> Any:
        return s.read.option("pathGlobFilter", "*.parquet").parquet(str(folder))

    assert _check(spark, store_path, tmp_path, read, copied=True) == [(1, 10), (2, 20), (3, 30)]


def test_recursive_file_lookup_copies_nested_files(spark: Any, store_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "events"
    _parquet(folder / "a.parquet", [{"k": 1, "v": 10}])
    _parquet(folder / "2024" / "b.parquet", [{"k": 2, "v": 20}])
    _parquet(folder / "2024" / "x=1" / "c.parquet", [{"k": 3, "v": 30}])  # no partition column: recursive lookup

    def read(s: Any) -> Any:
        return s.read.option("recursiveFileLookup", "true").parquet(str(folder))

    assert _check(spark, store_path, tmp_path, read, copied=True) == [(1, 10), (2, 20), (3, 30)]


@pytest.mark.parametrize(("option", "kept"), [("modifiedAfter", (2, 20)), ("modifiedBefore", (1, 10))])
def test_modified_before_and_after_copy_the_chosen_files(
    spark: Any, store_path: Path, tmp_path: Path, option: str, kept: tuple[int, int]
) -> None:
    folder = tmp_path / "events"
    _parquet(folder / "old.parquet", [{"k": 1, "v": 10}])
    _parquet(folder / "new.parquet", [{"k": 2, "v": 20}])
    os.utime(folder / "old.parquet", (1_577_836_800, 1_577_836_800))  # 2020-01-01
    os.utime(folder / "new.parquet", (1_641_000_000, 1_641_000_000))  # 2022-01-01

    def read(s: Any) -> Any:
        return s.read.option(option, "2021-01-01T00:00:00").parquet(str(folder))

    assert _check(spark, store_path, tmp_path, read, copied=True) == [kept]


def test_partition_columns_are_read_through_spark(spark: Any, store_path: Path, tmp_path: Path) -> None:
    """The partition column's values are in the folder names, in no file: no copy holds them."""
    folder = tmp_path / "events"
    _parquet(folder / "day=1" / "a.parquet", [{"k": 1, "v": 10}])
    _parquet(folder / "day=2" / "a.parquet", [{"k": 2, "v": 20}])
    plain = _check(spark, store_path, tmp_path, lambda s: s.read.parquet(str(folder)), copied=False)
    assert plain == [(1, 10, 1), (2, 20, 2)]
    assert _table(store_path, "source")["columns"] == ["k", "v", "day"]


def test_merged_schemas_are_read_through_spark(spark: Any, store_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "events"
    _parquet(folder / "a.parquet", [{"k": 1, "v": 10}])
    _parquet(folder / "b.parquet", [{"k": 2, "v": 20, "note": "late"}])

    def read(s: Any) -> Any:
        return s.read.option("mergeSchema", "true").parquet(str(folder))

    plain = _check(spark, store_path, tmp_path, read, copied=False)
    assert sorted(plain, key=lambda r: r[0]) == [(1, 10, None), (2, 20, "late")]


def test_merge_schema_over_files_of_one_schema_is_still_copied(spark: Any, store_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "events"
    _parquet(folder / "a.parquet", [{"k": 1, "v": 10}])
    _parquet(folder / "b.parquet", [{"k": 2, "v": 20}])

    def read(s: Any) -> Any:
        return s.read.option("mergeSchema", "true").parquet(str(folder))

    assert _check(spark, store_path, tmp_path, read, copied=True) == [(1, 10), (2, 20)]


def test_an_option_not_known_to_only_choose_files_is_read_through_spark(
    spark: Any, store_path: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "events"
    _parquet(folder / "a.parquet", [{"k": 1, "v": 10}])

    def read(s: Any) -> Any:
        return s.read.option("datetimeRebaseMode", "CORRECTED").parquet(str(folder))

    assert _check(spark, store_path, tmp_path, read, copied=False) == [(1, 10)]


# -- pyarrow errors never reach the job -------------------------------------------------------
def test_a_file_pyarrow_cannot_read_is_not_copied(tmp_path: Path) -> None:
    from provplug_spark.sources import parquet_parts

    good, bad = tmp_path / "good.parquet", tmp_path / "bad.parquet"
    _parquet(good, [{"k": 1}])
    bad.write_bytes(b"PAR1 but no footer")
    assert parquet_parts([good.as_uri()], ["k"]) is not None
    assert parquet_parts([good.as_uri(), bad.as_uri()], ["k"]) is None
    assert parquet_parts([(tmp_path / "gone.parquet").as_uri()], ["k"]) is None


class _Rows:
    """The one call :func:`copied_rows` makes of a run, over a local folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def rows_destination(self, table_id: int) -> Any:
        return local_destination(self.root / str(table_id))


def test_a_copy_that_fails_midway_leaves_nothing_and_says_so(tmp_path: Path) -> None:
    """The second file vanished after it was listed: the copy stops, the
    first copy is removed, and the caller is told to read through Spark."""
    import pyarrow.fs as pafs
    from provplug_spark.sources import Copied, copied_rows

    first = tmp_path / "a.parquet"
    _parquet(first, [{"k": 1}, {"k": 2}])
    local = pafs.LocalFileSystem()
    parts = [SourceFile(local, str(first), 2), SourceFile(local, str(tmp_path / "gone.parquet"), 1)]
    run = _Rows(tmp_path / "rows")
    assert copied_rows(run, 7, parts) is None  # type: ignore[arg-type]
    assert not (tmp_path / "rows" / "7").exists()
    assert copied_rows(run, 8, parts[:1]) == Copied(2, (schema.positional_name(0),))  # type: ignore[arg-type]
    assert [p.name for p in (tmp_path / "rows" / "8").iterdir()] == [schema.positional_name(0)]


def test_under_a_local_master_source_files_are_copied_in_this_process_without_a_spark_job(
    spark: Any, store_path: Path, tmp_path: Path, mocker: Any
) -> None:
    """Under a local master the executors are this application's own
    process: a source's files are copied here, a copy a file, and no Spark
    job of the copies' group runs (its start cost more than the copying);
    the copies are the files, byte for byte."""
    from provplug_spark.sources import COPY_JOB_GROUP

    from provplug.plugin import writers

    for part in range(3):
        _parquet(tmp_path / "src" / f"part-{part}.parquet", [{"k": part * 10 + i, "v": i} for i in range(part + 1)])
    in_driver = mocker.spy(writers.pafs, "copy_files")
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(COPY_JOB_GROUP))
    _captured(spark, store_path, lambda s: s.read.parquet(str(tmp_path / "src")), tmp_path / "out")
    assert set(tracker.getJobIdsForGroup(COPY_JOB_GROUP)) == before
    assert in_driver.call_count == 3
    assert _copied(store_path)
    table = _table(store_path, "source")
    folder = Path(open_store(store_path).run_paths("rows")[0], str(table["table_id"]))
    copies = sorted(p.read_bytes() for p in folder.glob("*.parquet"))
    assert copies == sorted(p.read_bytes() for p in (tmp_path / "src").glob("*.parquet"))


def test_copies_on_executors_run_as_one_spark_job_and_never_in_the_driver(
    spark: Any, tmp_path: Path, mocker: Any
) -> None:
    """Issue 27: on a cluster a source's files reach the store through the
    executors: one Spark job of the copies' group, as many tasks as cores
    (at most one a file); the driver's own copying is never called; the
    caller's job group is back afterwards."""
    import pyarrow.fs as pafs
    from provplug_spark.sources import COPY_JOB_GROUP, copy_on_executors

    from provplug.plugin import writers

    for part in range(3):
        _parquet(tmp_path / "src" / f"part-{part}.parquet", [{"k": part, "v": part}])
    files = [(pafs.LocalFileSystem(), str(tmp_path / "src" / f"part-{part}.parquet"), 1) for part in range(3)]
    copies, rows = writers.positional_copies(local_destination(tmp_path / "copies"), files)
    local_destination(tmp_path / "copies").create()
    in_driver = mocker.spy(writers.pafs, "copy_files")
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(COPY_JOB_GROUP))
    copy_on_executors(spark, copies)
    jobs = set(tracker.getJobIdsForGroup(COPY_JOB_GROUP)) - before
    assert len(jobs) == 1
    (job,) = jobs
    info = tracker.getJobInfo(job)
    assert info is not None and info.status == "SUCCEEDED"
    cores = spark.sparkContext.defaultParallelism
    assert sum(tracker.getStageInfo(s).numTasks for s in info.stageIds) == min(3, cores)
    assert in_driver.call_count == 0
    assert rows == 3
    copied = sorted(p.read_bytes() for p in (tmp_path / "copies").glob("*.parquet"))
    assert copied == sorted(p.read_bytes() for p in (tmp_path / "src").glob("*.parquet"))
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None  # the caller's group is back


def test_the_sources_a_write_reads_first_are_copied_in_one_job(
    spark: Any, store_path: Path, tmp_path: Path, mocker: Any
) -> None:
    """Two tables a write is the first to read: their files (two and one)
    are copied by one call (on a cluster one Spark job: a job costs its
    start-up, a table each cost one), and each stays its own source table,
    numbered by position, its cells the parents of the joined row's."""
    from provplug_spark import session

    for part in range(2):
        _parquet(tmp_path / "a" / f"part-{part}.parquet", [{"k": part, "v": 10 + part}])
    _parquet(tmp_path / "b" / "part-0.parquet", [{"k": 0, "w": 100}, {"k": 1, "w": 101}])
    copying = mocker.spy(session, "copy_sources")
    with provplug.capture_writes(spark, store=store_path):
        a, b = spark.read.parquet(str(tmp_path / "a")), spark.read.parquet(str(tmp_path / "b"))
        a.join(b, "k").select("k", "v", "w").write.parquet(str(tmp_path / "joined"))
    assert [len(call.args[1]) for call in copying.call_args_list] == [3]
    store = open_store(store_path)
    sources = {t["name"]: t for t in store.tables().to_pylist() if t["origin"] == "source"}
    assert sorted(sources) == ["a", "b"]
    for table in sources.values():
        folder = Path(store.run_paths("rows")[0], str(table["table_id"]))
        assert all(schema.positional_offset(p.name) is not None for p in folder.glob("*.parquet"))
    out = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "joined")).collect())
    assert out == [(0, 10, 100), (1, 11, 101)]
    # Cell by cell (rows keyed by k): a using join's key on both sides' keys, v from a, w from b.
    want = expect(
        "write:joined",
        "joined",
        {
            **{("k", k): [("a", "k", k), ("b", "k", k)] for k in (0, 1)},
            **{("v", k): [("a", "v", k)] for k in (0, 1)},
            **{("w", k): [("b", "w", k)] for k in (0, 1)},
        },
    )
    assert labelled_triples(store_path) == want
