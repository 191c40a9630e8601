"""THE way to read a store's triples: the stored triple files plus the
triples its location edges stand for (:func:`expand` of :func:`locations_of`).

Every reader of triples — the index engines, RQ, exports, the workflow
graph, browse, metrics — goes through this module, so a store whose aligned
or rated steps were recorded as location edges answers exactly as one that
stored their triples.

* :func:`triple_batches` — record batches (bounded memory), stored files
  first, then each edge expanded in chunks; :func:`triple_table` collects
  them for the small readers.
* :class:`TripleFilter` — ops, source/destination tables, runs: pushed down
  into the Parquet scans, and applied to edges whole (every triple of an
  edge has its op and tables), so an edge that cannot match is never expanded.
* :func:`triple_counts` — triples per (op, source table, destination table)
  without expanding any edge (an edge knows its count).
* :class:`TripleScan` — what :meth:`Store.triples` returns: the same
  triples as batches, a table or a count, for code that holds a store.
* :func:`triples_frame` — the Spark variant: stored files and the edges expanded
  on the executors, slice by slice (the driver ships only the small edge
  list and the slices' position bounds).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from provplug import schema
from provplug.errors import DamagedStoreError
from provplug.location.edges import CHUNK_ROWS, LocationEdge, expand_positions, triples_per_position
from provplug.plugin.protocols import Store
from provplug.store import files as storefiles
from provplug.store.locations import locations_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

COLUMNS = tuple(schema.TRIPLES.names)  # src, dst, op, src_table, dst_table
# Triples one Spark task expands from one slice of an edge, at most (about).
SLICE_TRIPLES = 1 << 22


@dataclass(frozen=True)
class TripleFilter:
    """Which triples to read; None admits every value of that field."""

    ops: frozenset[int] | None = None
    src_tables: frozenset[int] | None = None
    dst_tables: frozenset[int] | None = None
    runs: frozenset[str] | None = None  # run ids

    @classmethod
    def of(
        cls,
        ops: Collection[int] | None = None,
        src_tables: Collection[int] | None = None,
        dst_tables: Collection[int] | None = None,
        runs: Collection[str] | None = None,
    ) -> TripleFilter:
        def frozen(values: Collection[Any] | None) -> frozenset[Any] | None:
            return None if values is None else frozenset(values)

        return cls(frozen(ops), frozen(src_tables), frozen(dst_tables), frozen(runs))

    def _fields(self) -> list[tuple[str, frozenset[int]]]:
        named = (("op", self.ops), ("src_table", self.src_tables), ("dst_table", self.dst_tables))
        return [(name, values) for name, values in named if values is not None]

    def expression(self) -> pc.Expression | None:
        """The filter on a triple's columns, for a Parquet scan (None: no condition)."""
        condition: pc.Expression | None = None
        for name, values in self._fields():
            term = pc.field(name).isin(sorted(values))
            condition = term if condition is None else condition & term
        return condition

    def admits(self, edge: LocationEdge) -> bool:
        """Whether the triples of ``edge`` pass (all of them do, or none)."""
        fields = {"op": edge.op, "src_table": edge.src_table, "dst_table": edge.dst_table}
        return all(fields[name] in values for name, values in self._fields())


EVERYTHING = TripleFilter()


# -- what there is to read --------------------------------------------------------


def stored_triple_files(store: Store[Any], where: TripleFilter = EVERYTHING) -> list[str]:
    """The committed triple files (of ``where.runs``), as :meth:`Store.triple_files` lists them."""
    files = store.triple_files()
    if where.runs is None:
        return files
    folders = tuple(store.path("runs", r) + "/" for r in sorted(where.runs))
    return [f for f in files if f.startswith(folders)]


def edges_of(store: Store[Any], where: TripleFilter = EVERYTHING) -> list[LocationEdge]:
    """The location edges (of ``where.runs``) whose triples can pass ``where``."""
    return [e for e in locations_of(store, where.runs) if where.admits(e)]


