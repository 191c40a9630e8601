"""Capture of unmodified PySpark scripts: every DataFrame write is a step.

While :func:`intercepted_writes` is installed, the write methods of PySpark's
``DataFrameWriter`` (``save``, ``parquet``, ``csv``, ``json``, ``orc``,
``text``, ``saveAsTable``, ``insertInto``) and ``DataFrameWriterV2``
(``create``, ``replace``, ``createOrReplace``, ``append``, ``overwrite``,
``overwritePartitions``) hand the written DataFrame to a :class:`WriteTracer`
before doing the real write, unchanged. This module is the only place that
patches PySpark; the originals are put back when the block ends, however it
ends. ``SparkSession.stop`` is wrapped too, so that a script that stops its
session at the end lets the run's background jobs finish first.

A write is captured as the step ``write:<name>`` whose one output table
``<name>`` is the written dataset, named by the readable alias of its
identity (:mod:`.naming`: the catalog table's name, or the path's last
component that says what the data is — ``/jobs/report/output`` is
``report``), which the run records with the table. Its input tables are found in the
written plan, at write time, and nothing is captured for reads no write uses:

* a leaf that reads files (Parquet, CSV, JSON, ...) or a catalog table is a
  source table, registered on its first use (named alike: month folders
  read by a glob are their folder's name; another dataset of the same name
  is told apart by its identity, the same dataset twice gets ``-2``) and shared by
  every later write that reads it with the same columns;
* a leaf that reads a path or table an earlier write of the run wrote is that
  write's output table: lineage crosses writes. (A DataFrame written and then
  used again in memory is not a read of what was written: a later write over
  it derives from the sources its plan reads.) A path written twice links to
  its last write.
* rows the script built in the driver (``createDataFrame`` of local data, a
  leaf the step capture would refuse) are a source named
  ``<first write that reads them>-input``; literal rows (``range``, SQL
  ``VALUES``) have no parents, as in any step.

Each such leaf is replaced by a fresh read of the table's stored rows, with
the leaf's own columns (cast to its types), and the resulting DataFrame goes
through the ordinary capture of a step (:meth:`provplug.ingest.capture.ActiveRun.call_step`).
The real write then writes the user's own DataFrame, exactly as without
provplug (the capture is one more job over the same plan). The run is
started by the first write, on that DataFrame's SparkSession (a script
creates its own), through ``start_run``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.readwriter import DataFrameWriter, DataFrameWriterV2

from provplug.errors import CaptureError
from provplug.model import StepInfo
from provplug.plugin.protocols import CaptureRun

from . import naming
from ._jvm import Catalyst, path_key
from .session import SparkCaptureSession

# DataFrameWriter method -> its argument naming what it writes (a V2 writer is named at writeTo)
WRITER_METHODS: dict[str, str] = {
    "save": "path",
    "parquet": "path",
    "csv": "path",
    "json": "path",
    "orc": "path",
    "text": "path",
    "saveAsTable": "name",
    "insertInto": "tableName",
}
TABLE_METHODS = {"saveAsTable", "insertInto"}
V2_METHODS = ("create", "replace", "createOrReplace", "append", "overwrite", "overwritePartitions")
V2_TABLE = "_provplug_table"  # where a patched DataFrameWriterV2 keeps the table it writes


def _as_written(frame: DataFrame) -> DataFrame:
    """A write's step: the written DataFrame itself."""
    return frame


