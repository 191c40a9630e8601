"""Location edges: one step output's triples, stored as rates and a column map.

A :class:`LocationEdge` says, for one op, one input table and one output
table: output position ``k`` comes from the input positions of the firing
that produced it (:class:`Rates`), and output column ``c`` from the input
columns ``columns[c]``. It stands for exactly the triples

    (value_id(src_table, i, src_row(j)), value_id(dst_table, c, dst_row(k)), op)

for every output position ``k``, input position ``j`` of its window, output
column ``c`` and input column ``i`` of ``columns[c]``; :func:`expand` produces
them. Positions map to row numbers through :class:`RowRuns`; an *aligned*
edge (rates 1:1, no buffer: a select, a withColumn, a scalar UDF) has no
input runs at all, because output row ``r`` comes from input row ``r``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from provplug import ids, schema
from provplug.errors import LocationError
from provplug.location.rates import Rates
from provplug.location.rows import RowRuns
from provplug.location.workflow_model import Actor, Consumption, Production, Workflow, workflow

# Triples per record batch :func:`expand` yields, at most.
CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class LocationEdge:
    """The triples of one (op, input table, output table), as positions (build with :func:`location_edge`)."""

    op: int
    src_table: int
    dst_table: int
    columns: tuple[tuple[int, tuple[int, ...]], ...]  # (output column, its input columns), sorted
    dst_rows: RowRuns
    src_rows: RowRuns | None = None  # None: aligned, output row r comes from input row r
    rates: Rates = field(default_factory=Rates)

    def __post_init__(self) -> None:
        ids.table_base(self.src_table)
        ids.table_base(self.dst_table)
        outputs = [c for c, _ in self.columns]
        if len(set(outputs)) != len(outputs):
            raise LocationError(f"op {self.op}: an output column appears twice in the column map")
        for out, sources in self.columns:
            ids.column_offset(out)
            for source in sources:
                ids.column_offset(source)
            if not sources or len(set(sources)) != len(sources):
                raise LocationError(f"op {self.op}: output column {out} needs distinct input columns")
        if self.src_rows is None:
            if not self.rates.aligned:
                raise LocationError(f"op {self.op}: an edge without input rows must have 1:1 rates and no buffer")
        else:
            check_sizes(self.rates, self.src_rows.size, self.dst_rows.size, f"op {self.op}")

    @property
    def input_rows(self) -> RowRuns:
        return self.dst_rows if self.src_rows is None else self.src_rows

    @property
    def column_pairs(self) -> list[tuple[int, int]]:
        """(output column, input column) for every arrow of the column map."""
        return [(out, source) for out, sources in self.columns for source in sources]

    @property
    def triple_count(self) -> int:
        """How many triples the edge stands for."""
        firings = self.dst_rows.size // self.rates.production
        return self.rates.used(firings) * self.rates.production * len(self.column_pairs)


def location_edge(
    op: int,
    src_table: int,
    dst_table: int,
    columns: Mapping[int, Sequence[int]],
    dst_rows: RowRuns,
    src_rows: RowRuns | None = None,
    rates: Rates | None = None,
) -> LocationEdge:
    """A checked edge; output columns mapped to no input column are left out (they have no triples)."""
    normal = tuple(sorted((int(out), tuple(int(s) for s in sources)) for out, sources in columns.items() if sources))
    return LocationEdge(op, src_table, dst_table, normal, dst_rows, src_rows, rates or Rates())


def check_sizes(rates: Rates, inputs: int, outputs: int, what: str) -> None:
    """An output of ``outputs`` tokens is whole firings, fed by at most ``inputs`` tokens."""
    firings, partial = divmod(outputs, rates.production)
    if partial or firings * rates.consumption > inputs:
        raise LocationError(f"{what}: {rates.describe()} cannot turn {inputs} input rows into {outputs} output rows")


def row_pairs(
    rates: Rates, src: RowRuns, dst: RowRuns, limit: int, first: int = 1, last: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(input row, output row) of every position output positions
    ``first..last`` (default: all) depend on, in output position order, at
    most ``limit`` pairs at a time."""
    k = first
    stop = dst.size if last is None else last
    while k <= stop:
        low_k, high_k = rates.window((k - 1) // rates.production + 1)
        block = np.arange(k, min(stop, k + max(1, limit // (high_k - low_k + 1)) - 1) + 1, dtype=np.int64)
        low, high = rates.windows((block - 1) // rates.production + 1)
        widths = high - low + 1
        ends = np.cumsum(widths)
        take = max(1, int(np.searchsorted(ends, limit, side="right")))
        block, low, widths, ends = block[:take], low[:take], widths[:take], ends[:take]
        total = int(ends[-1])
        dst_pos = np.repeat(block, widths)
        src_pos = np.repeat(low - (ends - widths), widths) + np.arange(total, dtype=np.int64)
        for at in range(0, total, limit):  # one position alone can exceed the limit (dynamic buffering)
            yield src.rows_at(src_pos[at : at + limit]), dst.rows_at(dst_pos[at : at + limit])
        k += take


def edge_row_pairs(
    edge: LocationEdge, limit: int, first: int = 1, last: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """:func:`row_pairs` of an edge (aligned edges read their runs directly)."""
    if edge.src_rows is not None:
        yield from row_pairs(edge.rates, edge.src_rows, edge.dst_rows, limit, first, last)
    elif first == 1 and last in (None, edge.dst_rows.size):
        for rows in edge.dst_rows.chunks(limit):
            yield rows, rows
    else:
        stop = edge.dst_rows.size if last is None else last
        for at in range(first, stop + 1, limit):
            rows = edge.dst_rows.rows_at(np.arange(at, min(stop, at + limit - 1) + 1, dtype=np.int64))
            yield rows, rows


def expand(edges: Iterable[LocationEdge], chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
    """The triples ``edges`` stand for, as record batches of
    :data:`provplug.schema.TRIPLES` of at most ``chunk_rows`` rows each."""
    for edge in edges:
        yield from expand_positions(edge, 1, edge.dst_rows.size, chunk_rows)


def expand_positions(
    edge: LocationEdge, first: int, last: int, chunk_rows: int = CHUNK_ROWS, columns: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The triples of ``edge`` into its output positions ``first..last``
    (1-based, inclusive): a slice of :func:`expand`, so the slices of a
    partition of ``1..size`` together give exactly the edge's triples.
    ``columns``: only these columns of the triple schema (default: all)."""
    wanted = schema.TRIPLES if columns is None else pa.schema([schema.TRIPLES.field(c) for c in columns])
    pairs = edge.column_pairs
    if not pairs or first > last:
        return
    src_bases = np.array([ids.value_id(edge.src_table, s, 0) for _, s in pairs], dtype=np.int64)
    dst_bases = np.array([ids.value_id(edge.dst_table, o, 0) for o, _ in pairs], dtype=np.int64)
    for src_rows, dst_rows in edge_row_pairs(edge, max(1, chunk_rows // len(pairs)), first, last):
        src = (src_bases[:, None] + src_rows[None, :]).ravel()
        dst = (dst_bases[:, None] + dst_rows[None, :]).ravel()
        for at in range(0, len(src), chunk_rows):
            yield _batch(src[at : at + chunk_rows], dst[at : at + chunk_rows], edge, wanted)


def triples_per_position(edge: LocationEdge) -> int:
    """The most triples one output position of ``edge`` stands for."""
    rates = edge.rates
    low, high = rates.window(max(1, edge.dst_rows.size // rates.production))  # windows only grow
    return max(1, (high - low + 1) * len(edge.column_pairs))


def _batch(src: np.ndarray, dst: np.ndarray, edge: LocationEdge, wanted: pa.Schema) -> pa.RecordBatch:
    n = len(src)
    columns = {
        "src": lambda: pa.array(src, pa.int64()),
        "dst": lambda: pa.array(dst, pa.int64()),
        "op": lambda: pa.array(np.full(n, edge.op, np.int64), pa.int64()),
        "src_table": lambda: pa.array(np.full(n, edge.src_table, np.int32), pa.int32()),
        "dst_table": lambda: pa.array(np.full(n, edge.dst_table, np.int32), pa.int32()),
    }
    return pa.RecordBatch.from_arrays([columns[name]() for name in wanted.names], schema=wanted)


def workflow_of(edges: Iterable[LocationEdge]) -> Workflow:
    """004's workflow graph of ``edges``: tables (named by their id) as
    containers, ops as actors. An op's edges must agree, as one SDF actor's
    do: each input read at one rate, each output written at one rate, and
    every output fed by every input."""
    by_op: dict[int, list[LocationEdge]] = {}
    for edge in edges:
        by_op.setdefault(edge.op, []).append(edge)
    return workflow(_actor(op, group) for op, group in sorted(by_op.items()))


def _actor(op: int, edges: Sequence[LocationEdge]) -> Actor:
    inputs: dict[int, Consumption] = {}
    outputs: dict[int, Production] = {}
    for edge in edges:
        r = edge.rates
        source = inputs.setdefault(edge.src_table, Consumption(str(edge.src_table), r.consumption, r.buffer, r.dynamic))
        target = outputs.setdefault(edge.dst_table, Production(str(edge.dst_table), r.production))
        if source != Consumption(source.container, r.consumption, r.buffer, r.dynamic) or target.rate != r.production:
            raise LocationError(f"op {op}: its edges give one table two different rates")
    if len({(e.src_table, e.dst_table) for e in edges}) != len(inputs) * len(outputs):
        raise LocationError(f"op {op}: not every output of the op has an edge from every input")
    return Actor(f"op {op}", tuple(inputs.values()), tuple(outputs.values()))
