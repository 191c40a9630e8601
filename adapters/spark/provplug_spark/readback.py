"""Reading the store's rows back during a capture, on storage Spark's JVM
cannot reach (issue 27).

A capture hands downstream code DataFrames read back from the rows it
stored. Spark reads Parquet through Hadoop's filesystems, and the pyspark
wheel ships no connector for ``s3://`` (nor ``gs://``, ``abfs://``): there the
rows are read by a Python Data Source (Spark 4's
:class:`pyspark.sql.datasource.DataSource`) whose tasks read the files with
pyarrow, through the store's own filesystem (its URI, with the endpoint and
region in its query; credentials from the executors' environment, as
pyarrow finds them). Where the JVM has a filesystem for the store's scheme
(a local path, ``hdfs://`` with Hadoop's client, ``s3a://`` with
hadoop-aws), Spark's own Parquet reader is used, as before.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from provplug import schema
from provplug.errors import CaptureError

FORMAT = "provplug_store_rows"


def read_parquet(spark: SparkSession, store_uri: str, spark_path: str, data_schema: StructType) -> DataFrame:
    """The Parquet files under ``spark_path`` (a folder of the store at
    ``store_uri``, as Spark addresses it) with ``data_schema``: Spark's own
    reader when its JVM reaches the store, else the Python Data Source."""
    if jvm_reaches(spark, spark_path):
        return spark.read.schema(data_schema).parquet(spark_path)
    spark.dataSource.register(StoreRowsSource)
    return (
        spark.read.format(FORMAT)
        .schema(data_schema)
        .option("store", store_uri)
        .option("path", spark_path.split("://", 1)[-1])
        .load()
    )


def jvm_reaches(spark: SparkSession, spark_path: str) -> bool:
    """Whether Spark's JVM has a Hadoop filesystem for the path's scheme."""
    scheme = spark_path.split("://", 1)[0] if "://" in spark_path else "file"
    return _jvm_has_filesystem(spark, scheme.lower())


@functools.lru_cache(maxsize=16)
def _jvm_has_filesystem(spark: SparkSession, scheme: str) -> bool:
    if scheme in ("file", "local"):
        return True
    jvm: Any = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
    except Exception:  # py4j: Hadoop's UnsupportedFileSystemException ("No FileSystem for scheme")
        return False
    return True


class StoreRowsSource(DataSource):
    """``spark.read.format("provplug_store_rows")``: the Parquet files of one
    folder of a store (options ``store``: the store URI, ``path``: the folder
    on its filesystem), read with pyarrow in the tasks, one task per file."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def reader(self, schema: StructType) -> DataSourceReader:
        return StoreRowsReader(self.options["store"], self.options["path"], schema)


class FilePartition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class StoreRowsReader(DataSourceReader):
    def __init__(self, store_uri: str, folder: str, schema: StructType) -> None:
        self.store_uri, self.folder, self.schema = store_uri, folder, schema

    def partitions(self) -> list[InputPartition]:
        files = _parquet_files(_filesystem(self.store_uri), self.folder)
        return [FilePartition(f) for f in files]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        from pyspark.sql.pandas.types import to_arrow_schema

        wanted = to_arrow_schema(self.schema)
        fs = _filesystem(self.store_uri)
        stored = pq.read_schema(partition.path, filesystem=fs).names
        table = pq.read_table(partition.path, columns=[n for n in wanted.names if n in stored], filesystem=fs)
        if schema.ROW_COLUMN in wanted.names and schema.ROW_COLUMN not in stored:
            table = _numbered(table, partition.path)
        # Spark takes the batches only in exactly its schema: nullable fields, no view types.
        yield from table.select(wanted.names).cast(wanted).to_batches()


def _numbered(table: pa.Table, path: str) -> pa.Table:
    """A positional copy's rows with their row numbers: the offset in the
    file's name plus the position (what a file relation's ``_metadata`` gives
    Spark's own reader, which a Python Data Source has not)."""
    offset = schema.positional_offset(path)
    if offset is None:
        raise CaptureError(f"{path} has no {schema.ROW_COLUMN} column and is not a positional copy")
    return table.append_column(schema.ROW_COLUMN, pa.array(np.arange(offset, offset + table.num_rows), pa.int64()))


def _filesystem(store_uri: str) -> pafs.FileSystem:
    from provplug.plugin.writers import filesystem_for

    return filesystem_for(store_uri)


def _parquet_files(fs: pafs.FileSystem, folder: str) -> list[str]:
    """The data files under ``folder``, skipping ``_``- and ``.``-named ones (writers' temporaries), as Spark does."""
    infos = fs.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
    return sorted(
        i.path
        for i in infos
        if i.type == pafs.FileType.File
        and i.path.endswith(".parquet")
        and not any(p.startswith(("_", ".")) for p in posixpath.relpath(i.path, folder).split("/"))
    )


def read_back_paths(leaf: Any) -> list[str] | None:
    """The folder a plan leaf reads when it is a read-back through
    :class:`StoreRowsSource` (a ``DataSourceV2Relation`` with its options),
    as a file relation's root paths name it; None for any other leaf. The
    plan walkers that find the run's tables by their root paths ask this too."""
    if leaf.nodeName() != "DataSourceV2Relation":
        return None
    try:
        options = leaf.options()
        ours = options.containsKey("store") and options.containsKey("path")
        return [str(options.get("path"))] if ours else None
    except Exception:  # py4j: a relation of another source, without these options
        return None