def represented_triples(store: Store[Any]) -> int:
    """Triples a store holds, stored or stood for by location edges (from the
    manifests' counts: no file is read)."""
    return sum(int(m["counts"].get("triples", 0)) + int(m["counts"].get("location_triples", 0)) for m in store.runs())


# -- the store's one scan ---------------------------------------------------------


@dataclass(frozen=True)
class TripleScan:
    """Every committed triple of ``store`` passing ``where``, whatever it is
    stored as (triple files, or location edges expanded here):
    :meth:`Store.triples` returns one. Reading is lazy; each method scans."""

    store: Store[Any]
    where: TripleFilter = EVERYTHING

    def to_batches(self, columns: Sequence[str] = COLUMNS, batch_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
        """The triples in record batches of at most ``batch_rows`` rows (bounded memory)."""
        return triple_batches(self.store, columns, self.where, batch_rows)

    def to_table(self, columns: Sequence[str] | None = None) -> pa.Table:
        """The triples as one table (for bounded results)."""
        return triple_table(self.store, COLUMNS if columns is None else columns, self.where)

    def count_rows(self) -> int:
        """How many triples, without expanding any location edge."""
        return sum(triple_counts(self.store, self.where).values())


# -- local ------------------------------------------------------------------------


def triple_batches(
    store: Store[Any],
    columns: Sequence[str] = COLUMNS,
    where: TripleFilter = EVERYTHING,
    batch_rows: int = CHUNK_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Every triple passing ``where`` (``columns`` of it), in record batches of
    at most ``batch_rows``: the stored files in :meth:`Store.triple_files`
    order, then each location edge's triples, expanded chunk by chunk."""
    _check_columns(columns)
    for path in stored_triple_files(store, where):
        yield from _file_batches(store, path, columns, where.expression(), batch_rows)
    for edge in edges_of(store, where):
        yield from expand_positions(edge, 1, edge.dst_rows.size, batch_rows, columns)


def triple_table(store: Store[Any], columns: Sequence[str] = COLUMNS, where: TripleFilter = EVERYTHING) -> pa.Table:
    """The triples of :func:`triple_batches` as one table, for readers whose
    result is bounded (the stored files in one multi-threaded scan)."""
    _check_columns(columns)
    selected = pa.schema([schema.TRIPLES.field(c) for c in columns])
    files = stored_triple_files(store, where)
    parts = (
        [
            storefiles.scan(
                store.fs,
                files,
                f"triples of {store.uri}",
                schema.TRIPLES,
                columns=list(columns),
                filter=where.expression(),
            )
        ]
        if files
        else []
    )
    expanded = [
        batch
        for edge in edges_of(store, where)
        for batch in expand_positions(edge, 1, edge.dst_rows.size, columns=columns)
    ]
    if expanded:
        parts.append(pa.Table.from_batches(expanded, schema=selected))
    return pa.concat_tables(parts) if parts else selected.empty_table()


def triple_counts(store: Store[Any], where: TripleFilter = EVERYTHING) -> dict[tuple[int, int, int], int]:
    """Triples per ``(op, src_table, dst_table)``; edges are counted, not expanded."""
    keys = ("op", "src_table", "dst_table")
    counts: dict[tuple[int, int, int], int] = {}
    for path in stored_triple_files(store, where):
        for batch in _file_batches(store, path, keys, where.expression(), CHUNK_ROWS):
            grouped = pa.Table.from_batches([batch]).group_by(list(keys)).aggregate([([], "count_all")])
            for r in grouped.to_pylist():
                key = (int(r["op"]), int(r["src_table"]), int(r["dst_table"]))
                counts[key] = counts.get(key, 0) + int(r["count_all"])
    for edge in edges_of(store, where):
        key = (edge.op, edge.src_table, edge.dst_table)
        counts[key] = counts.get(key, 0) + edge.triple_count
    return counts


def _check_columns(columns: Sequence[str]) -> None:
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown or not columns:
        raise ValueError(f"a triple has the columns {', '.join(COLUMNS)}, not {unknown or 'none'}")


def _file_batches(
    store: Store[Any], path: str, columns: Sequence[str], condition: pc.Expression | None, rows: int
) -> Iterator[pa.RecordBatch]:
    """One stored file's batches; a file without a column, or with an empty
    field, is damage (its scan errors are too, naming the file)."""
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    with storefiles.damage_reported(path), store.fs.open_input_file(path) as f:
        parquet = pq.ParquetFile(f)
        missing = [c for c in columns if c not in parquet.schema_arrow.names]
        if missing:
            raise DamagedStoreError(f"damaged store file {path}: no {missing[0]!r} column")
        if condition is None:
            batches: Iterator[pa.RecordBatch] = parquet.iter_batches(batch_size=rows, columns=list(columns))
        else:
            scanned = pads.dataset(path, schema=schema.TRIPLES, format="parquet", filesystem=store.fs)
            batches = iter(scanned.to_batches(columns=list(columns), filter=condition, batch_size=rows))
        for batch in batches:
            if any(batch.column(c).null_count for c in columns):
                raise DamagedStoreError(f"damaged store file {path}: a triple has an empty field")
            if batch.num_rows:
                yield batch


# -- Spark ------------------------------------------------------------------------


def triples_frame(
    spark: SparkSession,
    store: Store[Any],
    columns: Sequence[str] = COLUMNS,
    where: TripleFilter = EVERYTHING,
) -> DataFrame:
    """The Spark variant of :func:`triple_batches`: a DataFrame of the stored
    triples and the edges' triples, which the executors expand (each task one
    slice of output positions of one edge)."""
    from provplug.sparksession import spark_ddl

    _check_columns(columns)
    ddl = spark_ddl(schema.TRIPLES)
    files = [store.to_spark_path(p) for p in stored_triple_files(store, where)]
    frame = spark.read.schema(ddl).parquet(*files) if files else spark.createDataFrame([], ddl)
    condition = _spark_condition(where)
    if condition is not None:
        frame = frame.where(condition)
    edges = edges_of(store, where)
    if edges:
        frame = frame.unionByName(expanded_frame(spark, edges))
    return frame.select(*columns)


def _spark_condition(where: TripleFilter) -> Any:
    from pyspark.sql import functions as F

    condition = None
    for name, values in where._fields():
        term = F.col(name).isin(sorted(values))
        condition = term if condition is None else condition & term
    return condition


def edge_slices(edges: Sequence[LocationEdge], slice_triples: int = SLICE_TRIPLES) -> list[tuple[int, int, int]]:
    """``(edge index, first, last)`` output-position slices covering every
    edge, each standing for about ``slice_triples`` triples at most."""
    slices: list[tuple[int, int, int]] = []
    for i, edge in enumerate(edges):
        if not edge.column_pairs:
            continue
        size = edge.dst_rows.size
        step = max(1, slice_triples // triples_per_position(edge))
        slices.extend((i, first, min(size, first + step - 1)) for first in range(1, size + 1, step))
    return slices


def expanded_frame(spark: SparkSession, edges: Sequence[LocationEdge], columns: Sequence[str] = COLUMNS) -> DataFrame:
    """The triples ``edges`` stand for (``columns`` of them), expanded on the
    executors: each task one slice of output positions of one edge (the
    driver ships the edges and the slices' bounds)."""
    from provplug.sparksession import spark_ddl

    ddl = spark_ddl(pa.schema([schema.TRIPLES.field(c) for c in columns]))
    slices = edge_slices(edges)
    if not slices:
        return spark.createDataFrame([], ddl)
    shipped = list(edges)  # a few integers per partition per edge: the closure carries them
    parallel = max(1, min(len(slices), spark.sparkContext.defaultParallelism * 2))
    units = spark.createDataFrame(slices, "edge INT, first LONG, last LONG").repartition(parallel)
    wanted = tuple(columns)

    def expand_slices(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i, first, last in zip(*(batch.column(c).to_pylist() for c in ("edge", "first", "last")), strict=True):
                yield from expand_positions(shipped[i], first, last, columns=wanted)

    return units.mapInArrow(expand_slices, ddl)
