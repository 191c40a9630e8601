"""The one way files get into a run: destinations and Parquet part writers.

A :class:`Destination` is a directory of a run's staging area, named by the
store's URI and a path on the filesystem that URI resolves to. It holds only
strings, so it pickles into Spark tasks and Beam workers, which open the
filesystem themselves (once per process, see :func:`filesystem_for`).

Writers append Parquet *parts* to a destination:

* :class:`TripleWriter` — triples in the store's schema
  (:data:`provplug.schema.TRIPLES`), built by :func:`triples_table` from
  ``src``/``dst`` arrays and an op and tables that are either arrays or one
  number for every triple;
* :class:`RowsWriter` — a table's stored rows with their row numbers
  (:data:`provplug.schema.ROW_COLUMN`);
* :class:`PartWriter` — any other Arrow table (scratch files).

Outside the store, :class:`OutputFileWriter` writes one Parquet file of a
pipeline's own output (the Spark adapter's direct writes of the user's files).

Each buffers its input into row groups of ``row_group_rows`` rows, starts a
new part after ``file_rows`` rows, names its parts ``<stem>-<n>.parquet``
and reports what it wrote (:class:`WrittenFile`: dataset, path, rows), so a
driver can keep exactly the parts of the task attempts its engine used
(:meth:`Destination.discard_files`).

Inside a capture run, get destinations and writers from the run
(:class:`provplug.plugin.protocols.RunRecorder`): it creates the directories and
records the datasets they hold when the run commits.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import uuid
from collections.abc import Collection, Iterable
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from provplug import ids, schema
from provplug.errors import CaptureError

# Arrow input is buffered to row groups of this many rows.
ROW_GROUP_ROWS = 1 << 20
# A writer starts a new part after this many rows.
FILE_ROWS = 1 << 24
# Parquet options of every triples part: op and tables repeat (dictionary),
# src and dst grow slowly within a part (delta).
TRIPLE_ENCODING: dict[str, Any] = {
    "use_dictionary": ["op", "src_table", "dst_table"],
    "column_encoding": {"src": "DELTA_BINARY_PACKED", "dst": "DELTA_BINARY_PACKED"},
    "compression": "zstd",
    "data_page_version": "2.0",
}
# Row-lineage parts (every adapter's, and imports'): op, tables and the flag
# repeat (dictionary); output rows, member numbers and input rows grow (delta).
ROW_LINEAGE_ENCODING: dict[str, Any] = {
    "use_dictionary": ["op", "out_table", "in_table", "optional"],
    "column_encoding": {c: "DELTA_BINARY_PACKED" for c in ("out_row", "member", "in_row")},
    "compression": "zstd",
    "data_page_version": "2.0",
}
ROWS_ENCODING: dict[str, Any] = {"compression": "zstd"}
ROW_FIELD = pa.field(schema.ROW_COLUMN, pa.int64(), nullable=False)

WriterT = TypeVar("WriterT", bound="PartWriter")


@functools.lru_cache(maxsize=32)
def filesystem_for(uri: str) -> Any:
    """The pyarrow filesystem of a store URI or local path (cached per process).

    A plain path that pyarrow cannot parse as a URI (a relative one) is on
    the local filesystem.
    """
    try:
        fs, _ = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, ValueError):
        fs = pafs.LocalFileSystem()
    return fs


class WrittenFile(NamedTuple):
    """One Parquet part a writer closed: its dataset, path and row count."""

    dataset: str
    path: str
    rows: int


class SourceFile(NamedTuple):
    """A Parquet file of a source, to be stored as a positional copy."""

    filesystem: Any  # pyarrow.fs.FileSystem
    path: str
    rows: int


@dataclasses.dataclass(frozen=True)
class Destination:
    """A directory of the store's filesystem; picklable (strings only).

    ``filesystem_uri`` names the filesystem (the store's URI),
    ``path`` the directory on it, ``spark_path`` the same directory as
    Spark reads and writes it.
    """

    filesystem_uri: str
    path: str
    spark_path: str

    def filesystem(self) -> Any:
        """The pyarrow filesystem ``path`` is on (opened once per process)."""
        return filesystem_for(self.filesystem_uri)

    def child(self, *parts: str) -> Destination:
        """The directory ``parts`` below this one."""
        suffix = "/".join(parts)
        return Destination(self.filesystem_uri, f"{self.path}/{suffix}", f"{self.spark_path}/{suffix}")

    def file(self, name: str) -> str:
        """The path of the file ``name`` in this directory."""
        return f"{self.path}/{name}"

    def create(self) -> None:
        self.filesystem().create_dir(self.path, recursive=True)

    def exists(self) -> bool:
        return bool(self.filesystem().get_file_info(self.path).type != pafs.FileType.NotFound)

    def delete(self) -> None:
        """Remove the directory and everything in it (nothing if it is missing)."""
        if self.exists():
            self.filesystem().delete_dir(self.path)

    def files(self, prefix: str = "") -> list[str]:
        """Paths of the files directly in this directory named ``prefix*``, sorted."""
        selector = pafs.FileSelector(self.path, allow_not_found=True)
        return sorted(
            i.path
            for i in self.filesystem().get_file_info(selector)
            if i.type == pafs.FileType.File and i.base_name.startswith(prefix)
        )

    def discard_files(self, prefix: str, keep: Collection[str]) -> set[str]:
        """Delete the files named ``prefix*`` whose path is not in ``keep``:
        the parts of task attempts an engine did not use. Returns the kept
        paths found (a kept path not found is a file the store never got)."""
        fs = self.filesystem()
        found = set()
        for path in self.files(prefix):
            if path not in keep:
                fs.delete_file(path)
            else:
                found.add(path)
        return found

    def write_text(self, name: str, text: str) -> None:
        with self.filesystem().open_output_stream(self.file(name)) as out:
            out.write(text.encode())

    def read_text(self, name: str) -> str:
        with self.filesystem().open_input_stream(self.file(name)) as f:
            return bytes(f.read()).decode()


def _int64(values: Any) -> np.ndarray:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=np.int64)


def _column(value: Any, n: int, dtype: type[np.generic], name: str) -> np.ndarray:
    """``value`` as an array of ``n`` items: one number repeated, or an array of ``n``."""
    if isinstance(value, (int, np.integer)):
        return np.full(n, value, dtype=dtype)
    array = _int64(value).astype(dtype, copy=False)
    if len(array) != n:
        raise ValueError(f"{name} has {len(array)} items for {n} triples")
    return array


def triples_table(
    src: Any,
    dst: Any,
    op: int | Any,
    *,
    dst_table: int | Any,
    src_table: int | Any | None = None,
) -> pa.Table:
    """Triples as an Arrow table in the store's schema.

    :param src: value ids the triples derive from (array-like of int64).
    :param dst: value ids derived, as many as ``src``.
    :param op: the op id of every triple, or one per triple.
    :param dst_table: the table id of every ``dst``, or one per triple.
    :param src_table: the table id of every ``src``, or one per triple;
        ``None`` derives it from captured (bit-packed) ids, see
        :mod:`provplug.ids`. Imported ids must pass it.
    :returns: a table with :data:`provplug.schema.TRIPLES` as its schema.
    """
    src_ids, dst_ids = _int64(src), _int64(dst)
    n = len(src_ids)
    if len(dst_ids) != n:
        raise ValueError(f"dst has {len(dst_ids)} items for {n} src ids")
    sources = (
        (src_ids >> ids.TABLE_SHIFT).astype(np.int32)
        if src_table is None
        else _column(src_table, n, np.int32, "src_table")
    )
    return pa.Table.from_arrays(
        [
            pa.array(src_ids, pa.int64()),
            pa.array(dst_ids, pa.int64()),
            pa.array(_column(op, n, np.int64, "op"), pa.int64()),
            pa.array(sources, pa.int32()),
            pa.array(_column(dst_table, n, np.int32, "dst_table"), pa.int32()),
        ],
        schema=schema.TRIPLES,
    )


class PartWriter:
    """Parquet parts of one dataset written into ``destination``.

    Tables handed to :meth:`write_table` are buffered and written as row
    groups of at least ``row_group_rows`` rows (the last one smaller); a new
    part starts once a part holds ``file_rows`` rows (``None``: one part).
    Parts are named ``<stem>-00000.parquet``, ``<stem>-00001.parquet``, ...;
    a missing ``stem`` is made unique. Nothing is written for no rows.
    Use it as a context manager, or call :meth:`close`.
    """

    dataset = "parts"
    # Subclasses fix their dataset's schema and Parquet options here.
    default_schema: pa.Schema | None = None
    default_options: dict[str, Any] = {}  # noqa: RUF012  (read-only class default)

    def __init__(
        self,
        destination: Destination,
        stem: str | None = None,
        *,
        dataset: str | None = None,
        arrow_schema: pa.Schema | None = None,
        row_group_rows: int = ROW_GROUP_ROWS,
        file_rows: int | None = FILE_ROWS,
        **parquet_options: Any,
    ) -> None:
        if row_group_rows < 1 or (file_rows is not None and file_rows < 1):
            raise ValueError("row_group_rows and file_rows must be positive")
        self.destination = destination
        self.stem = stem or f"part-{uuid.uuid4().hex[:16]}"
        if dataset is not None:
            self.dataset = dataset
        self.arrow_schema = arrow_schema or self.default_schema
        self.row_group_rows = row_group_rows
        self.file_rows = file_rows
        self.options = {**self.default_options, **parquet_options}
        self.written: list[WrittenFile] = []
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._accepted = 0
        self._writer: Any = None  # pyarrow.parquet.ParquetWriter of the open part
        self._path = ""
        self._part_rows = 0
        self._closed = False

    @property
    def rows(self) -> int:
        """Rows handed to this writer so far (all of them written once closed)."""
        return self._accepted

    def write_table(self, table: pa.Table | pa.RecordBatch) -> None:
        """Append ``table`` (a table or record batch) to the dataset."""
        if self._closed:
            raise ValueError(f"{type(self).__name__} for {self.destination.path} is closed")
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if self.arrow_schema is not None and table.schema != self.arrow_schema:
            table = table.select(self.arrow_schema.names).cast(self.arrow_schema)
        if table.num_rows == 0:
            return
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self._accepted += table.num_rows
        if self._pending_rows >= self.row_group_rows:
            self._flush()

    def close(self) -> list[WrittenFile]:
        """Write what is buffered, close the open part; return every part written."""
        if not self._closed:
            self._closed = True
            self._flush()
            self._close_part()
        return list(self.written)

    def __enter__(self: WriterT) -> WriterT:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        # On an error the parts are closed all the same (a failed run's
        # staging directory is discarded as a whole).
        self.close()

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending, self._pending_rows = [], 0
        if self._writer is not None and self.file_rows is not None and self._part_rows >= self.file_rows:
            self._close_part()
        if self._writer is None:
            if not self.written:
                self.destination.create()  # once per writer: parts may be written far from the driver
            self._path = self.destination.file(f"{self.stem}-{len(self.written):05d}.parquet")
            self._writer = pq.ParquetWriter(
                self._path, table.schema, filesystem=self.destination.filesystem(), **self.options
            )
            self._part_rows = 0
        self._writer.write_table(table, row_group_size=table.num_rows)
        self._part_rows += table.num_rows

    def _close_part(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self.written.append(WrittenFile(self.dataset, self._path, self._part_rows))
        self._writer = None


class TripleWriter(PartWriter):
    """Writes triples (schema :data:`provplug.schema.TRIPLES`) into a destination.

    ``writer.write(src, dst, op_id, dst_table=table_id)`` for captured ids
    (their source table is in their bits); pass ``src_table`` for imported
    ids. :attr:`rows` counts the triples written.
    """

    dataset = "triples"
    default_schema = schema.TRIPLES
    default_options = TRIPLE_ENCODING

    def write(
        self, src: Any, dst: Any, op: int | Any, *, dst_table: int | Any, src_table: int | Any | None = None
    ) -> None:
        """Append triples ``src -> dst``; see :func:`triples_table` for the arguments."""
        self.write_table(triples_table(src, dst, op, dst_table=dst_table, src_table=src_table))


def lineage_table(
    op: int, out_table: int, out_row: Any, member: Any, in_table: Any, in_row: Any, optional: Any = False
) -> pa.Table:
    """Records of :data:`provplug.schema.ROW_LINEAGE` from arrays (scalars broadcast)."""
    rows = np.asarray(out_row, dtype=np.int64)
    n = len(rows)

    def column(value: Any, dtype: Any) -> Any:
        arr = np.asarray(value, dtype=dtype)
        return np.full(n, arr, dtype=dtype) if arr.ndim == 0 else arr

    return pa.Table.from_arrays(
        [
            pa.array(column(op, np.int64)),
            pa.array(column(out_table, np.int32)),
            pa.array(rows),
            pa.array(column(member, np.int32)),
            pa.array(column(in_table, np.int32)),
            pa.array(column(in_row, np.int64)),
            pa.array(column(optional, np.bool_)),
        ],
        schema=schema.ROW_LINEAGE,
    )


class RowLineageWriter(PartWriter):
    """Writes row-lineage records (schema :data:`provplug.ingest.rowlineage.ROW_LINEAGE`).

    ``writer.write(op, out_table, out_row, member, in_table, in_row, optional)``
    with arrays (or scalars, broadcast) per record; see :mod:`provplug.ingest.rowlineage`.
    """

    dataset = "rowlineage"
    default_schema = schema.ROW_LINEAGE
    default_options = ROW_LINEAGE_ENCODING

    def write(
        self, op: int, out_table: int, out_row: Any, member: Any, in_table: Any, in_row: Any, optional: Any = False
    ) -> None:
        self.write_table(lineage_table(op, out_table, out_row, member, in_table, in_row, optional))


class RowsWriter(PartWriter):
    """Writes a table's stored rows, each with its row number, into a destination.

    ``writer.write(data, row_numbers)`` appends ``data``'s columns and the
    row-number column :data:`provplug.schema.ROW_COLUMN`; ``write_table``
    takes tables that already carry it.
    """

    dataset = "rows"
    default_options = ROWS_ENCODING

    def write(self, data: pa.Table | pa.RecordBatch, row_numbers: Any) -> None:
        """Append the rows of ``data`` numbered ``row_numbers`` (one per row)."""
        numbers = _int64(row_numbers)
        if len(numbers) != data.num_rows and data.num_columns:
            raise ValueError(f"{len(numbers)} row numbers for {data.num_rows} rows")
        if schema.ROW_COLUMN in data.schema.names:
            raise CaptureError(f"a table has a column named {schema.ROW_COLUMN}, which provplug reserves")
        self.write_table(
            pa.Table.from_arrays(
                [*data.columns, pa.array(numbers, pa.int64())],
                schema=pa.schema([*data.schema, ROW_FIELD]),
            )
        )

    def write_table(self, table: pa.Table | pa.RecordBatch) -> None:
        if schema.ROW_COLUMN not in table.schema.names:
            raise ValueError(f"stored rows need their row numbers in a {schema.ROW_COLUMN} column")
        super().write_table(table)


@dataclasses.dataclass(frozen=True)
class PositionalCopy:
    """One source file to store as a positional copy; picklable, so that a
    Spark task can make it (the bytes then never pass through the driver)."""

    source_filesystem: Any  # pyarrow.fs.FileSystem (pickled with its settings)
    source_path: str
    destination: Destination
    name: str

    def make(self) -> None:
        pafs.copy_files(
            self.source_path,
            self.destination.file(self.name),
            source_filesystem=self.source_filesystem,
            destination_filesystem=self.destination.filesystem(),
        )


def positional_copies(
    destination: Destination, files: Iterable[tuple[Any, str, int]]
) -> tuple[list[PositionalCopy], int]:
    """The copies that store a source's Parquet files in ``destination``, and
    the number of rows.

    Each non-empty file is copied as ``pos-<first row>.parquet`` (see
    :func:`provplug.schema.positional_name`): a row's number is its file's
    first row plus its position, so the files are never rewritten.
    """
    copies, offset = [], 0
    for source_fs, path, rows in files:
        if rows == 0:
            continue  # no row to number; two files must not share an offset
        copies.append(PositionalCopy(source_fs, path, destination, schema.positional_name(offset)))
        offset += rows
    if offset > ids.MAX_ROWS:
        raise CaptureError(f"source has {offset} rows; at most {ids.MAX_ROWS} fit a value id")
    return copies, offset


def copy_positional(destination: Destination, files: Iterable[tuple[Any, str, int]]) -> int:
    """Store a source's Parquet files as positional copies in ``destination``
    (:func:`positional_copies`), in this process. Returns the number of rows."""
    copies, rows = positional_copies(destination, files)
    destination.create()
    make_copies(copies)
    return rows


def make_copies(copies: Iterable[PositionalCopy]) -> None:
    """Make ``copies`` one after the other, in this process."""
    for copy in copies:
        copy.make()


def local_destination(path: str | os.PathLike[str]) -> Destination:
    """A destination on the local filesystem (tests, tools outside a store)."""
    absolute = os.path.abspath(os.fspath(path))
    return Destination(absolute, absolute, absolute)


class OutputFileWriter:
    """One Parquet file of a pipeline's own output at a local ``path`` (not
    the store): opened at its first rows, every row group with the schema's
    ``metadata`` (the engine's own footer keys); ``empty`` writes a file
    with no row."""

    def __init__(self, path: str, compression: str, metadata: dict[str, str]) -> None:
        self.path = path
        self.compression = compression
        self.metadata = metadata
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        if self._writer is None:
            self._writer = pq.ParquetWriter(
                self.path, table.schema.with_metadata(self.metadata), compression=self.compression
            )
        self._writer.write_table(table.replace_schema_metadata(self._writer.schema.metadata))
        self.rows += table.num_rows

    def empty(self, schema_: pa.Schema) -> None:
        pq.write_table(
            schema_.empty_table().replace_schema_metadata(self.metadata), self.path, compression=self.compression
        )

    def close(self) -> list[tuple[str, int]]:
        """(path, rows) of the file written, if any."""
        if self._writer is None:
            return []
        self._writer.close()
        return [(self.path, self.rows)]