class WriteTracer:
    """Turns each DataFrame write into a step of one capture run, started by
    the first write through ``start_run``. Writes from several threads are
    captured one at a time (the real writes run concurrently)."""

    def __init__(self, start_run: Callable[[SparkSession], CaptureRun]) -> None:
        self._start_run = start_run
        self._lock = threading.RLock()
        self._session: SparkCaptureSession | None = None
        self._sources: dict[str, int] = {}  # what a leaf reads -> its source table
        self._written: dict[str, int] = {}  # what a write wrote -> its output table
        self._aliases = naming.Aliases()

    # -- a write ---------------------------------------------------------------
    def on_write(self, df: DataFrame, target: str | None, is_table: bool, write: Callable[[], Any]) -> Any:
        """Capture the write of ``df`` to ``target`` as a step, then ``write()``."""
        with self._lock:
            run = self._start_run(df.sparkSession)
            session = self._bound(run, df.sparkSession)
            name = self._unique(*_dataset_name(session.rewriter.jvm, target, is_table))
            traced = self._traced(session, df, name)
            step = StepInfo(f"write:{name}", (), (name,), {"dataset": target or ""})
            output = run.call_step(step, _as_written, (traced,), {})
        result = write()
        key = self._written_key(session.rewriter.jvm, df.sparkSession, target, is_table)
        if key is not None:
            with self._lock:
                self._written[key] = output.table_id
        return result

    def _bound(self, run: CaptureRun, spark: SparkSession) -> SparkCaptureSession:
        session = run.session
        if not isinstance(session, SparkCaptureSession):
            raise CaptureError("capturing writes needs the Spark adapter's session")
        if self._session is None:
            self._session = session
        elif not session.spark._jsparkSession.equals(spark._jsparkSession):
            raise CaptureError("the script writes from a second SparkSession; a captured run follows one session")
        return session

    def _unique(self, name: str, identity: naming.DatasetId | None = None) -> str:
        """A table name not yet taken in the run (see :class:`.naming.Aliases`),
        recorded with the dataset ``identity`` it is."""
        unique = self._aliases.claim(name, identity)
        if identity is not None and self._session is not None:
            self._session.run.identify_table(unique, identity.namespace, identity.name)
        return unique

    # -- its inputs ------------------------------------------------------------
    def _traced(self, session: SparkCaptureSession, df: DataFrame, dataset: str) -> DataFrame:
        """``df`` with every read of a file or table replaced by a read of the
        stored rows of the table it is: a source, or an earlier write's output."""
        jvm = session.rewriter.jvm

        def stand_in(leaf: Any) -> Any | None:
            found = Catalyst.relation(leaf) or _driver_rows(jvm, leaf, dataset)
            if found is None:  # literals, or a leaf the rewrite refuses with its own message
                return None
            key, name = found
            written = self._written.get(key)
            if written is None:
                return jvm.standing_in(leaf, session.fresh_frame(self._source(session, leaf, key, name)))
            try:
                return jvm.standing_in(leaf, session.fresh_frame(written))
            except CaptureError as exc:
                raise CaptureError(
                    f"cannot link a read of {key.split(':', 1)[1]} to the write that wrote it earlier in the run: {exc}"
                ) from None

        return jvm.frame(jvm.replace_leaves(jvm.plan(df), stand_in))

    def _source(self, session: SparkCaptureSession, leaf: Any, key: str, name: str) -> int:
        # The same files read with other options (a CSV with or without its
        # header, say) are another table: their columns differ.
        read = f"{key} {leaf.schema().json()}"
        if read not in self._sources:
            name = self._unique(name, naming.relation_identity(session.spark, leaf))
            self._sources[read] = session.source_table(session.rewriter.jvm.frame(leaf), name)
        return self._sources[read]

    @staticmethod
    def _written_key(jvm: Catalyst, spark: SparkSession, target: str | None, is_table: bool) -> str | None:
        """The key a later read of what was written has (see :meth:`Catalyst.relation`)."""
        if target is None:
            return None
        if not is_table:
            return path_key([jvm.qualified_path(target)])
        plan = jvm.plan(spark.table(target))
        while plan.children().size() == 1:
            plan = plan.children().apply(0)
        found = Catalyst.relation(plan)
        return None if found is None else found[0]

    # -- the end of the session ----------------------------------------------------
    def before_stop(self) -> None:
        """The script stops its SparkSession: let the run's jobs finish first."""
        with self._lock:
            if self._session is not None:
                self._session.settle()


def _driver_rows(jvm: Catalyst, leaf: Any, written: str) -> tuple[str, str] | None:
    """(key, name) of rows the script built in the driver (``createDataFrame``,
    ``parallelize``): a source named after the first write that reads them."""
    if leaf.nodeName() != "LogicalRDD" or not jvm.built_in_driver(leaf):
        return None
    return f"rdd:{leaf.rdd().id()}", f"{written}-input"


def _dataset_name(jvm: Catalyst, target: str | None, is_table: bool) -> tuple[str, naming.DatasetId | None]:
    """The readable name of a written dataset (:mod:`.naming`) and its identity."""
    if not target:
        return "dataset", None
    qualified = None if is_table else jvm.qualified_path(target)
    identity = naming.written_identity(jvm.spark, target, is_table, qualified)
    return naming.alias(identity), identity


# -- the patch -------------------------------------------------------------------------
_installed = threading.Lock()  # one script capture per process: PySpark's classes are shared


@contextlib.contextmanager
def intercepted_writes(tracer: WriteTracer) -> Iterator[None]:
    """Route every DataFrame write through ``tracer`` while the block runs."""
    if not _installed.acquire(blocking=False):
        raise CaptureError("writes are already being captured in this process")
    patched: list[tuple[type, str, Any]] = []
    try:
        for cls, name, replacement in _replacements(tracer):
            patched.append((cls, name, cls.__dict__[name]))
            setattr(cls, name, replacement)
        yield
    finally:
        for cls, name, original in reversed(patched):
            setattr(cls, name, original)
        _installed.release()


def _replacements(tracer: WriteTracer) -> Iterator[tuple[type, str, Any]]:
    for method, argument in WRITER_METHODS.items():
        original = DataFrameWriter.__dict__[method]
        yield DataFrameWriter, method, _writing(original, tracer, argument, method in TABLE_METHODS)
    yield DataFrameWriterV2, "__init__", _remembering_table(DataFrameWriterV2.__dict__["__init__"])
    for method in V2_METHODS:
        yield DataFrameWriterV2, method, _writing(DataFrameWriterV2.__dict__[method], tracer, None, True)
    yield SparkSession, "stop", _stopping(SparkSession.__dict__["stop"], tracer)


def _writing(original: Callable[..., Any], tracer: WriteTracer, argument: str | None, is_table: bool) -> Any:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        if argument is None:
            target = getattr(self, V2_TABLE, None)
        else:
            target = signature.bind(self, *args, **kwargs).arguments.get(argument)
        return tracer.on_write(self._df, target, is_table, lambda: original(self, *args, **kwargs))

    return write


def _remembering_table(original: Callable[..., Any]) -> Any:
    @functools.wraps(original)
    def init(self: Any, df: DataFrame, table: str) -> None:
        original(self, df, table)
        setattr(self, V2_TABLE, table)

    return init


def _stopping(original: Callable[..., Any], tracer: WriteTracer) -> Any:
    @functools.wraps(original)
    def stop(self: Any) -> None:
        tracer.before_stop()
        original(self)

    return stop
