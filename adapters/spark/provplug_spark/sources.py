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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from provplug.errors import CaptureError
from provplug.ingest.recorder import StagedRun
from provplug.location import RowRuns
from provplug.model import TableInfo
from provplug.plugin.connection import filesystem_of
from provplug.plugin.protocols import RunRecorder
from provplug.plugin.writers import PositionalCopy, SourceFile, make_copies, positional_copies

from . import naming
from .shared import is_in_process_master

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
    files: tuple[str, ...] = ()  # a positional table's copies (their names hold their first rows), when known
    rows: int | None = None  # its row count, once known: bounds the rows of plans over it


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
            source_fs, path = filesystem_of(uri)
            with source_fs.open_input_file(path) as opened:
                metadata = pq.ParquetFile(opened).metadata
        except UNREADABLE as exc:
            logger.info("source file %s is read through Spark, not copied: %s", uri, exc)
            return None
        if set(metadata.schema.to_arrow_schema().names) != set(columns):
            return None
        parts.append(SourceFile(source_fs, path, metadata.num_rows))
    return parts


@dataclasses.dataclass(frozen=True)
class Copied:
    """A source stored as positional copies: its rows, and each copy's file
    name (which holds its first row number, :func:`provplug.schema.positional_name`)."""

    rows: int
    files: tuple[str, ...]


def copied_rows(
    run: RunRecorder,
    table_id: int,
    parts: Sequence[SourceFile],
    copy: Callable[[list[PositionalCopy]], None] | None = None,
) -> Copied | None:
    """Copy ``parts`` as the positional rows of ``table_id`` (with ``copy``:
    :func:`copy_sources`; else in this process); what was copied, or
    None (nothing left behind) when a file cannot be copied, for the caller
    to read the source through Spark instead."""
    destination = run.rows_destination(table_id)
    try:
        copies, rows = positional_copies(destination, parts)
        destination.create()
        if copies:
            (copy or make_copies)(copies)
    except (*UNREADABLE, Py4JJavaError) as exc:  # (a task's pyarrow error comes as a Py4JJavaError)
        logger.info("source table %d is read through Spark, its files could not be copied: %s", table_id, exc)
        destination.delete()
        return None
    return Copied(rows, tuple(c.name for c in copies))


def copied_tables(
    run: RunRecorder,
    parts: dict[int, list[SourceFile]],
    copy: Callable[[list[PositionalCopy]], None] | None = None,
) -> dict[int, Copied | None]:
    """:func:`copied_rows` of several tables (table id -> its files), their
    copies made by one call of ``copy`` (on a cluster one Spark job, where a
    job per table costs a job's start-up each). When that fails, each table is copied on
    its own, so that a file that cannot be copied sends only its own table
    through Spark."""
    if len(parts) <= 1:
        return {table_id: copied_rows(run, table_id, files, copy) for table_id, files in parts.items()}
    planned: dict[int, tuple[list[PositionalCopy], int]] = {}
    try:
        for table_id, files in parts.items():
            destination = run.rows_destination(table_id)
            planned[table_id] = positional_copies(destination, files)
            destination.create()
        every = [c for copies, _ in planned.values() for c in copies]
        if every:
            (copy or make_copies)(every)
    except (*UNREADABLE, Py4JJavaError) as exc:
        logger.info("source tables %s are copied one by one: %s", sorted(parts), exc)
        for table_id in planned:
            run.rows_destination(table_id).delete()
        return {table_id: copied_rows(run, table_id, files, copy) for table_id, files in parts.items()}
    return {table_id: Copied(rows, tuple(c.name for c in copies)) for table_id, (copies, rows) in planned.items()}


# Spark's job group of the copies (visible in Spark's UI and status tracker).
COPY_JOB_GROUP = "provplug-source-copies"


def copy_sources(spark: SparkSession, copies: list[PositionalCopy]) -> None:
    """Make ``copies``: on the executors (:func:`copy_on_executors`), or,
    under a ``local`` master, where the executors are this application's own
    process on this machine, here, in as many threads as the application has
    cores: the same bytes on the same disks, without a Spark job's start
    (about 0.1 s, against ~10 ms for the copies of TPC-H SF 0.1's 36 MB)."""
    if is_in_process_master(str(spark.sparkContext.master)):
        copy_in_threads(copies, spark.sparkContext.defaultParallelism)
    else:
        copy_on_executors(spark, copies)


def copy_in_threads(copies: list[PositionalCopy], threads: int) -> None:
    """Make ``copies`` in this process, at most ``threads`` at a time (pyarrow
    copies outside the GIL); the first copy's error is raised."""
    if len(copies) <= 1 or threads <= 1:
        make_copies(copies)
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(copies)), thread_name_prefix="provplug-copy") as pool:
        list(pool.map(PositionalCopy.make, copies))


def copy_on_executors(spark: SparkSession, copies: list[PositionalCopy]) -> None:
    """Make ``copies`` in Spark tasks: a source's bytes go from its storage to
    the store's through the executors, never the driver. As many tasks as
    the application has cores (at most one a file): a Python task costs
    tens of milliseconds to start, so a task a file would cost more than
    the copying of small files, and as many as the cores keeps the copies
    of large ones parallel."""
    context = spark.sparkContext
    saved = {key: context.getLocalProperty(key) for key in _GROUP_PROPERTIES}
    context.setJobGroup(COPY_JOB_GROUP, f"provplug: copy {len(copies)} source file(s) into the store")
    try:
        tasks = max(1, min(len(copies), context.defaultParallelism))
        context.parallelize(copies, tasks).foreach(PositionalCopy.make)
    finally:
        for key, value in saved.items():
            context.setLocalProperty(key, value)  # type: ignore[arg-type]  # None clears it


_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


# -- a dataset an earlier run wrote (provplug.ingest.linking) -----------------------------
def linked_rows(
    run: RunRecorder, table: TableInfo, frame: DataFrame, files: list[str] | None
) -> tuple[int, RowRuns] | None:
    """When ``frame`` reads, whole, the files the latest committed write of
    the dataset the source ``table`` is left (same fingerprint), the run
    stores the writing run's rows as ``table``'s, with the same row numbers,
    linked to them (:func:`provplug.ingest.linking.link_version`): (rows,
    their row numbers). Else None: the source is a new version, stored from
    its files as any other source. ``files``: :func:`parquet_files` of ``frame``."""
    if not isinstance(run, StagedRun) or files is None:
        return None
    rows = run.link_version(table, files, _read_identity(frame))
    return None if rows is None else (rows.size, rows)


def _read_identity(frame: DataFrame) -> tuple[str, str] | None:
    """The dataset ``frame`` reads (a bare file read: see :func:`parquet_files`),
    for a source registered without one (``run.source(spark.read.parquet(...))``)."""
    identity = naming.relation_identity(frame.sparkSession, frame._jdf.queryExecution().analyzed())
    return None if identity is None else (identity.namespace, identity.name)
