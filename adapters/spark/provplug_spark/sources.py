"""The stored tables a step may read, and the files of a Parquet source.

* :class:`Tables`: every table of the run (sources and step outputs) is
  stored once under ``rows/<table>/`` and read back from there; a step's plan
  reads it as a Parquet leaf, which the rewrite (:mod:`.rules`,
  ``table_read``) finds here by its path.
* :func:`parquet_files` and :func:`parquet_parts`: a source that is a bare
  read of Parquet files is copied into the store instead of being rewritten
  (its row numbers are file offset + position, see :mod:`provplug.schema`);
  these list its files. :func:`copied_rows` copies them, or says it could not.

A copy must hold exactly the rows Spark reads, so it is made only when the
read is one Spark does file by file, whole: a copy of the listed files read
back with the same schema is then what Spark reads from the originals. The
file index has already applied ``pathGlobFilter``, ``recursiveFileLookup``
and ``modifiedBefore``/``modifiedAfter`` (they choose the files listed). Any
other read option, or ``ignoreCorruptFiles`` / ``ignoreMissingFiles`` on
(option or SQL conf: Spark may then skip files or their tails), or partition
columns (values that are in no file), or a file whose columns are not the
table's (``mergeSchema``, a narrower read schema), and the source is read
through Spark instead, as any other source. So is one whose files pyarrow
cannot read or copy: an error there never reaches the user's job.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame

from provplug.errors import CaptureError
from provplug.ingest.recorder import ROWS, StagedRun
from provplug.location import RowRuns, location_edge
from provplug.model import OpInfo, TableInfo, utc_now
from provplug.plugin.protocols import RunRecorder
from provplug.plugin.writers import SourceFile
from provplug.schema import ROW_COLUMN
from provplug.store.versions import LinkedRead, WrittenVersion, fingerprint, relative_files

from . import naming

logger = logging.getLogger(__name__)

# Read options (Spark keeps them lower-cased) under which the listed files,
# copied whole, are exactly what Spark reads: they only choose the files.
# ``mergeschema`` only changes the read schema, which each file is checked
# against (parquet_parts).
FILE_CHOOSING_OPTIONS = frozenset(
    {"path", "paths", "pathglobfilter", "recursivefilelookup", "modifiedbefore", "modifiedafter", "mergeschema"}
)
# Options (and their SQL confs) with which Spark skips what it cannot read.
SKIPPING_OPTIONS = {
    "ignorecorruptfiles": "spark.sql.files.ignoreCorruptFiles",
    "ignoremissingfiles": "spark.sql.files.ignoreMissingFiles",
}
# What pyarrow raises on a file it cannot read or copy (not Parquet, truncated, gone).
UNREADABLE = (pa.ArrowException, OSError)


@dataclasses.dataclass(frozen=True)
class TableLeaf:
    """A step input: the stored rows of a table, read back from ``path``."""

    table_id: int
    columns: tuple[str, ...]
    path: str
    positional: bool = False  # copies of source files: row number = file offset + row index (no ROW_COLUMN)


def _norm_path(path: str) -> str:
    """A path without scheme and slashes at the ends, to compare Spark's root paths."""
    return path.removeprefix("file:").split("://", 1)[-1].strip("/")


class Tables:
    """The stored tables of one capture run, by the path a plan reads them from."""

    def __init__(self) -> None:
        self._by_path: dict[str, TableLeaf] = {}

    def register(self, leaf: TableLeaf) -> None:
        self._by_path[_norm_path(leaf.path)] = leaf

    def read_by(self, paths: Sequence[str]) -> TableLeaf:
        """The table a Parquet leaf with root ``paths`` reads."""
        found = [self._by_path.get(_norm_path(p)) for p in paths]
        if len(found) != 1 or found[0] is None:
            raise CaptureError(
                f"step reads {list(paths)}, which is not a table of this run: register it with run.source()"
            )
        return found[0]


