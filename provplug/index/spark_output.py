"""The generation's files as the Spark engine's tasks write them.

A task that has computed some of the index's rows writes them itself, with
pyarrow, to the store's filesystem (local disk, HDFS or S3: the store's own
``pyarrow.fs`` object, pickled into the task), and hands back one small row
per file written (:data:`FILE_DDL`). Spark never sees the output rows, so it
neither converts them from Arrow nor re-encodes them as Parquet.

* Bucketed datasets (``triples``, ``setdeps``, ``rsetdeps``, ``value_sets``):
  one ``bucket=K/part-<uuid>.parquet`` per task and non-empty bucket, rows in
  the order the task gave them (value ids sorted, set dependencies sorted by
  pair, as the layout and the local engine have them).
* Single files (``sets.parquet``, ``components.parquet``): every task writes a
  part to the scratch folder; one task then merges the parts into the file,
  sorted by its key (:func:`merge_parts`).

One file per bucket (:func:`crowded_buckets`, :meth:`TaskOutput.merge_bucket`):
a bucket that several tasks wrote is merged, by a task, into one file, so a
generation holds as many files as the local engine's whatever the number of
tasks (on object storage each file costs requests, to write and to read).

Commit (:func:`commit`, on the driver, after the tasks): the files the
successful task attempts reported are the dataset. Anything else under a
dataset (files of a failed or speculative attempt) is deleted, and an empty
bucket gets its empty file, so the generation holds exactly the layout.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from provplug.index import layout

# One row per file a task wrote: dataset, bucket (-1: a part of a single
# file), path on the store's filesystem, rows.
FILE_DDL = "dataset string, bucket int, path string, rows long"
FILE_SCHEMA = pa.schema([("dataset", pa.string()), ("bucket", pa.int32()), ("path", pa.string()), ("rows", pa.int64())])


@dataclasses.dataclass(frozen=True)
class Bucketed:
    schema: pa.Schema
    key: str
    buckets: int


BUCKETED = {
    "triples": Bucketed(layout.INDEXED_TRIPLES, "dst_csid", layout.TRIPLE_BUCKETS),
    "setdeps": Bucketed(layout.SETDEPS, "dst_csid", layout.SETDEP_BUCKETS),
    "rsetdeps": Bucketed(layout.SETDEPS, "src_csid", layout.SETDEP_BUCKETS),
    "value_sets": Bucketed(layout.VALUE_SETS, "value_id", layout.VALUE_BUCKETS),
}
# Single-file dataset -> (schema, sort key).
SINGLE = {"sets": (layout.SETS, "csid"), "components": (layout.COMPONENTS, "ccid")}


@dataclasses.dataclass(frozen=True)
class TaskOutput:
    """Where tasks write (picklable: shipped to the executors)."""

    fs: pafs.FileSystem
    generation: str  # the new generation's folder on ``fs``
    parts: str  # scratch folder for the parts of the single files

    def bucketed(self, name: str, table: pa.Table) -> Iterator[dict[str, Any]]:
        """``table`` (the dataset's columns) into one file per non-empty bucket."""
        spec = BUCKETED[name]
        if not table.num_rows:
            return
        key = np.asarray(table.column(spec.key).to_numpy(), dtype=np.int64)
        bucket = (key % spec.buckets).astype(np.uint8 if spec.buckets <= 256 else np.int64)
        order = np.argsort(bucket, kind="stable")  # keeps the rows' order inside a bucket
        starts = np.searchsorted(bucket[order], np.arange(spec.buckets + 1))
        ordered = table.select(spec.schema.names).cast(spec.schema).take(order)
        file = f"part-{uuid.uuid4().hex}.parquet"
        for k in np.flatnonzero(np.diff(starts)):
            path = f"{self.generation}/{name}/bucket={k}/{file}"
            part = ordered.slice(int(starts[k]), int(starts[k + 1] - starts[k]))
            pq.write_table(part, path, filesystem=self.fs, **layout.parquet_options(spec.schema))
            yield {"dataset": name, "bucket": int(k), "path": path, "rows": part.num_rows}

    def merge_bucket(self, bucket: BucketFiles) -> dict[str, Any]:
        """The files of one bucket as ONE file, its rows ordered as one task
        orders them (value ids sorted, set dependencies sorted by pair);
        the row of the new file. The parts stay: the commit deletes every
        file no task reported, so a failed attempt of this task loses nothing."""
        spec = BUCKETED[bucket.dataset]
        table = pa.concat_tables(pq.read_table(p, filesystem=self.fs, schema=spec.schema) for p in bucket.paths)
        order = MERGED_ORDER.get(bucket.dataset)
        if order:
            table = table.sort_by([(c, "ascending") for c in order])
        path = f"{self.generation}/{bucket.dataset}/bucket={bucket.bucket}/part-{uuid.uuid4().hex}.parquet"
        pq.write_table(table.combine_chunks(), path, filesystem=self.fs, **layout.parquet_options(spec.schema))
        return {"dataset": bucket.dataset, "bucket": bucket.bucket, "path": path, "rows": table.num_rows}

    def part(self, name: str, table: pa.Table) -> Iterator[dict[str, Any]]:
        """A part of the single file ``name`` (merged by :func:`merge_parts`)."""
        if not table.num_rows:
            return
        schema = SINGLE[name][0]
        path = f"{self.parts}/{name}/part-{uuid.uuid4().hex}.parquet"
        pq.write_table(
            table.select(schema.names).cast(schema), path, filesystem=self.fs, **layout.parquet_options(schema)
        )
        yield {"dataset": name, "bucket": -1, "path": path, "rows": table.num_rows}


# The order of a merged bucket's rows (a task writes its rows in this order;
# ``triples`` keep the order of their parts).
MERGED_ORDER = {
    "value_sets": ("value_id",),
    "setdeps": ("src_csid", "dst_csid"),
    "rsetdeps": ("src_csid", "dst_csid"),
}


@dataclasses.dataclass(frozen=True)
class BucketFiles:
    """The files tasks wrote for one bucket of a dataset."""

    dataset: str
    bucket: int
    paths: tuple[str, ...]


def crowded_buckets(written: list[dict[str, Any]]) -> list[BucketFiles]:
    """The buckets more than one task wrote (each to be merged into one file)."""
    paths: dict[tuple[str, int], list[str]] = {}
    for w in written:
        if w["dataset"] in BUCKETED:
            paths.setdefault((w["dataset"], int(w["bucket"])), []).append(w["path"])
    return [BucketFiles(d, k, tuple(sorted(p))) for (d, k), p in sorted(paths.items()) if len(p) > 1]


def merged_files(written: list[dict[str, Any]], merged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``written`` with the files of every merged bucket replaced by its one file."""
    replaced = {(m["dataset"], int(m["bucket"])) for m in merged}
    return [w for w in written if (w["dataset"], int(w["bucket"])) not in replaced] + merged


def file_batches(rows: Iterable[dict[str, Any]]) -> Iterator[pa.RecordBatch]:
    """The per-file rows back to Spark."""
    listed = list(rows)
    if listed:
        yield pa.RecordBatch.from_pylist(listed, schema=FILE_SCHEMA)


def prepare(fs: pafs.FileSystem, output: TaskOutput) -> None:
    """Every bucket folder and the parts' folders, made before the tasks run."""
    for name, spec in BUCKETED.items():
        for k in range(spec.buckets):
            fs.create_dir(f"{output.generation}/{name}/bucket={k}", recursive=True)
    for name in SINGLE:
        fs.create_dir(f"{output.parts}/{name}", recursive=True)


def merge_parts(fs: pafs.FileSystem, generation: str, name: str, parts: list[str]) -> int:
    """The single file ``name``.parquet from its parts, sorted by its key; its rows."""
    schema, key = SINGLE[name]
    tables = [pq.read_table(p, filesystem=fs, schema=schema) for p in parts]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    table = table.sort_by(key).combine_chunks()
    pq.write_table(table, f"{generation}/{name}.parquet", filesystem=fs, **layout.parquet_options(schema))
    return cast(int, table.num_rows)


def commit(fs: pafs.FileSystem, generation: str, written: list[dict[str, Any]]) -> dict[str, int]:
    """Keep exactly the reported files of every bucketed dataset (an empty
    bucket gets an empty file); return each dataset's rows."""
    keep = {w["path"] for w in written}
    rows = dict.fromkeys(BUCKETED, 0)
    for w in written:
        if w["dataset"] in rows:
            rows[w["dataset"]] += int(w["rows"])
    for name, spec in BUCKETED.items():
        folder = f"{generation}/{name}"
        present = fs.get_file_info(pafs.FileSelector(folder, recursive=True))
        for info in present:
            if info.type == pafs.FileType.File and info.path not in keep:
                fs.delete_file(info.path)  # a failed or duplicate attempt's file
        filled = {int(w["bucket"]) for w in written if w["dataset"] == name}
        for k in range(spec.buckets):
            if k not in filled:
                pq.write_table(
                    spec.schema.empty_table(),
                    f"{folder}/bucket={k}/part-empty.parquet",
                    filesystem=fs,
                    **layout.parquet_options(spec.schema),
                )
    return rows
