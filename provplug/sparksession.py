"""The embedded default engine: a local SparkSession, made only when needed;
and the Spark form of the store's Arrow schemas.

PySpark is imported only inside :func:`local_spark`: importing this module
starts nothing.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow as pa

# Spark's Python workers talk to their JVM over Unix domain sockets instead of
# local TCP (Spark 4.1+, POSIX): over TCP each Python task waits about 40 ms
# for its first batch (Nagle's algorithm meets delayed ACK), which is most of
# a capture writer job's fixed cost (docs/capturing.md, "What a step costs").
UNIX_SOCKETS_CONF = "spark.python.unix.domain.socket.enabled"
UNIX_SOCKETS = {UNIX_SOCKETS_CONF: "true"} if os.name == "posix" else {}

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    **UNIX_SOCKETS,
}


def local_spark(app_name: str = "provplug", master: str | None = None, **conf: str) -> Any:
    """Return the active SparkSession, or start a local one (UI off).

    ``PROVPLUG_SPARK_MASTER`` overrides the default ``local[*]`` so the same
    code runs against a cluster; ``conf`` adds or overrides Spark settings,
    e.g. ``local_spark("bench", "local[2]", **{"spark.driver.memory": "6g"})``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this interpreter
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.master(master or os.environ.get("PROVPLUG_SPARK_MASTER", "local[*]"))
    for key, value in {**DEFAULT_CONF, **conf}.items():
        builder = builder.config(key, value)
    session = builder.appName(app_name).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


# Spark SQL type names of the Arrow types the store's and the index's schemas use.
_SPARK_TYPES = {
    pa.int8(): "tinyint",
    pa.int16(): "smallint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.bool_(): "boolean",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.binary(): "binary",
}


def spark_type(arrow_type: pa.DataType) -> str:
    """The Spark SQL type (DDL) of ``arrow_type``: ``int64`` -> ``bigint``,
    ``list<int32>`` -> ``array<int>``, a UTC timestamp -> ``timestamp``."""
    if arrow_type in _SPARK_TYPES:
        return _SPARK_TYPES[arrow_type]
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return f"array<{spark_type(arrow_type.value_type)}>"
    if pa.types.is_timestamp(arrow_type):
        return "timestamp"
    raise TypeError(f"no Spark type for the Arrow type {arrow_type}")


def spark_ddl(arrow_schema: pa.Schema) -> str:
    """``arrow_schema`` as a Spark DDL schema string (``"src bigint, dst bigint, ..."``),
    for ``spark.read.schema(...)`` and ``createDataFrame([], ...)``: Spark
    reads the store's Parquet files with the types the Arrow schema gives them."""
    return ", ".join(f"`{_quoted(f.name)}` {spark_type(f.type)}" for f in arrow_schema)


def _quoted(name: str) -> str:
    return name.replace("`", "``")
