"""The embedded default engine: a local SparkSession, made only when needed."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_spark(app_name: str = "provplug", master: str | None = None) -> Any:
    """Return the active SparkSession, or start a local one (UI off).

    ``PROVPLUG_SPARK_MASTER`` overrides the default ``local[*]`` so the same
    code runs against a cluster.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this interpreter
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    session = (
        SparkSession.builder.master(master or os.environ.get("PROVPLUG_SPARK_MASTER", "local[*]"))
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
