"""The user's Parquet files written by the step's own writer job.

One execution (:mod:`.replay`) writes the user's files from the stored rows:
after the step's writer job, a second Spark job reads them back and writes
them as the user asked. For the most common write, a plain Parquet write to
a local path, the writer job's tasks write the user's files themselves,
from the very Arrow batches whose rows they store: the same computation, and
one Spark job (plus its commit) per write fewer.

Only what provplug can write exactly as Spark would (row for row, with
Spark's schema in each footer so that Spark reads its types back) is
written directly: ``parquet(path)`` or ``format("parquet").save(path)``
under a ``local`` master, in mode overwrite or append (or the default
errorifexists on a path that does not exist), with no partitioning,
bucketing or sorting, no option but ``compression`` (snappy, gzip, zstd or
none) and columns of types Spark writes to Parquet. Anything else is
replayed by Spark (:mod:`.replay`).

The files follow Spark's commit: tasks write into a staging folder inside
the target (``_provplug_temporary-<uuid>``: readers skip names starting with
``_``), each attempt its own file; once the job has succeeded the driver
keeps the attempts Spark used, clears the target in overwrite mode, moves
the files in (``part-<partition>-<uuid>-c000.<codec>.parquet``), writes one
empty file with the schema when no task had a row (as Spark does), and
``_SUCCESS``. A job that fails leaves nothing behind: the staging folder
goes, and so does the target when the write created it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from provplug.plugin.writers import OutputFileWriter

from .replay import CALLS, Call, recorded_mode

DIRECT = "direct"  # the dataset name a task reports the user's files under
SPARK_SCHEMA_KEY = "org.apache.spark.sql.parquet.row.metadata"  # Spark reads its own types back from it
SPARK_VERSION_KEY = "org.apache.spark.version"
STAGING_PREFIX = "_provplug_temporary-"
# Spark's Parquet codec names -> pyarrow's, and the infix of Spark's file names.
CODECS: dict[str, tuple[str, str]] = {
    "snappy": ("snappy", ".snappy"),
    "gzip": ("gzip", ".gz"),
    "zstd": ("zstd", ".zstd"),
    "none": ("none", ""),
    "uncompressed": ("none", ""),
}
MODES = {"overwrite", "append", "error", "errorifexists", "default"}
ATOMIC_TYPES = (
    T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
    T.StringType, T.BinaryType, T.DateType, T.TimestampType, T.TimestampNTZType, T.DecimalType,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class DirectFiles:
    """A write of the user's Parquet files by the writer job's tasks (picklable)."""

    target: str  # local absolute path of the written folder
    job: str  # one uuid per write, in every file name
    codec: str  # pyarrow's compression name
    suffix: str  # ``.snappy.parquet``, ...
    overwrite: bool
    spark_schema: str  # the written DataFrame's schema, as Spark's JSON
    spark_version: str
    created_target: bool = False  # set by prepare(): the target did not exist before

    @property
    def staging(self) -> str:
        return os.path.join(self.target, STAGING_PREFIX + self.job)

    def attempt_file(self, partition: int, attempt: int) -> str:
        return os.path.join(self.staging, f"part-{partition:05d}-{self.job}-a{attempt}{self.suffix}")

    def final_name(self, partition: int) -> str:
        return f"part-{partition:05d}-{self.job}-c000{self.suffix}"


def direct_files(writer: Any, terminal: str, arguments: Mapping[str, Any], frame: DataFrame) -> DirectFiles | None:
    """How the writer job writes the user's files for ``writer.<terminal>(**arguments)``,
    or None when Spark must write them (see the module's conditions)."""
    calls: list[Call] | None = getattr(writer, CALLS, None)
    mode = recorded_mode(writer, arguments)
    spark = frame.sparkSession
    if calls is None or terminal not in ("parquet", "save") or not str(spark.sparkContext.master).startswith("local"):
        return None
    settings = _settings(calls, terminal, arguments)
    if settings is None or mode is None:
        return None
    fmt, options, path = settings
    target = _local_path(path)
    if fmt != "parquet" or mode not in MODES or set(options) - {"compression"} or target is None:
        return None
    if os.path.lexists(target) and (mode not in ("overwrite", "append") or not os.path.isdir(target)):
        return None  # Spark's own error (a path that exists), or a file where a folder goes
    if not _writable_types(frame.schema):
        return None
    conf = spark.conf
    codec = CODECS.get(str(options.get("compression") or conf.get("spark.sql.parquet.compression.codec")).lower())
    if codec is None or str(conf.get("spark.sql.files.maxRecordsPerFile")) not in ("0", "None"):
        return None
    return DirectFiles(
        target, str(uuid.uuid4()), codec[0], codec[1] + ".parquet", mode == "overwrite",
        frame.schema.json(), spark.version,
    )  # fmt: skip


def _settings(
    calls: Sequence[Call], terminal: str, arguments: Mapping[str, Any]
) -> tuple[str, dict[str, Any], Any] | None:
    """(format, options, path) of a path write configured only by
    mode/format/option(s) calls, or None."""
    fmt, options = "parquet" if terminal == "parquet" else None, {}
    for call in calls:
        if call.method == "mode" and len(call.args) == 1 and not call.kwargs:
            continue  # recorded_mode
        elif call.method == "format" and len(call.args) == 1 and terminal == "save":
            fmt = str(call.args[0]).lower()
        elif call.method == "option" and len(call.args) == 2 and not call.kwargs:
            options[str(call.args[0]).lower()] = call.args[1]
        elif call.method == "options" and not call.args:
            options.update({str(k).lower(): v for k, v in call.kwargs.items()})
        else:  # partitionBy, bucketBy, sortBy, clusterBy: Spark lays the files out
            return None
    extra = dict(arguments.get("options") or {})  # save(..., **options)
    options.update({str(k).lower(): v for k, v in extra.items()})
    if arguments.get("partitionBy"):
        return None
    if arguments.get("format"):
        fmt = str(arguments["format"]).lower()
    if arguments.get("compression"):
        options["compression"] = arguments["compression"]
    return (fmt or "", options, arguments.get("path"))


def _local_path(path: object) -> str | None:
    """The absolute local path Spark would write ``path`` to, or None for
    another filesystem (or several paths)."""
    if not isinstance(path, str) or not path:
        return None
    if path.startswith("file:"):
        path = "/" + path.removeprefix("file:").lstrip("/")
    elif "://" in path or path.startswith(("hdfs:", "s3a:", "s3:", "gs:", "abfs")):
        return None
    return os.path.abspath(path)


def _writable_types(data_type: T.DataType) -> bool:
    """Only types Spark writes to Parquet and reads back as they were."""
    if isinstance(data_type, T.StructType):
        return all(_writable_types(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _writable_types(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _writable_types(data_type.keyType) and _writable_types(data_type.valueType)
    return isinstance(data_type, ATOMIC_TYPES)


# -- the driver: before and after the job ------------------------------------------------
def prepare(direct: DirectFiles) -> DirectFiles:
    """Make the staging folder (and the target, noting that the write made it)."""
    created = not os.path.exists(direct.target)
    os.makedirs(direct.staging)
    return dataclasses.replace(direct, created_target=created)


def finish(direct: DirectFiles, reported: Sequence[str]) -> None:
    """Commit the files of the attempts Spark used (``reported``) into the target."""
    kept = {os.path.basename(p) for p in reported}
    if direct.overwrite:
        for entry in os.scandir(direct.target):
            if entry.path != direct.staging:
                _remove(entry.path)
    if not kept:
        _empty_file(direct, os.path.join(direct.staging, direct.final_name(0)))
        kept = {direct.final_name(0)}
    for name in sorted(kept):
        partition = int(name.split("-", 2)[1])
        os.replace(os.path.join(direct.staging, name), os.path.join(direct.target, direct.final_name(partition)))
    shutil.rmtree(direct.staging)
    Path(direct.target, "_SUCCESS").touch()


def abandon(direct: DirectFiles) -> None:
    """Leave nothing of a write whose job failed."""
    shutil.rmtree(direct.staging, ignore_errors=True)
    if direct.created_target:
        shutil.rmtree(direct.target, ignore_errors=True)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def _empty_file(direct: DirectFiles, path: str) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(T.StructType.fromJson(json.loads(direct.spark_schema)))
    OutputFileWriter(path, direct.codec, _metadata(direct)).empty(arrow)


def _metadata(direct: DirectFiles) -> dict[str, str]:
    return {SPARK_SCHEMA_KEY: direct.spark_schema, SPARK_VERSION_KEY: direct.spark_version}


# -- the tasks ---------------------------------------------------------------------------
def task_writer(direct: DirectFiles, partition: int, attempt: int) -> OutputFileWriter:
    """One task attempt's file of the user's rows (opened at its first row)."""
    return OutputFileWriter(direct.attempt_file(partition, attempt), direct.codec, _metadata(direct))