def parquet_files(frame: DataFrame) -> list[str] | None:
    """The files of ``frame`` when it is a bare read of whole Parquet files
    that a copy reproduces exactly (see the module's docstring), else None."""
    plan = frame._jdf.queryExecution().analyzed()
    if plan.nodeName() != "LogicalRelation":
        return None
    try:
        relation = plan.relation()
        if relation.fileFormat().shortName() != "parquet" or relation.partitionSchema().length() != 0:
            return None
        options = _options(relation.options())
    except Py4JError:  # not a file relation (JDBC, in-memory, ...)
        return None
    if not copies_are_exact(options, frame.sparkSession.conf.get):
        return None
    return sorted(frame.inputFiles())


def _options(jmap: Any) -> dict[str, str]:
    """A Scala map of read options as a dict (keys lower-cased, as Spark compares them)."""
    found, entries = {}, jmap.iterator()
    while entries.hasNext():
        entry = entries.next()
        found[str(entry._1()).lower()] = str(entry._2())
    return found


def copies_are_exact(options: dict[str, str], conf: Any) -> bool:
    """Whether copies of the listed files read back are what Spark reads
    under ``options`` and the session's ``conf`` (``conf(key, default)``)."""
    for option, key in SKIPPING_OPTIONS.items():
        setting = options.pop(option, None)
        if setting is None:
            setting = conf(key, "false")
        if str(setting).strip().lower() == "true":
            return False
    return set(options) <= FILE_CHOOSING_OPTIONS


def parquet_parts(uris: Sequence[str] | None, columns: Sequence[str]) -> list[SourceFile] | None:
    """(filesystem, path, rows) of each file, when every file holds exactly
    the table's columns (a read with a narrower schema is written instead,
    so stored rows show only the table); else None."""
    if uris is None:
        return None
    parts = []
    for uri in uris:
        try:
            source_fs, path = pafs.FileSystem.from_uri(uri)
            with source_fs.open_input_file(path) as opened:
                metadata = pq.ParquetFile(opened).metadata
        except UNREADABLE as exc:
            logger.info("source file %s is read through Spark, not copied: %s", uri, exc)
            return None
        if set(metadata.schema.to_arrow_schema().names) != set(columns):
            return None
        parts.append(SourceFile(source_fs, path, metadata.num_rows))
    return parts


def copied_rows(run: RunRecorder, table_id: int, parts: Sequence[SourceFile]) -> int | None:
    """Copy ``parts`` as the positional rows of ``table_id``; the number of
    rows, or None (nothing left behind) when a file cannot be copied, for
    the caller to read the source through Spark instead."""
    try:
        return run.copy_positional_rows(table_id, parts)
    except UNREADABLE as exc:
        logger.info("source table %d is read through Spark, its files could not be copied: %s", table_id, exc)
        run.rows_destination(table_id).delete()
        return None


# -- a dataset an earlier run wrote (provplug.store.versions) -----------------------------
def linked_rows(run: RunRecorder, table: TableInfo, frame: DataFrame) -> tuple[int, RowRuns] | None:
    """When ``frame`` reads, whole, the files the latest committed write of
    the dataset the source ``table`` is left (same fingerprint), store the
    writing run's rows as ``table``'s, with the same row numbers, link the
    two by one aligned location edge (an op ``read:<name>`` of this run), and
    return (rows, their row numbers); else None: the source is a new version,
    stored from the files as any other source."""
    if not isinstance(run, StagedRun):
        return None
    files = parquet_files(frame)
    found = run.latest_version(table.name, _read_identity(frame)) if files is not None else None
    if found is None or files is None:
        return None
    writer, version = found
    if not _unchanged(version, files):
        logger.info("provplug: %s changed since run %s wrote it: a new source version", version.dataset, writer)
        return None
    written = _written_table(run, writer, version.table)
    if written is None or set(written.columns) != set(table.columns) or not _same_types(run, written, files):
        return None
    rows = _copy_stored_rows(run, writer, written.table_id, table.table_id)
    _record_link(run, table, written, version, writer, rows)
    return rows.size, rows


