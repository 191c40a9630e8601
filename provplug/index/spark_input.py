"""The Spark engine's input: the committed triples dealt into groups that
tasks read themselves, with pyarrow, from the store's filesystem.

A group is a fixed list of pieces: row ranges of stored triple files (by
their row groups) and slices of location edges' output positions
(:func:`provplug.location.edge_slices`). The stored rows are cut into
equal consecutive ranges, one per group; edge slices go to the group with
the fewest triples so far. Reading a group always gives the same triples,
whatever task reads it, so a pass may read its groups again and find the
same local components (the engine relies on that), without Spark holding
the input or converting it to rows and back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from provplug import schema
from provplug.errors import DamagedStoreError
from provplug.location import LocationEdge
from provplug.location.edges import expand_positions, triples_per_position
from provplug.plugin.protocols import Store
from provplug.store import files as storefiles
from provplug.store.triples import edge_slices, edges_of, stored_triple_files

# Triples one group holds at most (unless the session has more cores than
# groups of this size): its Python task holds them and a few arrays per triple.
GROUP_TRIPLES = 4_000_000


@dataclasses.dataclass(frozen=True)
class FileRows:
    """Rows ``start..stop-1`` (counted from the first of ``row_groups``) of
    the row groups ``row_groups`` of the stored file ``path``."""

    path: str
    row_groups: tuple[int, ...]
    start: int
    stop: int


@dataclasses.dataclass(frozen=True)
class EdgeSlice:
    edge: int
    first: int
    last: int


Piece = FileRows | EdgeSlice


@dataclasses.dataclass(frozen=True)
class InputGroups:
    """What the tasks need to read any group (picklable)."""

    fs: pafs.FileSystem
    edges: tuple[LocationEdge, ...]
    groups: tuple[tuple[Piece, ...], ...]

    def read(self, group: int, columns: Sequence[str]) -> pa.Table | None:
        """The triples of ``group`` (``columns``), or None when it has none."""
        wanted = pa.schema([schema.TRIPLES.field(c) for c in columns])
        parts = [t for p in self.groups[group] for t in self._piece(p, wanted) if t.num_rows]
        return pa.concat_tables(parts).combine_chunks() if parts else None

    def _piece(self, piece: Piece, wanted: pa.Schema) -> Iterator[pa.Table]:
        if isinstance(piece, EdgeSlice):
            batches = list(expand_positions(self.edges[piece.edge], piece.first, piece.last, columns=wanted.names))
            yield pa.Table.from_batches(batches, wanted)
            return
        with storefiles.damage_reported(piece.path), self.fs.open_input_file(piece.path) as f:
            parquet = pq.ParquetFile(f)
            missing = [c for c in wanted.names if c not in parquet.schema_arrow.names]
            if missing:
                raise DamagedStoreError(f"damaged store file {piece.path}: no {missing[0]!r} column")
            table = parquet.read_row_groups(list(piece.row_groups), columns=wanted.names)
        table = table.slice(piece.start, piece.stop - piece.start)
        if any(table.column(c).null_count for c in wanted.names):
            raise DamagedStoreError(f"damaged store file {piece.path}: a triple has an empty field")
        yield table.cast(wanted)


def input_groups(store: Store, parallelism: int, group_triples: int | None = None) -> InputGroups:
    """The store's triples in at least ``parallelism`` groups of at most
    about ``group_triples`` (default :data:`GROUP_TRIPLES`; Parquet footers
    are read, no data)."""
    group_triples = GROUP_TRIPLES if group_triples is None else group_triples
    files = [(path, _row_group_sizes(store.fs, path)) for path in stored_triple_files(store)]
    edges = tuple(edges_of(store))
    slices = [
        (EdgeSlice(i, first, last), triples_per_position(edges[i]) * (last - first + 1))
        for i, first, last in edge_slices(edges)
    ]
    stored = sum(sum(sizes) for _, sizes in files)
    total = stored + sum(size for _, size in slices)
    count = max(1, parallelism, -(-total // group_triples))
    groups: list[list[Piece]] = [[] for _ in range(count)]
    load = [0] * count
    for g, lo, hi in _equal_ranges(stored, count):
        groups[g] += _file_rows(files, lo, hi)
        load[g] += hi - lo
    for piece, size in sorted(slices, key=lambda s: -s[1]):
        g = load.index(min(load))
        groups[g].append(piece)
        load[g] += size
    return InputGroups(store.fs, edges, tuple(tuple(g) for g in groups))


def _row_group_sizes(fs: pafs.FileSystem, path: str) -> list[int]:
    meta = storefiles.parquet_metadata(fs, path)
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def _equal_ranges(rows: int, count: int) -> list[tuple[int, int, int]]:
    """``(group, lo, hi)``: ``0..rows-1`` cut into ``count`` consecutive ranges."""
    bounds = [rows * g // count for g in range(count + 1)]
    return [(g, bounds[g], bounds[g + 1]) for g in range(count) if bounds[g + 1] > bounds[g]]


def _file_rows(files: list[tuple[str, list[int]]], lo: int, hi: int) -> list[Piece]:
    """The pieces of files holding the stored rows ``lo..hi-1`` (files in order)."""
    pieces: list[Piece] = []
    offset = 0
    for path, sizes in files:
        rg_start = offset
        for i, size in enumerate(sizes):
            rg_end = rg_start + size
            if rg_end > lo and rg_start < hi:
                first = max(lo, rg_start) - rg_start
                last = min(hi, rg_end) - rg_start
                previous = pieces[-1] if pieces else None
                if (
                    isinstance(previous, FileRows)
                    and previous.path == path
                    and previous.row_groups[-1] == i - 1
                    and (previous.stop == _rows_in(sizes, previous.row_groups) and first == 0)
                ):  # runs on from the previous row group: one read
                    pieces[-1] = FileRows(path, (*previous.row_groups, i), previous.start, previous.stop + last)
                else:
                    pieces.append(FileRows(path, (i,), first, last))
            rg_start = rg_end
        offset = rg_start
    return pieces


def _rows_in(sizes: list[int], row_groups: tuple[int, ...]) -> int:
    return sum(sizes[i] for i in row_groups)


def group_ids(batches: Iterator[pa.RecordBatch]) -> list[int]:
    """The group numbers a task was given (a ``spark.range`` column ``id``)."""
    return [int(i) for b in batches for i in b.column("id").to_pylist()]
