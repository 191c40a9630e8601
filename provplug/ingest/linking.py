"""Linking a source to the dataset version an earlier run wrote (issue 26).

A run that reads a dataset (an OpenLineage identity) finds the latest
committed write of it (:mod:`provplug.store.versions`). When the dataset's
files are still the ones that write left (the same fingerprint: every file's
path, size and modification time) and the read reads all its data files
with the written columns and types, the read is that version: the writing
run's stored rows are copied as the source table's rows *with their row
numbers*, and one aligned location edge of an op ``read:<name>`` of this run
says each cell of the source is the same cell of the written table. So
lineage runs from the reading run's cells into the writing run's, through
the ordinary triple scan, for every query method and the index alike.
Anything else (no earlier write, files changed outside provplug, a narrower
or retyped read, a writing run that kept no rows) is a new source version.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from provplug.location import RowRuns, location_edge
from provplug.model import OpInfo, TableInfo, utc_now
from provplug.plugin.connection import filesystem_of
from provplug.schema import ROW_COLUMN
from provplug.store.versions import LinkedRead, WrittenVersion, fingerprint, relative_files


class StagedRun(Protocol):
    """What linking needs of the run (:class:`provplug.ingest.recorder.StagedRun`)."""

    store: Any

    @property
    def run_id(self) -> str: ...

    def latest_version(
        self, name: str, identity: tuple[str, str] | None = None
    ) -> tuple[str, WrittenVersion] | None: ...

    def rows_destination(self, table_id: int) -> Any: ...

    def new_op_id(self) -> int: ...

    def record_op(self, op: OpInfo) -> None: ...

    def record_location_edge(self, edge: Any) -> None: ...

    def record_linked_read(self, read: LinkedRead) -> None: ...


logger = logging.getLogger(__name__)
ROWS = "rows"  # a run's rows directory (provplug.ingest.recorder.ROWS)
UNREADABLE = (pa.ArrowException, OSError)


def link_version(
    run: StagedRun, table: TableInfo, files: Sequence[str], identity: tuple[str, str] | None
) -> RowRuns | None:
    """Store the version ``files`` are as the rows of the source ``table``
    and link it (see the module's docstring); its row numbers, or None."""
    found = run.latest_version(table.name, identity)
    if found is None:
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
    return rows


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
        source_fs, path = filesystem_of(files[0])
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