def _read_identity(frame: DataFrame) -> tuple[str, str] | None:
    """The dataset ``frame`` reads (a bare file read: see :func:`parquet_files`),
    for a source registered without one (``run.source(spark.read.parquet(...))``)."""
    identity = naming.relation_identity(frame.sparkSession, frame._jdf.queryExecution().analyzed())
    return None if identity is None else (identity.namespace, identity.name)


def _unchanged(version: WrittenVersion, files: Sequence[str]) -> bool:
    """The dataset's files are the ones the write left, and the read reads all its data files."""
    return (
        fingerprint(version.namespace, version.dataset) == version.files
        and relative_files(version.namespace, version.dataset, files) == version.data_files
    )


def _written_table(run: StagedRun, writer: str, table_id: int) -> TableInfo | None:
    """The writing run's table, when that run kept its rows."""
    tables = run.store.tables().to_pylist()
    record = next((t for t in tables if t["table_id"] == table_id and t["run_id"] == writer), None)
    if record is None or not record["stored_rows"]:
        return None
    return TableInfo(
        table_id, record["name"], writer, record["origin"], tuple(record["columns"]), record["rows"], True,
        record.get("namespace"), record.get("dataset"),
    )  # fmt: skip


def _stored_files(run: StagedRun, writer: str, table_id: int) -> list[str]:
    directory = run.store.path("runs", writer, ROWS, str(table_id))
    listing = run.store.fs.get_file_info(pafs.FileSelector(directory, recursive=False))
    return sorted(i.path for i in listing if i.type == pafs.FileType.File and not i.base_name.startswith(("_", ".")))


def _same_types(run: StagedRun, written: TableInfo, files: Sequence[str]) -> bool:
    """The user's files hold the stored rows' columns with the same types
    (a read of them gives what the stored rows give)."""
    stored = _stored_files(run, written.run_id, written.table_id)
    if not stored or not files:
        return False
    try:
        source_fs, path = pafs.FileSystem.from_uri(files[0])
        with source_fs.open_input_file(path) as opened:
            theirs = pq.ParquetFile(opened).schema_arrow
        with run.store.fs.open_input_file(stored[0]) as opened:
            ours = pq.ParquetFile(opened).schema_arrow
    except UNREADABLE:
        return False
    return all(theirs.field(c).type == ours.field(c).type for c in written.columns)


def _copy_stored_rows(run: StagedRun, writer: str, src_table: int, table_id: int) -> RowRuns:
    """Copy the writing run's stored rows of ``src_table`` as this run's
    rows of ``table_id``; their row numbers, ascending."""
    destination = run.rows_destination(table_id)
    fs = run.store.fs
    for path in _stored_files(run, writer, src_table):
        fs.copy_file(path, f"{destination.path}/{path.rsplit('/', 1)[-1]}")
    numbers = pq.read_table(destination.path, columns=[ROW_COLUMN], filesystem=fs).column(ROW_COLUMN)
    return RowRuns.from_rows(np.sort(numbers.to_numpy()))


def _record_link(
    run: StagedRun, table: TableInfo, written: TableInfo, version: WrittenVersion, writer: str, rows: RowRuns
) -> None:
    """The op ``read:<name>``: each cell of ``table`` is the same cell of the written table."""
    columns = {table.columns.index(c): [written.columns.index(c)] for c in table.columns}
    op_id = run.new_op_id()
    edge = location_edge(op_id, written.table_id, table.table_id, columns, rows)
    now = utc_now()
    params = {"dataset": f"{version.namespace}:{version.dataset}", "version_of_run": writer}
    run.record_op(
        OpInfo(op_id, f"read:{table.name}", run.run_id, "builtin", (written.table_id,), (table.table_id,),
               ("read",), params, now, now, edge.triple_count)
    )  # fmt: skip
    run.record_location_edge(edge)
    run.record_linked_read(
        LinkedRead(table.table_id, version.namespace, version.dataset, writer, written.table_id, op_id)
    )
