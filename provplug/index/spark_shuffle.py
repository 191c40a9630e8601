"""A shuffle of Arrow tables through Spark, as a few binary rows.

A task that must send rows to the task owning some key computes the owner
itself and yields, for each owner, the rows as an Arrow IPC stream in one
binary column (:data:`BLOB_DDL`); Spark shuffles those few large rows on the
owner's key and the receiving task reads the streams back into one table.
Spark's own shuffle, disks and retries, but no row-by-row conversion of
millions of rows from Arrow and back on either side.

Owner keys: ``repartition(n, "p")`` sends a row to partition
``pmod(hash(p), n)``; :func:`owner_keys` finds one ``p`` per partition, so
the tasks address partitions, not hash buckets that may collide.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

BLOB_DDL = "p int, blob binary"
BLOB_SCHEMA = pa.schema([("p", pa.int32()), ("blob", pa.binary())])
# Rows per stream: streams stay far below Arrow's 2 GiB binary limit.
BLOB_ROWS = 1 << 20


def owner_keys(spark: SparkSession, partitions: int) -> list[int]:
    """``keys[j]``: a value of ``p`` that ``repartition(partitions, "p")`` sends to partition ``j``
    (Spark's hash is fixed, so the answer is kept for the process)."""
    if partitions not in _KEYS:
        _KEYS[partitions] = _find_owner_keys(spark, partitions)
    return _KEYS[partitions]


_KEYS: dict[int, list[int]] = {}


def _find_owner_keys(spark: SparkSession, partitions: int) -> list[int]:
    probe = spark.range(partitions * 64).select(
        F.col("id").cast("int").alias("p"), F.expr(f"pmod(hash(cast(id as int)), {partitions})").alias("j")
    )
    found = {int(r["j"]): int(r["p"]) for r in probe.groupBy("j").agg(F.min("p").alias("p")).collect()}
    if len(found) < partitions:  # pragma: no cover - murmur3 covers every residue of a few hundred ints
        raise RuntimeError(f"no shuffle key found for some of {partitions} partitions")
    return [found[j] for j in range(partitions)]


def spread(key: np.ndarray, partitions: int) -> NDArray[np.integer[Any]]:
    """The owner partition of each key (a multiplicative hash: ids that share
    low bits still spread evenly)."""
    mixed = np.asarray(key, dtype=np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    owner = (mixed >> np.uint64(32)) % np.uint64(partitions)
    # 16-bit owners: NumPy's stable sort of them (in :func:`send`) is a radix sort.
    return cast("NDArray[np.integer[Any]]", owner.astype(np.uint16 if partitions <= 1 << 16 else np.int64))


def send(table: pa.Table, owner: np.ndarray, keys: list[int]) -> Iterator[pa.RecordBatch]:
    """``table``'s rows to their ``owner`` partitions, as :data:`BLOB_DDL` rows."""
    order = np.argsort(owner, kind="stable")
    starts = np.searchsorted(owner[order], np.arange(len(keys) + 1))
    ordered = table.take(order)
    for j in np.flatnonzero(np.diff(starts)):
        for lo in range(int(starts[j]), int(starts[j + 1]), BLOB_ROWS):
            part = ordered.slice(lo, min(BLOB_ROWS, int(starts[j + 1]) - lo))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, part.schema) as writer:
                writer.write_table(part)
            yield pa.RecordBatch.from_arrays(
                [pa.array([keys[j]], pa.int32()), _one_blob(sink.getvalue())], schema=BLOB_SCHEMA
            )


def _one_blob(data: pa.Buffer) -> pa.Array:
    """A binary array of one element over ``data`` (no copy)."""
    offsets = pa.py_buffer(np.array([0, data.size], dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, data])


def receive(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    """Every table sent to this task, as one (None when nothing was)."""
    parts = [pa.ipc.open_stream(blob.as_buffer()).read_all() for batch in batches for blob in batch.column("blob")]
    parts = [p for p in parts if p.num_rows]
    return pa.concat_tables(parts).combine_chunks() if parts else None


def shuffled(frame: DataFrame, partitions: int) -> DataFrame:
    """``frame`` (:data:`BLOB_DDL` rows) moved to the partitions its ``p`` names."""
    return frame.repartition(partitions, "p")
