"""Registers the PySpark capture adapter. PySpark is imported only when used."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provplug import hookimpl

if TYPE_CHECKING:
    from provplug.plugin.protocols import AdapterSession, CaptureRun, RunRecorder


class SparkAdapter:
    """Captures steps whose inputs and outputs are PySpark DataFrames."""

    name = "spark"
    reduces = True  # applies provenance reductions (provplug.reduce) to its sources

    def accepts(self, engine: object) -> bool:
        # Compare by class name first so a non-Spark engine never imports pyspark.
        if type(engine).__name__ != "SparkSession":
            return False
        from pyspark.sql import SparkSession

        return isinstance(engine, SparkSession)

    def open(self, engine: Any, run: RunRecorder) -> AdapterSession:
        from .session import SparkCaptureSession

        return SparkCaptureSession(engine, run)


class SparkWriteInterceptor:
    """Captures every ``DataFrame`` write (and ``writeTo``/``saveAsTable``) as a step."""

    name = "spark-writes"

    def intercept(self, start_run: Callable[[Any], CaptureRun]) -> contextlib.AbstractContextManager[None]:
        from .scripts import WriteTracer, intercepted_writes

        return intercepted_writes(WriteTracer(start_run))


@hookimpl
def provplug_register_write_interceptors(register: Callable[[Any], None]) -> None:
    register(SparkWriteInterceptor())


@hookimpl
def provplug_register_adapters(register: Callable[[Any], None]) -> None:
    register(SparkAdapter())
