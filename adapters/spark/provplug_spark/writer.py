"""Writing a step's stored rows and triples from inside Spark tasks.

One Spark job per output: ``mapInArrow`` hands each task its rows as Arrow
batches and the task writes, with pyarrow, straight into the run's staging
directory:

* ``rows/<table>/`` — the output's columns and its row numbers (a
  row-aligned output keeps its input rows' numbers and writes no triples:
  the task reports the runs of numbers it used, :mod:`.aligned`);
* ``triples/`` — the triples its row-number columns expand to: a
  :class:`Cell` says which input columns' ids each output column gets from
  which row-number column (NumPy does the expansion);
* ``rowlineage/`` — the output rows' members (:mod:`provplug.ingest.rowlineage`),
  from the member columns the rewrite carried (:mod:`.rowlineage`);
* the run's scratch directory ``keys/<table>/`` — row numbers beside the
  hidden group-join columns (and the rows' flat member columns), when an
  aggregate's provenance is deferred to a group join.
* the user's own Parquet files, for a plain local Parquet write
  (:mod:`.direct`): the same batches' data columns, into the target's
  staging folder.

The directories are :class:`~provplug.plugin.writers.Destination` objects the run
hands out (strings only: they pickle into the tasks, which open the store's
filesystem themselves), and the files are written by provplug's own writers
(:mod:`provplug.plugin.writers`).

Row numbers are given by the task that writes the rows, so the rows and the
triples of one task always agree, however Spark recomputes the plan. Files
are named after the partition AND the attempt, and each task returns the
names it wrote; the driver keeps exactly the files of the attempts Spark
used (:meth:`~provplug.plugin.writers.Destination.discard_files`), so a failed or
duplicate attempt leaves nothing.
Spark's own file committer (a job-commit rename per dataset, about 0.15 s
each) is not used: the run's staging directory is already committed
atomically as a whole.
"""

from __future__ import annotations

import base64
import dataclasses
import pickle
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray
from pyspark.sql import types as T

from provplug import ids, schema, sortedints
from provplug.errors import CaptureError
from provplug.plugin.writers import Destination, PartWriter, RowLineageWriter, RowsWriter, TripleWriter, WrittenFile

from .direct import DIRECT, DirectFiles, task_writer
from .rowlineage import MemberLayout, PairLayout, Slot
from .terms import Term

# Parquet options of row-lineage parts: op, tables and flags repeat
# (dictionary); output rows and member numbers grow within a part (delta).
ROW_LINEAGE_ENCODING: dict[str, Any] = {
    "use_dictionary": ["op", "out_table", "in_table", "optional"],
    "column_encoding": {
        "out_row": "DELTA_BINARY_PACKED",
        "member": "DELTA_BINARY_PACKED",
        "in_row": "DELTA_BINARY_PACKED",
    },
}
# Row numbers are (Spark partition << ROW_IN_PARTITION_BITS) | index in partition.
PARTITION_BITS = ids.PARTITION_BITS
ROW_IN_PARTITION_BITS = ids.ROW_IN_PARTITION_BITS
# A StructType, not DDL text: PySpark parses DDL in the JVM, a round trip per job.
RESULT_SCHEMA = T.StructType(
    [
        T.StructField("dataset", T.StringType()),
        T.StructField("path", T.StringType()),
        T.StructField("rows", T.LongType()),
    ]
)
# A batch's triples are made and written in chunks of at most this many
# (:func:`triple_chunks`); chunks of a large batch go in turn to two writers in
# two threads: Parquet's encoding, most of a large aggregate's writer task
# (TPC-H q1's 8.3M triples: 0.31 s in one thread, 0.16 s in two), runs outside the GIL.
TRIPLE_CHUNK = 1 << 21
# Result rows of an output's tasks: one per run of row numbers they gave
# (a row-aligned output's, or the task's own), the run's first number (as
# text) in ``path``, its length in ``rows``: the table's rows as runs.
RUNS = "runs"


