"""The stored tables a step may read, and the files of a Parquet source.

* :class:`Tables`: every table of the run (sources and step outputs) is
  stored once under ``rows/<table>/`` and read back from there; a step's plan
  reads it as a Parquet leaf, which the rewrite (:mod:`.rules`,
  ``table_read``) finds here by its path.
* :func:`parquet_files` and :func:`parquet_parts`: a source that is a bare
  read of Parquet files is copied into the store instead of being rewritten
  (its row numbers are file offset + position, see :mod:`provplug.schema`);
  these list its files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame

from provplug.errors import CaptureError
from provplug.plugin.writers import SourceFile


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
    """The files of ``frame`` when it is a bare read of Parquet files (no
    partition columns, no operation on top), else None."""
    plan = frame._jdf.queryExecution().analyzed()
    if plan.nodeName() != "LogicalRelation":
        return None
    try:
        relation = plan.relation()
        if relation.fileFormat().shortName() != "parquet" or relation.partitionSchema().length() != 0:
            return None
    except Py4JError:  # not a file relation (JDBC, in-memory, ...)
        return None
    return sorted(frame.inputFiles())


def parquet_parts(uris: Sequence[str] | None, columns: Sequence[str]) -> list[SourceFile] | None:
    """(filesystem, path, rows) of each file, when every file holds exactly
    the table's columns (a read with a narrower schema is written instead,
    so stored rows show only the table); else None."""
    if uris is None:
        return None
    parts = []
    for uri in uris:
        source_fs, path = pafs.FileSystem.from_uri(uri)
        metadata = pq.ParquetFile(source_fs.open_input_file(path)).metadata
        if set(metadata.schema.to_arrow_schema().names) != set(columns):
            return None
        parts.append(SourceFile(source_fs, path, metadata.num_rows))
    return parts
