"""Registers the PySpark capture adapter. PySpark is imported only when used."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from provplug import hookimpl
from provplug.errors import CaptureError

if TYPE_CHECKING:
    from provplug.plugin.connection import Connection
    from provplug.plugin.protocols import AdapterSession, CaptureRun, RunRecorder


class SparkAdapter:
    """Captures steps whose inputs and outputs are PySpark DataFrames."""

    name = "spark"
    reduces = True  # applies provenance reductions (provplug.reduce) to its sources

    def accepts(self, engine: object) -> bool:
        # Compare by class name first so a non-Spark engine never imports pyspark.
        # A Spark Connect session is accepted here so that open() refuses it by name.
        if type(engine).__name__ != "SparkSession":
            return False
        from pyspark.sql import SparkSession

        return isinstance(engine, SparkSession) or is_spark_connect(engine)

    def open(self, engine: Any, run: RunRecorder) -> AdapterSession:
        if is_spark_connect(engine):
            raise CaptureError(SPARK_CONNECT_REFUSAL)
        from .session import SparkCaptureSession

        return SparkCaptureSession(engine, run)


# Spark Connect sends plans to a server as protobuf: the client holds no
# Catalyst plan for provplug to rewrite and no JVM to run its jobs on.
SPARK_CONNECT_REFUSAL = (
    "provplug cannot capture through Spark Connect (a sc:// session): its plans live on the Connect server, out "
    "of provplug's reach; run the pipeline with a classic SparkSession (SparkSession.builder.master(...), "
    "spark-submit, or unset SPARK_REMOTE) to capture it"
)


def is_spark_connect(engine: object) -> bool:
    """Whether ``engine`` is a Spark Connect session or DataFrame (told by its
    class's module: importing Spark Connect needs grpc, which may be missing)."""
    return type(engine).__module__.startswith("pyspark.sql.connect")


class SparkWriteInterceptor:
    """Captures every ``DataFrame`` write (and ``writeTo``/``saveAsTable``) as a step."""

    name = "spark-writes"

    def intercept(self, start_run: Callable[[Any], CaptureRun]) -> contextlib.AbstractContextManager[None]:
        return _intercepting(start_run)


@contextlib.contextmanager
def _intercepting(start_run: Callable[[Any], CaptureRun]) -> Iterator[None]:
    from .scripts import WriteTracer, intercepted_writes
    from .unixsockets import for_contexts_started_inside

    with for_contexts_started_inside(), _connect_refused_after(intercepted_writes(WriteTracer(start_run))):
        yield


def connect_in_use() -> bool:
    """Whether this process's Spark is Spark Connect: ``SPARK_REMOTE`` names a
    server (the builder then makes Connect sessions), or pyspark has switched
    to Connect mode."""
    return bool(os.environ.get("SPARK_REMOTE")) or "SPARK_CONNECT_MODE_ENABLED" in os.environ


@contextlib.contextmanager
def _connect_refused_after(intercepting: contextlib.AbstractContextManager[None]) -> Iterator[None]:
    """Intercept writes; when the block ends and Spark was Spark Connect, refuse
    by name: Connect's writes never pass through the classic writer provplug
    intercepts, so they would go uncaptured without a word. The block's own
    writes are done (a script ran to its end); only the capture fails."""
    with intercepting:
        yield
    if connect_in_use():
        raise CaptureError(SPARK_CONNECT_REFUSAL)


@hookimpl
def provplug_register_write_interceptors(register: Callable[[Any], None]) -> None:
    register(SparkWriteInterceptor())


@hookimpl
def provplug_filesystem_settings(engine: object) -> Connection | None:
    if type(engine).__name__ != "SparkSession" or is_spark_connect(engine):
        return None
    from .fssettings import filesystem_settings

    return filesystem_settings(engine)


@hookimpl
def provplug_register_adapters(register: Callable[[Any], None]) -> None:
    register(SparkAdapter())
