"""The embedded default engine: a local SparkSession, made only when needed."""

from __future__ import annotations

import os
import sys
from typing import Any

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
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
