"""Python workers over Unix domain sockets for the SparkContext a captured
script starts.

A writer job's Python task waits about 40 ms for its first batch when the
executor JVM talks to it over local TCP (Nagle's algorithm meets the worker's
delayed ACK); Spark's Unix domain sockets (``spark.python.unix.domain.socket.
enabled``, Spark 4.1+) do not wait. ``provplug run`` starts before the
script's SparkContext, so the context it makes gets that setting as a
default through ``PYSPARK_SUBMIT_ARGS`` (how PySpark passes settings to the
JVM it launches): the script's own ``.config(...)`` still wins, a context
already running is left as it is, and nothing but the workers' transport
changes. A session the user made before capturing keeps its own setting
(docs/capturing.md, "What a step costs").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from provplug.sparksession import UNIX_SOCKETS

SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
SHELL = "pyspark-shell"  # what PySpark's own PYSPARK_SUBMIT_ARGS ends with


@contextlib.contextmanager
def for_contexts_started_inside() -> Iterator[None]:
    """While the block runs, a SparkContext it starts runs its Python workers
    over Unix domain sockets, unless the settings already name them."""
    from pyspark import SparkContext

    submitted = os.environ.get(SUBMIT_ARGS)
    if SparkContext._active_spark_context is not None or not UNIX_SOCKETS or _named(submitted):
        yield
        return
    settings = " ".join(f"--conf {key}={value}" for key, value in UNIX_SOCKETS.items())
    os.environ[SUBMIT_ARGS] = f"{settings} {submitted or SHELL}"
    try:
        yield
    finally:
        if submitted is None:
            os.environ.pop(SUBMIT_ARGS, None)
        else:
            os.environ[SUBMIT_ARGS] = submitted


def _named(submitted: str | None) -> bool:
    return submitted is not None and any(key in submitted for key in UNIX_SOCKETS)
