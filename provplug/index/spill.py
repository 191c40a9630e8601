"""Scratch files of the local index: what it streams instead of holding.

* :class:`EdgeFile`: dense edge endpoints (two raw integer files), written
  chunk by chunk and read back in chunks, in the same order.
* :class:`BucketSpill`: Arrow IPC streams (lz4), one per output bucket, so
  that rows computed chunk by chunk can be written as one Parquet file per
  bucket afterwards, in the order they arrived.
* :class:`DistinctRuns`: the sorted distinct values of a stream of chunks,
  merged like a binary counter (a merge of two sorted runs is a linear
  timsort pass), with an optional limit on how many there may be.
* :func:`write_parquet`: a Parquet file from a stream of batches in row
  groups of ``ROW_GROUP`` rows, as ``pq.write_table`` cuts a whole table.

Everything lives under one local scratch folder; the engine deletes it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from provplug.index import layout

# pq.write_table's row group size for tables without one (pyarrow >= 15).
ROW_GROUP = 1024 * 1024
_IPC = pa.ipc.IpcWriteOptions(compression="lz4")


class EdgeFile:
    """Pairs ``(src, dst)`` of dense indices appended to ``PREFIX.src`` and ``PREFIX.dst``."""

    def __init__(self, prefix: str, dtype: np.dtype[Any]) -> None:
        self.prefix = prefix
        self.dtype = np.dtype(dtype)
        self.rows = 0
        # Held open across write() calls; close() closes them.
        self._out: tuple[BinaryIO, BinaryIO] | None = (open(f"{prefix}.src", "wb"), open(f"{prefix}.dst", "wb"))  # noqa: SIM115

    def write(self, src: np.ndarray, dst: np.ndarray) -> None:
        assert self._out is not None, "EdgeFile written after it was closed"
        np.ascontiguousarray(src, dtype=self.dtype).tofile(self._out[0])
        np.ascontiguousarray(dst, dtype=self.dtype).tofile(self._out[1])
        self.rows += len(src)

    def close(self) -> None:
        if self._out is not None:
            for f in self._out:
                f.close()
            self._out = None

    def reader(self) -> EdgeReader:
        self.close()
        return EdgeReader(self)

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every pair in order, ``rows`` at a time."""
        reader = self.reader()
        try:
            left = self.rows
            while left > 0:
                take = min(rows, left)
                yield reader.read(take)
                left -= take
        finally:
            reader.close()

    def remove(self) -> None:
        self.close()
        for end in ("src", "dst"):
            os.remove(f"{self.prefix}.{end}")


