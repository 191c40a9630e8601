"""Production mode: the pipeline ran on every row; keep only the triples on
paths from the kept source rows.

* :func:`kept_row_numbers` (Spark): the row numbers of a staged source
  table's kept rows, selected beside its stored rows.
* :func:`filter_triples` (pyarrow + NumPy, batch by batch, never Python
  objects per triple): the forward closure from the kept source cells, op
  by op in the order the ops were recorded (each op's inputs precede it): a
  triple is kept when its ``src`` is a cell of a kept row of a reduced
  source, any cell of a source that is not reduced, or a cell a kept triple
  of an earlier op leads to; the staged triple files are rewritten with the
  kept triples only.

Kept sets: a reduced source's kept rows and every output's reached cells
are sorted ``int64`` arrays (8 bytes per kept row or reached output cell).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from provplug import ids, schema, sortedints
from provplug.plugin.writers import TRIPLE_ENCODING, Destination

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from provplug.model import OpInfo
    from provplug.plugin.reductions import Reduction

ROW_MASK = ids.MAX_ROWS - 1
BATCH_ROWS = 1 << 22


def stored_rows_frame(spark: SparkSession, rows: Destination) -> DataFrame:
    """A staged table's stored rows with their row numbers (``ROW_COLUMN``),
    in either layout (see :mod:`provplug.schema`)."""
    from pyspark.sql import functions as F

    positional = any(schema.positional_offset(f) is not None for f in rows.files(schema.POSITIONAL_PREFIX))
    frame = spark.read.parquet(rows.spark_path)
    if not positional:
        return frame
    start = len(schema.POSITIONAL_PREFIX) + 1
    number = F.expr(f"CAST(substring(_metadata.file_name, {start}, 12) AS BIGINT) + _metadata.row_index")
    return frame.withColumn(schema.ROW_COLUMN, number)


def kept_row_numbers(
    spark: SparkSession, rows: Destination, columns: Sequence[str], reduction: Reduction
) -> np.ndarray:
    """The sorted row numbers of the rows ``reduction`` keeps of a staged table."""
    kept = reduction.select(stored_rows_frame(spark, rows), columns).select(schema.ROW_COLUMN)
    numbers = kept.toArrow().column(0).to_numpy(zero_copy_only=False)
    return sortedints.unique(numbers.astype(np.int64, copy=False))


def _isin_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    pos = np.searchsorted(sorted_set, values)
    pos[pos == len(sorted_set)] = 0
    return np.asarray(sorted_set[pos] == values)


class _Closure:
    """What is kept so far: reduced sources' kept rows, whole sources, reached output cells."""

    def __init__(self, kept_rows: Mapping[int, np.ndarray], sources: set[int]) -> None:
        self.kept_rows = kept_rows
        self.whole = sources - set(kept_rows)
        self.reached: dict[int, np.ndarray] = {}

    def keeps(self, src: np.ndarray, src_table: np.ndarray) -> np.ndarray:
        keep = np.zeros(len(src), dtype=bool)
        for table in np.unique(src_table).tolist():
            at = src_table == table
            if table in self.kept_rows:
                keep[at] = _isin_sorted(src[at] & ROW_MASK, self.kept_rows[table])
            elif table in self.whole:
                keep[at] = True
            else:
                keep[at] = _isin_sorted(src[at], self.reached.get(table, np.empty(0, np.int64)))
        return keep

    def reach(self, dst: np.ndarray, dst_table: np.ndarray) -> None:
        for table in np.unique(dst_table).tolist():
            cells = dst[dst_table == table]
            before = self.reached.get(table)
            self.reached[table] = sortedints.unique(cells if before is None else np.concatenate([before, cells]))


def _ops_in(files: Sequence[str], fs: Any) -> dict[str, set[int]]:
    """The op ids each triple file holds (its ``op`` column only)."""
    found = {}
    for f in files:
        ops = pq.read_table(f, columns=["op"], filesystem=fs).column("op")
        found[f] = set(pc.unique(ops).to_pylist())
    return found


def filter_triples(
    triples: Destination, ops: Sequence[OpInfo], kept_rows: Mapping[int, np.ndarray], sources: set[int]
) -> dict[int, int]:
    """Keep only the staged triples on paths from kept source cells (see the
    module docstring); return the kept triples per op id."""
    fs = triples.filesystem()
    files = [f for f in triples.files() if f.endswith(".parquet")]
    holds = _ops_in(files, fs)
    closure = _Closure(kept_rows, sources)
    masks = {f: np.zeros(pq.ParquetFile(f, filesystem=fs).metadata.num_rows, dtype=bool) for f in files}
    counts: dict[int, int] = {}
    for op in ops:
        reached: list[tuple[np.ndarray, np.ndarray]] = []
        counts[op.op_id] = 0
        for f in (f for f in files if op.op_id in holds[f]):
            start = 0
            for batch in pq.ParquetFile(f, filesystem=fs).iter_batches(
                BATCH_ROWS, columns=["src", "dst", "op", "src_table", "dst_table"]
            ):
                column = {name: batch.column(name).to_numpy(zero_copy_only=False) for name in batch.schema.names}
                keep = (column["op"] == op.op_id) & closure.keeps(column["src"], column["src_table"])
                masks[f][start : start + batch.num_rows] |= keep
                reached.append((column["dst"][keep], column["dst_table"][keep]))
                counts[op.op_id] += int(keep.sum())
                start += batch.num_rows
        if reached:  # an op's own triples never lead into each other: reach after the op
            closure.reach(np.concatenate([r[0] for r in reached]), np.concatenate([r[1] for r in reached]))
    for f, mask in masks.items():
        _rewrite(f, mask, fs)
    return counts


def _rewrite(path: str, mask: np.ndarray, fs: Any) -> None:
    """Rewrite triple file ``path`` with the rows ``mask`` keeps (remove it when none)."""
    if mask.all():
        return
    if not mask.any():
        fs.delete_file(path)
        return
    kept = pq.read_table(path, filesystem=fs, schema=schema.TRIPLES).filter(pa.array(mask))
    pq.write_table(kept, path, filesystem=fs, **TRIPLE_ENCODING)