@dataclasses.dataclass(frozen=True)
class Target:
    """Where one output's files go (picklable destinations), shipped to the tasks."""

    table_id: int
    op_id: int
    rows: Destination | None  # None: the job writes triples only
    triples: Destination
    keys: Destination | None = None  # row numbers beside hidden group-join columns
    lineage: Destination | None = None  # row-lineage records
    job: str = "rows"  # one writer job per (output, job): their files never share a prefix
    direct: DirectFiles | None = None  # the user's Parquet files, written from the same batches (:mod:`.direct`)

    @property
    def prefix(self) -> str:
        """Every file this job writes starts with it (see :meth:`Destination.discard_files`)."""
        return f"t{self.table_id}-{self.job}-"

    def stem(self, partition: int, attempt: int) -> str:
        """The stem of the parts one task attempt writes (``<stem>-<n>.parquet``)."""
        return f"{self.prefix}p{partition:05d}-a{attempt}"


@dataclasses.dataclass(frozen=True)
class Cell:
    """How the triples of output column ``column`` come from a batch's row-number columns."""

    column: int
    terms: tuple[Term, ...]
    # A term's array may hold one row number twice: keep each (src, dst) once. Terms of
    # one base (the same input column, through two row-number columns) are deduplicated
    # whatever this says; terms of different bases never yield one id.
    dedupe: bool


@dataclasses.dataclass(frozen=True)
class OutputLayout:
    """Which columns of the batches are data, provenance and hidden keys."""

    data: tuple[str, ...]
    cells: tuple[Cell, ...]  # per-row provenance of the output columns
    hidden: tuple[str, ...]  # written to the keys file (group joins' columns, flat member columns)
    members: MemberLayout | None = None  # None: no row lineage (sources, black boxes)
    numbered_by: str | None = None  # a row-aligned output: its rows keep this column's input row numbers


# A writer job's body (write_output or write_pairs with the job's arguments)
# travels as a local property of the job, not inside the Python function:
# one function, writer_task, serves every writer job, so its Python UDF is
# made once a session (PySpark's mapInArrow makes a new one a call, about
# 15 ms and 30 py4j round trips a job). Spark hands a job's local properties
# to each of its tasks, Python workers included.
TASK_PROPERTY = "provplug.writer.task"
TaskBody = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def task_property(body: TaskBody) -> str:
    """``body`` as the value of a writer job's TASK_PROPERTY."""
    from pyspark.serializers import CloudPickleSerializer

    return base64.b64encode(CloudPickleSerializer().dumps(body)).decode("ascii")


def writer_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of every writer job: the body its job carries in TASK_PROPERTY."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    encoded = None if ctx is None else ctx.getLocalProperty(TASK_PROPERTY)
    if encoded is None:
        raise CaptureError(f"provplug's writer ran without its job's {TASK_PROPERTY} property")
    body: TaskBody = pickle.loads(base64.b64decode(encoded))
    return body(batches)


def _task() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:  # pragma: no cover - only ever called inside a Spark task
        raise CaptureError("provplug's writer ran outside a Spark task")
    partition = ctx.partitionId()
    if partition >= 1 << PARTITION_BITS:
        raise CaptureError(f"provplug: more than {1 << PARTITION_BITS} partitions in one step output; coalesce it")
    return partition, ctx.attemptNumber()


def _result(written: Sequence[WrittenFile], runs: Sequence[tuple[int, int]] = ()) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([w.dataset for w in written] + [RUNS] * len(runs), pa.string()),
            pa.array([w.path for w in written] + [str(first) for first, _ in runs], pa.string()),
            pa.array([w.rows for w in written] + [count for _, count in runs], pa.int64()),
        ],
        names=["dataset", "path", "rows"],
    )


def _add_runs(runs: list[tuple[int, int]], numbers: np.ndarray) -> None:
    """Append the runs of consecutive ``numbers`` (in their order) to ``runs``."""
    if not len(numbers):
        return
    starts = np.concatenate([[0], np.flatnonzero(np.diff(numbers) != 1) + 1])
    counts = np.diff(np.concatenate([starts, [len(numbers)]]))
    for first, count in zip(numbers[starts].tolist(), counts.tolist(), strict=True):
        _add_run(runs, first, count)