class EdgeReader:
    """Reads an :class:`EdgeFile` front to back, any number of pairs at a time."""

    def __init__(self, edges: EdgeFile) -> None:
        self.dtype = edges.dtype
        self._in = (open(f"{edges.prefix}.src", "rb"), open(f"{edges.prefix}.dst", "rb"))  # noqa: SIM115 (closed by close())

    def read(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        src = np.fromfile(self._in[0], dtype=self.dtype, count=rows)
        dst = np.fromfile(self._in[1], dtype=self.dtype, count=rows)
        if len(src) != rows or len(dst) != rows:
            raise OSError(f"scratch file {self._in[0].name} ended early (was it removed?)")
        return src, dst

    def close(self) -> None:
        for f in self._in:
            f.close()


class BucketSpill:
    """``buckets`` Arrow IPC streams of ``schema`` rows under ``folder``."""

    def __init__(self, folder: str, schema: pa.Schema, buckets: int) -> None:
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        self.schema = schema
        self.buckets = buckets
        self._writers: dict[int, Any] = {}

    def _path(self, k: int) -> str:
        return f"{self.folder}/{k}.arrows"

    def write(self, batch: pa.RecordBatch, bucket: np.ndarray) -> None:
        """Append each row of ``batch`` to its bucket's stream, keeping the rows' order."""
        if not batch.num_rows:
            return
        order = np.argsort(bucket, kind="stable")
        starts = np.searchsorted(bucket[order], np.arange(self.buckets + 1))
        ordered = batch.take(pa.array(order))
        for k in np.flatnonzero(np.diff(starts)).tolist():
            self._writer(k).write_batch(ordered.slice(int(starts[k]), int(starts[k + 1] - starts[k])))

    def _writer(self, k: int) -> Any:
        if k not in self._writers:
            self._writers[k] = pa.ipc.new_stream(pa.OSFile(self._path(k), "wb"), self.schema, options=_IPC)
        return self._writers[k]

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()

    def read(self, k: int) -> Iterator[pa.RecordBatch]:
        """Bucket ``k``'s rows in the order they were written (none if it got none)."""
        if k not in self._writers:
            return
        with pa.OSFile(self._path(k), "rb") as f:
            yield from pa.ipc.open_stream(f)

    def remove(self, k: int) -> None:
        if self._writers.pop(k, None) is not None:
            os.remove(self._path(k))


def write_parquet(fs: Any, path: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> int:
    """Write ``batches`` to one Parquet file in ``ROW_GROUP``-row row groups; return the rows."""
    rows = 0
    pending: list[pa.RecordBatch] = []
    held = 0
    with pq.ParquetWriter(path, schema, filesystem=fs, **layout.parquet_options(schema)) as writer:
        for batch in batches:
            pending.append(batch)
            held += batch.num_rows
            while held >= ROW_GROUP:
                table = pa.Table.from_batches(pending, schema)
                writer.write_table(table.slice(0, ROW_GROUP).combine_chunks(), row_group_size=ROW_GROUP)
                rest = table.slice(ROW_GROUP)
                pending, held = rest.to_batches(), rest.num_rows
                rows += ROW_GROUP
        if held or not rows:  # an empty file holds one empty row group, as pq.write_table writes it
            writer.write_table(pa.Table.from_batches(pending, schema).combine_chunks(), row_group_size=ROW_GROUP)
            rows += held
    return rows


class TooManyValues(Exception):
    """More distinct values than a :class:`DistinctRuns` limit allows."""


class DistinctRuns:
    """The sorted distinct integers of chunks added one by one.

    Runs are kept in decreasing size; a new run is merged with the last one
    while that is not more than twice as large, so every value takes part in
    O(log(chunks)) merges and the runs together hold little more than the
    distinct values seen. ``limit``: raise :class:`TooManyValues` as soon as
    there are more distinct values than that.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.runs: list[np.ndarray] = []
        self.limit = limit

    def add(self, values: np.ndarray) -> None:
        self.runs.append(sorted_distinct(np.sort(values)))
        while len(self.runs) > 1 and len(self.runs[-2]) <= 2 * len(self.runs[-1]):
            self._merge_last()
        if self.limit is not None and sum(len(r) for r in self.runs) > self.limit:
            self._check_limit()

    def _check_limit(self) -> None:
        while len(self.runs) > 1:  # the runs may overlap: merge them to know
            self._merge_last()
        if self.limit is not None and len(self.runs[0]) > self.limit:
            raise TooManyValues(len(self.runs[0]))

    def _merge_last(self) -> None:
        b, a = self.runs.pop(), self.runs.pop()
        self.runs.append(merge_distinct(a, b))

    def result(self, dtype: np.dtype[Any]) -> np.ndarray:
        while len(self.runs) > 1:
            self._merge_last()
        return self.runs.pop() if self.runs else np.zeros(0, dtype=dtype)


def merge_distinct(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted distinct values of two sorted distinct arrays."""
    both = np.concatenate([a, b])
    both.sort(kind="stable")  # timsort: finds the two runs and merges them in one pass
    return sorted_distinct(both)


def sorted_distinct(ordered: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array. (``np.unique`` without
    ``return_inverse`` hashes in NumPy >= 2.3: over 10x slower on ids.)"""
    keep = np.empty(len(ordered), dtype=bool)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
