"""Turning a traced PCollection into a table of the store, inside the pipeline.

``Materialize`` numbers the rows, derives the columns (and their Arrow types)
from the elements, writes the rows and the triples through the run's writers
(:class:`provplug.plugin.writers.RowsWriter`, :class:`provplug.plugin.writers.TripleWriter`
on the destinations the run handed out), writes a small summary (row and
triple counts, columns) into the run's scratch directory for the driver, and
returns the elements *rebased* on the new table: each attribute's provenance
becomes the id of its own cell, so later steps link to this table.

A source given in memory is laid out and written on the driver instead
(:func:`layout_in_memory`, :func:`write_in_memory`), with the same code.

Row numbers are deterministic: a source given as a list keeps its order; any
other PCollection is ordered by content (hash bucket, then a canonical
rendering of each element), so re-running the same pipeline on the same data
numbers it the same way.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics.metric import Lineage
from apache_beam.typehints import typehints

from provplug import ids
from provplug.errors import CaptureError
from provplug.plugin.writers import Destination, RowLineageWriter, RowsWriter, TripleWriter

from .elements import Prov, Traced, bucket, cells, element_key, per_attribute
from .rowstate import member_rows, split_rows

Numbered = tuple[int, Any, "Prov | None"]
Layout = tuple[tuple[str, ...], pa.Schema]
BUCKETS = 16
FLUSH_ROWS = 100_000


@dataclasses.dataclass(frozen=True)
class TableTarget:
    """Where one table's files go (picklable: shipped to the workers).

    ``rows`` is None when the run keeps no rows; ``triples`` and
    ``lineage`` (row lineage) are None for a source (no op). ``summary`` is
    the run's scratch directory.
    """

    table_id: int
    name: str
    op_id: int | None
    rows: Destination | None
    triples: Destination | None
    summary: Destination
    lineage: Destination | None = None

    @property
    def summary_name(self) -> str:
        return summary_name(self.table_id)


def summary_name(table_id: int) -> str:
    return f"table-{table_id}.json"


# -- numbering -------------------------------------------------------------------
class NumberByContent(beam.PTransform[Any, Any]):
    """``(value, prov)`` -> ``(row, value, prov)`` with rows 0..n-1 in content order."""

    def expand(self, traced: Any) -> Any:
        grouped = traced | "Key" >> beam.Map(_keyed) | "Group" >> beam.GroupByKey()
        sizes = grouped | "Sizes" >> beam.Map(_bucket_size)  # one element per bucket
        return grouped | "Number" >> beam.FlatMap(_number_bucket, beam.pvalue.AsDict(sizes))


def _bucket_size(group: tuple[int, Iterable[Any]]) -> tuple[int, int]:
    b, items = group
    return b, sum(1 for _ in items)


def _keyed(element: Traced) -> tuple[int, tuple[str, Traced]]:
    key = element_key(element)
    return bucket(key, BUCKETS), (key, element)


def _number_bucket(group: tuple[int, Iterable[tuple[str, Traced]]], sizes: dict[int, int]) -> Iterator[Numbered]:
    b, items = group
    offset = sum(n for other, n in sizes.items() if other < b)
    for i, (_, (value, prov)) in enumerate(sorted(items, key=lambda item: item[0])):
        yield offset + i, value, prov


# -- columns and types -----------------------------------------------------------
_SCALARS = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string(), bytes: pa.binary()}


def plain_cell(cell: Any) -> Any:
    """Rows and named tuples as dicts, iterables as lists: what Arrow stores."""
    if cell is None or type(cell) in _SCALARS:
        return cell
    from .elements import is_named, named_cells

    if is_named(cell):
        return {k: plain_cell(v) for k, v in named_cells(cell).items()}
    if isinstance(cell, (list, tuple, set, frozenset)) or (
        hasattr(cell, "__iter__") and not isinstance(cell, (str, bytes, dict))
    ):
        return [plain_cell(v) for v in cell]
    return cell


def arrow_type(cell: Any) -> pa.DataType:
    if cell is None:
        return pa.null()
    fast = _SCALARS.get(type(cell))
    if fast is not None:
        return fast
    try:
        return pa.scalar(plain_cell(cell)).type
    except (pa.ArrowException, TypeError, ValueError):
        return pa.string()  # stored as its str()


class LayoutFn(beam.CombineFn):
    """Columns in order of first appearance (by row, then position) and their
    Arrow types, unified across all elements."""

    def create_accumulator(self) -> dict[str, list[Any]]:
        return {}

    def add_input(self, acc: dict[str, list[Any]], element: Numbered) -> dict[str, list[Any]]:
        row, value, _ = element
        self.add_cells(acc, row, cells(value))
        return acc

    @staticmethod
    def add_cells(acc: dict[str, list[Any]], row: int, row_cells: dict[str, Any]) -> None:
        for pos, (attr, cell) in enumerate(row_cells.items()):
            entry = acc.get(attr)
            kind = arrow_type(cell)
            if entry is None:
                acc[attr] = [(row, pos), {kind}]
            else:
                entry[0] = min(entry[0], (row, pos))
                entry[1].add(kind)

    def merge_accumulators(self, accs: Iterable[dict[str, list[Any]]]) -> dict[str, list[Any]]:
        merged: dict[str, list[Any]] = {}
        for acc in accs:
            for attr, (first, kinds) in acc.items():
                entry = merged.setdefault(attr, [first, set()])
                entry[0] = min(entry[0], first)
                entry[1] |= kinds
        return merged

    def extract_output(self, acc: dict[str, list[Any]]) -> Layout:
        columns = tuple(sorted(acc, key=lambda a: (acc[a][0], a)))
        if len(columns) > ids.MAX_COLUMNS:
            raise CaptureError(f"a table has {len(columns)} columns; at most {ids.MAX_COLUMNS} fit the id layout")
        return columns, pa.schema([pa.field(c, _unify(acc[c][1])) for c in columns])


Stats = tuple[Layout, int, int]  # layout, rows, triples


class TableStatsFn(beam.CombineFn):
    """A table's layout (:class:`LayoutFn`), rows and triples in one pass."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Beam's is unannotated (python/mypy#16653)
        self.layout = LayoutFn()

    def create_accumulator(self) -> list[Any]:
        return [self.layout.create_accumulator(), 0, 0]

    def add_input(self, acc: list[Any], element: Numbered) -> list[Any]:
        row, value, prov = element
        row_cells = cells(value)
        LayoutFn.add_cells(acc[0], row, row_cells)
        acc[1] += 1
        if isinstance(prov, tuple):
            acc[2] += len(prov) * len(row_cells)
        elif prov:
            acc[2] += sum(len(i) for i in prov.values())
        return acc

    def merge_accumulators(self, accs: Iterable[list[Any]]) -> list[Any]:
        accs = list(accs)
        return [self.layout.merge_accumulators(a[0] for a in accs), sum(a[1] for a in accs), sum(a[2] for a in accs)]

    def extract_output(self, acc: list[Any]) -> Stats:
        return self.layout.extract_output(acc[0]), acc[1], acc[2]


def _unify(kinds: set[pa.DataType]) -> pa.DataType:
    if len(kinds) == 1:
        return next(iter(kinds))
    try:
        merged = pa.unify_schemas([pa.schema([pa.field("c", k)]) for k in kinds], promote_options="permissive")
        return merged.field("c").type
    except (pa.ArrowException, TypeError):
        return pa.string()


# -- writing ---------------------------------------------------------------------
class WriteTable(beam.DoFn):
    """Writes the rows, the triples and the row lineage (each row's input
    rows, from the same ids: :func:`.rowstate.member_rows`) of each bundle
    through the run's writers (a new part every ``FLUSH_ROWS`` rows)."""

    def __init__(self, target: TableTarget) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Beam's is unannotated (python/mypy#16653)
        self.target = target

    def start_bundle(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.numbers: list[int] = []
        self.src: list[int] = []
        self.dst: list[int] = []
        self.out_rows: list[int] = []  # row lineage: out row, member, in row (as a row id)
        self.members: list[int] = []
        self.in_rows: list[int] = []
        self.layout: Layout | None = None
        self.index: dict[str, int] = {}
        stem = uuid.uuid4().hex
        target = self.target
        self.rows_writer = RowsWriter(target.rows, f"part-{stem}") if target.rows is not None else None
        self.triples_writer = (
            TripleWriter(target.triples, f"op-{target.op_id}-{stem}")
            if target.triples is not None and target.op_id is not None
            else None
        )
        self.lineage_writer = (
            RowLineageWriter(target.lineage, f"op-{target.op_id}-{stem}")
            if target.lineage is not None and target.op_id is not None
            else None
        )

    def process(self, element: Numbered, stats: Stats) -> Iterable[Any]:
        # Outputs nothing; annotated as an iterable, as Beam reads its output type
        # from it (Beam 2.78 refuses a DoFn whose process is annotated ``-> None``).
        row, value, prov = element
        layout = stats[0]
        if self.layout is None:
            self.layout, self.index = layout, {c: i for i, c in enumerate(layout[0])}
        if self.rows_writer is not None:
            self.rows.append(_record(value, layout[1]))
            self.numbers.append(row)
        if prov and self.triples_writer is not None:
            for attr, parents in per_attribute(value, prov).items():
                if attr not in self.index:
                    raise CaptureError(f"table {self.target.name}: provenance for unknown attribute {attr!r}")
                dst = ids.value_id(self.target.table_id, self.index[attr], row)
                self.src.extend(parents)
                self.dst.extend([dst] * len(parents))
        if prov and self.lineage_writer is not None:
            in_rows = member_rows(prov)
            self.out_rows.extend([row] * len(in_rows))
            self.members.extend(range(len(in_rows)))
            self.in_rows.extend(in_rows)
        if len(self.rows) >= FLUSH_ROWS or len(self.src) >= 10 * FLUSH_ROWS:
            self._flush()
        return ()

    def finish_bundle(self) -> None:
        self._flush()
        for writer in (self.rows_writer, self.triples_writer, self.lineage_writer):
            if writer is not None:
                writer.close()

    def _flush(self) -> None:
        if self.rows and self.layout is not None and self.rows_writer is not None:
            self.rows_writer.write(pa.RecordBatch.from_pylist(self.rows, schema=self.layout[1]), self.numbers)
            Lineage.sinks().add(
                "provplug",
                Lineage.wrap_segment(self.target.summary.filesystem_uri),
                Lineage.wrap_segment(self.target.name),
            )
        if self.src and self.triples_writer is not None:
            self.triples_writer.write(self.src, self.dst, self.target.op_id, dst_table=self.target.table_id)
        if self.in_rows and self.lineage_writer is not None and self.target.op_id is not None:
            in_table, in_row = split_rows(self.in_rows)
            self.lineage_writer.write(
                self.target.op_id, self.target.table_id, self.out_rows, self.members, in_table, in_row
            )
        self.rows, self.numbers, self.src, self.dst = [], [], [], []
        self.out_rows, self.members, self.in_rows = [], [], []


def _record(value: Any, arrow_schema: pa.Schema) -> dict[str, Any]:
    row_cells = cells(value)
    record: dict[str, Any] = {}
    for field in arrow_schema:
        cell = plain_cell(row_cells.get(field.name))
        if field.type == pa.string() and cell is not None and not isinstance(cell, str):
            cell = str(cell)
        record[field.name] = cell
    return record


def _write_summary(stats: Stats, target: TableTarget) -> None:
    layout, rows, triples = stats
    summary = {"rows": rows, "triples": triples, "columns": list(layout[0])}
    target.summary.write_text(target.summary_name, json.dumps(summary))


def _rebase_numbered(element: Numbered, stats: Stats, table_id: int) -> Traced:
    return _rebase(element, stats[0], table_id)


def _rebase(element: Numbered, layout: Layout, table_id: int) -> Traced:
    row, value, _ = element
    columns = layout[0]
    if len(columns) == 1:  # one attribute: one id tuple
        return value, (ids.value_id(table_id, 0, row),)
    present = cells(value)
    return value, {c: (ids.value_id(table_id, i, row),) for i, c in enumerate(columns) if c in present}


# -- sources given in memory (on the driver) -------------------------------------
def layout_in_memory(rows: Sequence[Any]) -> Layout:
    """The layout :class:`LayoutFn` gives rows given in memory (row i is the
    i-th, so a column's first appearance is the first one met)."""
    if len(rows) > ids.MAX_ROWS:
        raise CaptureError(f"a source has {len(rows)} rows; at most {ids.MAX_ROWS} fit a value id")
    acc: dict[str, list[Any]] = {}
    for row, value in enumerate(rows):
        for pos, (attr, cell) in enumerate(cells(value).items()):
            entry = acc.get(attr)
            if entry is None:
                entry = acc[attr] = [(row, pos), set()]
            entry[1].add(_SCALARS.get(type(cell)) or arrow_type(cell))
    return LayoutFn().extract_output(acc)


def column_bases(layout: Layout, table_id: int) -> tuple[tuple[str, int], ...]:
    """Per column, the value id of its row 0 (a cell's id is that plus its row)."""
    return tuple((c, ids.value_id(table_id, i, 0)) for i, c in enumerate(layout[0]))


def rebase_in_memory(element: tuple[Any, int], bases: tuple[tuple[str, int], ...]) -> Traced:
    """``(value, row)`` of a source given in memory -> the traced element."""
    value, row = element
    if len(bases) == 1:
        return value, (bases[0][1] + row,)
    present = cells(value)
    return value, {c: (base + row,) for c, base in bases if c in present}


class CreateNumbered(beam.Create):
    """``beam.Create`` of ``(value, row)`` pairs whose values are of
    ``plain_type``: encoded with the plain values' coder (a ``RowCoder`` for
    rows) instead of inferring a type from every pair, which Beam does per
    row (and slowly) for rows nested in tuples."""

    def __init__(self, values: Sequence[tuple[Any, int]], plain_type: Any) -> None:
        self.plain_type = plain_type
        super().__init__(values, reshuffle=False)  # type: ignore[no-untyped-call]  # python/mypy#16653

    def infer_output_type(self, unused_input_type: Any) -> Any:
        return typehints.Tuple[self.plain_type, int]


def write_in_memory(writer: RowsWriter, rows: Sequence[Any], layout: Layout) -> None:
    """The rows given in memory, column by column, as ``WriteTable`` writes them."""
    arrow_schema = layout[1]
    for start in range(0, len(rows), FLUSH_ROWS):
        chunk = rows[start : start + FLUSH_ROWS]
        columns: dict[str, list[Any]] = {c: [None] * len(chunk) for c in layout[0]}
        for i, value in enumerate(chunk):
            for attr, cell in cells(value).items():
                columns[attr][i] = cell if cell is None or type(cell) in _SCALARS else plain_cell(cell)
        arrays = []
        for field in arrow_schema:
            column = columns[field.name]
            if field.type == pa.string():
                column = [c if c is None or isinstance(c, str) else str(c) for c in column]
            arrays.append(pa.array(column, type=field.type))
        writer.write(pa.RecordBatch.from_arrays(arrays, schema=arrow_schema), range(start, start + len(chunk)))


class Materialize(beam.PTransform[Any, Any]):
    """Numbered elements -> files of table ``target``; returns them rebased."""

    def __init__(self, target: TableTarget) -> None:
        super().__init__()
        self.target = target

    def expand(self, numbered: Any) -> Any:
        stats = numbered | "Layout" >> beam.CombineGlobally(TableStatsFn())
        _ = stats | "Summary" >> beam.Map(_write_summary, self.target)
        stats_view = beam.pvalue.AsSingleton(stats)
        _ = numbered | "Write" >> beam.ParDo(WriteTable(self.target), stats_view)
        return numbered | "Rebase" >> beam.Map(_rebase_numbered, stats_view, self.target.table_id)