def _add_run(runs: list[tuple[int, int]], first: int, count: int) -> None:
    if runs and runs[-1][0] + runs[-1][1] == first:
        runs[-1] = (runs[-1][0], runs[-1][1] + count)
    else:
        runs.append((first, count))


def _aligned_rows(batch: pa.RecordBatch, column: str) -> NDArray[np.int64]:
    """The input row numbers numbering a row-aligned output's rows."""
    numbers = batch.column(column)
    if numbers.null_count:
        raise CaptureError("internal: a row-aligned output row without an input row number")
    return cast("NDArray[np.int64]", numbers.to_numpy(zero_copy_only=False).astype(np.int64, copy=False))


@dataclasses.dataclass(frozen=True)
class _Segment:
    """Triples ``src_base + numbers[i] -> dst_base + rows[parent[i]]`` of one
    (output column, input column) pair of a batch."""

    src_base: int
    numbers: np.ndarray
    dst_base: int
    parent: np.ndarray

    def fill(self, start: int, stop: int, rows: _Rows, src: np.ndarray, dst: np.ndarray) -> None:
        """Write triples ``start:stop`` of the segment into ``src`` and ``dst``
        (arrays of ``stop - start``): no temporary array."""
        np.add(self.numbers[start:stop], self.src_base, out=src)
        parent = self.parent[start:stop]
        if rows.first is not None:  # a task's own rows: rows[i] = rows[0] + i, no gather
            np.add(parent, np.int64(self.dst_base + rows.first), out=dst)
        else:
            np.take(rows.numbers, parent, out=dst)
            dst += self.dst_base


@dataclasses.dataclass(frozen=True)
class _Rows:
    """A batch's output row numbers; ``first`` is set when they are consecutive."""

    numbers: np.ndarray
    first: int | None

    @classmethod
    def of(cls, rows: np.ndarray) -> _Rows:
        consecutive = len(rows) > 0 and bool(np.all(np.diff(rows) == 1))
        return cls(rows, int(rows[0]) if consecutive else None)


def _segments(batch: pa.RecordBatch, cells: Sequence[Cell], table_id: int) -> list[_Segment]:
    """The triples of the cells of ``batch``'s rows, as segments: output column
    ``j`` of row ``i`` gets ``base + r`` for each term of its cell and each row
    number ``r`` the term's column holds in row ``i`` (nulls hold none)."""
    if batch.num_rows >= 1 << (63 - ids.ROW_BITS):  # the deduplication key packs (batch row, row number)
        raise CaptureError(
            f"provplug: an Arrow batch of {batch.num_rows} rows; lower spark.sql.execution.arrow.maxRecordsPerBatch"
        )
    expanded: dict[tuple[str, str | None], tuple[np.ndarray, np.ndarray]] = {}
    segments = []
    for cell in cells:
        out_base = ids.value_id(table_id, cell.column, 0)
        by_base: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        for term in cell.terms:
            read = (term.rows, term.field)
            if read not in expanded:
                expanded[read] = _row_numbers(batch.column(term.rows), term.scalar, term.field)
            by_base.setdefault(term.base, []).append(expanded[read])
        for base, parts in by_base.items():
            numbers, parent = (
                parts[0]
                if len(parts) == 1
                else (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
            )
            if cell.dedupe or len(parts) > 1:  # one id twice only from equal (batch row, row number): unique on both
                both = sortedints.unique((parent.astype(np.int64) << ids.ROW_BITS) | numbers)
                numbers, parent = both & (ids.MAX_ROWS - 1), both >> ids.ROW_BITS
            if len(numbers):
                segments.append(_Segment(base, numbers, out_base, parent))
    return segments


def triple_chunks(
    batch: pa.RecordBatch, rows: np.ndarray, cells: Sequence[Cell], table_id: int, limit: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(src, dst) of the cells of ``batch``'s rows (see :func:`_segments`;
    output row ``i`` is ``rows[i]``), in chunks of at most ``limit`` triples
    (default :data:`TRIPLE_CHUNK`).

    Why chunks: a fresh array of a few hundred MB costs more in page faults
    than its arithmetic (TPC-H q1's 8.3M triples: about 0.5 s in a task, 0.05 s
    in a process that already holds the memory); arrays of a chunk's size are
    served again from the memory the allocator keeps."""
    limit = limit or TRIPLE_CHUNK
    segments = _segments(batch, cells, table_id)
    numbered = _Rows.of(rows)
    pending: list[tuple[_Segment, int, int]] = []  # (segment, start, stop) of the chunk being gathered
    size = 0
    for segment in segments:
        start, length = 0, len(segment.numbers)
        while start < length:
            stop = min(length, start + limit - size)
            pending.append((segment, start, stop))
            size += stop - start
            start = stop
            if size == limit:
                yield _filled(pending, size, numbered)
                pending, size = [], 0
    if size:
        yield _filled(pending, size, numbered)


def _filled(pieces: Sequence[tuple[_Segment, int, int]], size: int, rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
    src, dst = np.empty(size, np.int64), np.empty(size, np.int64)
    at = 0
    for segment, start, stop in pieces:
        segment.fill(start, stop, rows, src[at : at + stop - start], dst[at : at + stop - start])
        at += stop - start
    return src, dst


def cell_pairs(
    batch: pa.RecordBatch, rows: np.ndarray, cells: Sequence[Cell], table_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of the cells of ``batch``'s rows, all at once (see :func:`triple_chunks`)."""
    chunks = list(triple_chunks(batch, rows, cells, table_id, limit=1 << 62))
    if not chunks:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return chunks[0]


def _row_numbers(column: pa.Array, scalar: bool, field: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(non-null row numbers, index of the batch row each came from) of a
    row-number column (``field``: of a list of structs, that field of each element)."""
    if scalar:
        valid = column.is_valid()
        return (
            column.filter(valid).to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
            np.flatnonzero(valid.to_numpy(zero_copy_only=False)),
        )
    flat = pc.list_flatten(column)
    if field is not None:
        flat = pc.struct_field(flat, field)
    valid = flat.is_valid()
    return (
        flat.filter(valid).to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
        pc.list_parent_indices(column).filter(valid).to_numpy(zero_copy_only=False),
    )


class _TaskTriples:
    """A task's triples, chunk by chunk: one writer, and once a chunk of
    :data:`TRIPLE_CHUNK` comes, a second one in a second thread (its own
    parts, so the two never share a file) that takes every other full chunk
    while this thread writes the next."""

    def __init__(self, destination: Destination, stem: str) -> None:
        self._writers = [TripleWriter(destination, stem)]
        self._pool: ThreadPoolExecutor | None = None
        self._second: Future[None] | None = None  # the chunk the second writer is writing

    def write(self, src: np.ndarray, dst: np.ndarray, op: int, table_id: int) -> None:
        if len(src) < TRIPLE_CHUNK or self._second is not None:
            self._writers[0].write(src, dst, op, dst_table=table_id)
            self._wait()
            return
        if self._pool is None:
            first = self._writers[0]
            self._writers.append(TripleWriter(first.destination, f"{first.stem}-h"))
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="provplug-triples")
        self._second = self._pool.submit(self._writers[1].write, src, dst, op, dst_table=table_id)

    def _wait(self) -> None:
        second, self._second = self._second, None
        if second is not None:
            second.result()  # its error is the task's

    def close(self) -> list[WrittenFile]:
        try:
            self._wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
        return [w for writer in self._writers for w in writer.close()]


def write_output(target: Target, layout: OutputLayout, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: number the task's rows, write rows, triples and keys."""
    partition, attempt = _task()
    stem = target.stem(partition, attempt)
    if target.rows is None:  # pragma: no cover - write_output always has rows to write
        raise CaptureError("provplug: an output written without a rows destination")
    rows_file = RowsWriter(target.rows, stem)
    triples_file = _TaskTriples(target.triples, stem)
    keys_file = PartWriter(target.keys, stem, dataset="keys") if target.keys is not None else None
    lineage_file = (
        RowLineageWriter(target.lineage, stem, **ROW_LINEAGE_ENCODING)
        if target.lineage is not None and layout.members
        else None
    )
    direct_file = task_writer(target.direct, partition, attempt) if target.direct is not None else None
    count = 0
    runs: list[tuple[int, int]] = []
    for batch in batches:
        if layout.numbered_by is not None:  # row-aligned: output row r is input row r
            rows = _aligned_rows(batch, layout.numbered_by)
            _add_runs(runs, rows)
        elif count + batch.num_rows > 1 << ROW_IN_PARTITION_BITS:
            raise CaptureError(
                f"provplug: more than {1 << ROW_IN_PARTITION_BITS} rows in one partition; repartition the output"
            )
        else:
            rows = np.arange(count, count + batch.num_rows, dtype=np.int64) | (partition << ROW_IN_PARTITION_BITS)
            if batch.num_rows:  # consecutive numbers: one run, continued batch after batch
                _add_run(runs, int(rows[0]), batch.num_rows)
        count += batch.num_rows
        data = pa.Table.from_arrays([batch.column(c) for c in layout.data], names=list(layout.data))
        rows_file.write(data, rows)
        if direct_file is not None:
            direct_file.write(data)
        for src, dst in triple_chunks(batch, rows, layout.cells, target.table_id):
            triples_file.write(src, dst, target.op_id, target.table_id)
        if lineage_file is not None and layout.members is not None:
            lineage_file.write(target.op_id, target.table_id, *member_records(batch, rows, layout.members))
        if keys_file is not None:
            keys_file.write_table(
                pa.Table.from_arrays(
                    [pa.array(rows, pa.int64())] + [batch.column(h) for h in layout.hidden],
                    names=[schema.ROW_COLUMN, *layout.hidden],
                )
            )
    written = (
        rows_file.close()
        + triples_file.close()
        + (keys_file.close() if keys_file else [])
        + (lineage_file.close() if lineage_file else [])
        + ([WrittenFile(DIRECT, path, n) for path, n in direct_file.close()] if direct_file else [])
    )
    yield _result(written, runs)


def write_pairs(
    target: Target, cells: Sequence[Cell], pairs: PairLayout | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: write the triples of rows holding an output row
    number (ROW_COLUMN) and the row-number columns ``cells`` name; with
    ``pairs``, each row is one member of its output row: write its records."""
    partition, attempt = _task()
    stem = target.stem(partition, attempt)
    triples_file = TripleWriter(target.triples, stem)
    lineage_file = (
        RowLineageWriter(target.lineage, stem, **ROW_LINEAGE_ENCODING) if target.lineage is not None and pairs else None
    )
    members = _MemberNumbers(partition)
    for batch in batches:
        rows = batch.column(schema.ROW_COLUMN).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        for src, dst in triple_chunks(batch, rows, cells, target.table_id):
            triples_file.write(src, dst, target.op_id, dst_table=target.table_id)
        if lineage_file is not None and pairs is not None:
            lineage_file.write(target.op_id, target.table_id, *pair_records(batch, rows, members.next(rows), pairs))
    yield _result(triples_file.close() + (lineage_file.close() if lineage_file else []))


# -- row lineage ---------------------------------------------------------------------------------
Records = tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]  # out row, member, in table, in row, optional


def _records(parts: list[tuple[np.ndarray, np.ndarray, Slot, np.ndarray]]) -> Records:
    """Records from (out rows, members, slot, in rows) parts."""
    parts = [p for p in parts if len(p[0])]
    if len(parts) == 1 and len({p[2] for p in parts}) == 1:  # one table (and flag): broadcast them
        out, member, slot, numbers = parts[0]
        return out, member.astype(np.int32, copy=False), np.int32(slot.table_id), numbers, np.bool_(slot.optional)  # type: ignore[return-value]  # scalars broadcast
    if not parts:
        empty = np.empty(0, np.int64)
        return empty, empty.astype(np.int32), empty.astype(np.int32), empty, empty.astype(np.bool_)
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]).astype(np.int32, copy=False),
        np.concatenate([np.full(len(p[0]), p[2].table_id, np.int32) for p in parts]),
        np.concatenate([p[3] for p in parts]),
        np.concatenate([np.full(len(p[0]), p[2].optional) for p in parts]),
    )


def _valid(column: pa.Array, where: np.ndarray | None = None) -> tuple[np.ndarray | slice, np.ndarray]:
    """(positions among ``where`` (default: every row) whose row number is
    not null, those row numbers); ``slice(None)`` when none is null."""
    values = column.take(pa.array(where)) if where is not None else column
    if values.null_count == 0:
        return slice(None), values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    valid = np.flatnonzero(values.is_valid().to_numpy(zero_copy_only=False))
    numbers = values.filter(values.is_valid()).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return valid, numbers


def member_records(batch: pa.RecordBatch, rows: np.ndarray, layout: MemberLayout) -> Records:
    """The records of a batch's rows: each member's non-null slots; a row
    with a group has one member per element (its flat slots with each), a
    row without (or with a null or empty group) one member, its flat slots."""
    mine = np.ones(batch.num_rows, np.bool_)
    for marker in layout.markers:  # written by the group join
        mine &= batch.column(marker).is_null().to_numpy(zero_copy_only=False)
    parts: list[tuple[np.ndarray, np.ndarray, Slot, np.ndarray]] = []
    flat_only = mine
    if layout.group is not None:
        group = batch.column(layout.group)
        lengths = pc.fill_null(pc.list_value_length(group), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        flat_only = mine & (lengths == 0)
        # Elements in row order (null lists have none): row i's are members 0..lengths[i]-1.
        parent = np.repeat(np.arange(batch.num_rows), lengths)
        member = np.arange(len(parent)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        elements = pc.list_flatten(group)
        if layout.markers:
            keep = mine[parent]
            elements, parent, member = elements.filter(pa.array(keep)), parent[keep], member[keep]
        for slot in layout.grouped:
            values = elements if len(layout.grouped) == 1 else elements.field(slot.column)
            valid, numbers = _valid(values)
            parts.append((rows[parent[valid]], member[valid], slot, numbers))
        for slot in layout.flat:
            valid, numbers = _valid(batch.column(slot.column), parent)
            parts.append((rows[parent[valid]], member[valid], slot, numbers))
    where = np.flatnonzero(flat_only)
    for slot in layout.flat:
        valid, numbers = _valid(batch.column(slot.column), where if len(where) != batch.num_rows else None)
        out = rows[where[valid]]
        parts.append((out, np.zeros(len(out), np.int32), slot, numbers))
    return _records(parts)


class _MemberNumbers:
    """Member numbers of a group join's rows, unique per output row across
    the job's tasks: (n-th member of that row in this task) << partition
    bits | partition."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.seen: dict[int, int] = {}

    def next(self, rows: np.ndarray) -> np.ndarray:
        unique, inverse = np.unique(rows, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        sorted_groups = inverse[order]
        rank = np.empty(len(rows), np.int64)
        rank[order] = np.arange(len(rows)) - np.searchsorted(sorted_groups, sorted_groups, side="left")
        base = np.array([self.seen.get(int(u), 0) for u in unique], np.int64)
        counts = np.bincount(inverse, minlength=len(unique))
        for u, b, c in zip(unique.tolist(), base.tolist(), counts.tolist(), strict=True):
            self.seen[u] = b + c
        numbers = base[inverse] + rank
        if len(numbers) and int(numbers.max()) >= 1 << (31 - PARTITION_BITS):
            raise CaptureError(
                f"provplug: more than {1 << (31 - PARTITION_BITS)} members of one output row in one "
                "partition of a group join; repartition the aggregate's input"
            )
        return (numbers << PARTITION_BITS) | self.partition


def pair_records(batch: pa.RecordBatch, rows: np.ndarray, members: np.ndarray, layout: PairLayout) -> Records:
    """The records of a group join's rows: each row is member ``members[i]``
    of output row ``rows[i]``: its child row and the output row's flat slots."""
    parts: list[tuple[np.ndarray, np.ndarray, Slot, np.ndarray]] = []
    for slot in (layout.member, *layout.flat):
        valid, numbers = _valid(batch.column(slot.column))
        parts.append((rows[valid], members[valid], slot, numbers))
    return _records(parts)
