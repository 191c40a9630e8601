"""Capture of unmodified PySpark scripts: every DataFrame write is a step.

While :func:`intercepted_writes` is installed, the write methods of PySpark's
``DataFrameWriter`` (``save``, ``parquet``, ``csv``, ``json``, ``orc``,
``text``, ``xml``, ``saveAsTable``, ``insertInto``, ``jdbc``),
``DataFrameWriterV2`` (``create``, ``replace``, ``createOrReplace``,
``append``, ``overwrite``, ``overwritePartitions``) and the SQL writes run
through ``SparkSession.sql`` (:mod:`.sqlwrites`) hand the written DataFrame
to a :class:`WriteTracer`. This module is the only place that patches
PySpark (the writers' configuration methods too, :mod:`.replay`); the
originals are put back when the block ends, however it ends.
``SparkSession.stop`` is wrapped too, so that a script that stops its
session at the end lets the run's background jobs finish first.

A write is captured as the step ``write:<name>`` whose one output table
``<name>`` is the written dataset: the catalog table's name, or the path's
last component without its extension. Its input tables are found in the
written plan, at write time, and nothing is captured for reads no write uses:

* a leaf that reads files (Parquet, CSV, JSON, ...) or a catalog table is a
  source table, registered on its first use (named after the table, or the
  first path's last component without its extension; ``-2``, ``-3``, ...
  appended when the run already has a table of that name) and shared by
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
One execution: the real write then writes the step's STORED rows with the
user's own writer configuration (:mod:`.replay`), so the files and the store
hold the same rows even when the plan is nondeterministic. Fail open: when
the capture fails (the step's writer job included), the write is done from
the user's own DataFrame as without provplug, what the capture staged is
dropped (:meth:`.session.SparkCaptureSession.abandon`) and the run records an
uncaptured write; a strict run fails instead. The run is started by the
first write, on that DataFrame's SparkSession (a script creates its own),
through ``start_run``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import re
import threading
from collections.abc import Callable, Collection, Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.readwriter import DataFrameWriter, DataFrameWriterV2

from provplug.errors import CaptureError, CaptureNotStartedError
from provplug.model import StepInfo
from provplug.plugin.protocols import CaptureRun

from . import naming
from ._jvm import Catalyst, PendingFrame, PlanTree, path_exists, path_key
from .direct import DirectFiles, direct_files
from .replay import V2_TABLE, Written, recorded_mode, recording_replacements, replaying
from .session import SparkCaptureSession
from .sqlwrites import sql_statements

# DataFrameWriter method -> its argument naming what it writes (a V2 writer is named at writeTo)
WRITER_METHODS: dict[str, str] = {
    "save": "path",
    "parquet": "path",
    "csv": "path",
    "json": "path",
    "orc": "path",
    "text": "path",
    "xml": "path",
    "saveAsTable": "name",
    "insertInto": "tableName",
}
logger = logging.getLogger("provplug.spark")
V2_METHODS = ("create", "replace", "createOrReplace", "append", "overwrite", "overwritePartitions")


def _as_written(frame: DataFrame) -> DataFrame:
    """A write's step: the written DataFrame itself."""
    return frame


class WriteTracer:
    """Turns each DataFrame write into a step of one capture run, started by
    the first write through ``start_run``, and writes the user's files from
    the step's stored rows (one execution). A write whose capture fails is
    done as the user's own and recorded as an uncaptured write (fail open),
    unless the run is strict. Writes from several threads are captured one
    at a time (their jobs and the real writes run concurrently)."""

    def __init__(self, start_run: Callable[[SparkSession], CaptureRun]) -> None:
        self._start_run = start_run
        self._lock = threading.RLock()
        self._session: SparkCaptureSession | None = None
        self._sources: dict[str, int] = {}  # what a leaf reads -> its source table
        self._written: dict[str, int] = {}  # what a write wrote -> its output table
        self._aliases = naming.Aliases()
        # The plan standing in for a leaf, by the leaf's output attributes (their
        # names and expression ids: one relation's), with what the leaf reads. A
        # script's frames and views keep their leaves' ids from write to write, so
        # the stand-in is made once (its py4j calls are most of a write's fixed cost).
        self._stand_ins: dict[str, tuple[str, Any]] = {}

    # -- a write ---------------------------------------------------------------
    def on_write(
        self,
        df: DataFrame,
        written: Written,
        write: Callable[[], Any],
        replay: Callable[[DataFrame], Any] | None,
        user_files: DirectFiles | None = None,
    ) -> Any:
        """Capture the write of ``df`` as a step, then ``replay`` the user's
        write on its stored rows (or, with ``user_files``, let the step's
        writer job write the user's files itself: :mod:`.direct`); when it
        cannot be captured (or ``replay`` is None: the writer's
        configuration is unknown), ``write()`` as the user asked and record
        an uncaptured write."""
        with self._lock:
            run = self._started(df.sparkSession)
            if run is None:  # the run could not start: nothing is captured (logged once)
                return write()
            if replay is None:
                self.uncaptured(run, written.dataset, "its writer was made before provplug intercepted writes")
                return write()
            table = self._captured(run, df, written, user_files)
        if table is None:
            return write()
        try:
            # Both wait for the step's writer job and raise its error.
            stored = None if self._wrote_directly(table) else self._stored(table)
        except Exception as exc:
            with self._lock:
                self._not_captured(run, written.dataset, exc, {table}, after=table)
            return write()
        if stored is None:
            # Spark refreshes what it cached of a path it wrote; so does the direct write.
            df.sparkSession.catalog.refreshByPath(str(written.target))
            result = None  # what parquet() and save() return
        else:
            result = replay(stored)  # the user's write itself: its errors are the user's
        self._remember(df.sparkSession, written, table)
        return result

    def _remember(self, spark: SparkSession, written: Written, table: int) -> None:
        """Link later reads of what was written to ``table`` (fail open: a
        dataset that cannot be looked up is not linked; its reads are sources)."""
        try:
            key = self._written_key(spark, written) if written.linked else None
        except Exception as exc:  # py4j: e.g. a table of a catalog that cannot be read back
            logger.warning("provplug: later reads of %s are not linked to its write: %s", written.dataset, _reason(exc))
            return
        if key is not None:
            with self._lock:
                self._written[key] = table
                # A leaf reading what was just written now stands for this write's rows.
                self._stand_ins = {k: v for k, v in self._stand_ins.items() if v[0] != key}

    def _captured(
        self, run: CaptureRun, df: DataFrame, written: Written, user_files: DirectFiles | None = None
    ) -> int | None:
        """The table the step capturing the write stores its rows into (its
        writer job running), or None when it cannot be captured."""
        session = self._session or (run.session if isinstance(run.session, SparkCaptureSession) else None)
        before = session.table_ids() if session is not None else frozenset()
        try:
            session = self._bound(run, df.sparkSession)
            name = self._name(session, written)
            traced = self._traced(session, df, name)
            step = StepInfo(f"write:{name}", (), (name,), {"dataset": written.dataset})
            if user_files is not None:
                session.write_directly(step.name, user_files)
            output = run.call_step(step, _as_written, (traced,), {})
        except Exception as exc:
            # The sources stored on the way stay (a later write may read them); the rest goes.
            staged = session.table_ids() - before - set(self._sources.values()) if session else frozenset()
            self._not_captured(run, written.dataset, exc, staged, after=max(before, default=-1))
            return None
        # A step whose capture failed is left out by the session, which records it as uncaptured
        # (fail open) and hands back the DataFrame itself: no stored rows to write from.
        return output.table_id if isinstance(output, PendingFrame) and output.table_id is not None else None

    def _name(self, session: SparkCaptureSession, written: Written) -> str:
        """The written dataset's table name (:mod:`.naming`)."""
        if written.identity is not None:  # a dataset outside Spark's catalog and files (a JDBC table)
            identity = naming.DatasetId(*written.identity, is_path=False)
            return self._unique(naming.alias(identity), identity)
        return self._unique(*_dataset_name(session.rewriter.jvm, written.target, written.is_table))

    def _stored(self, table: int) -> DataFrame:
        assert self._session is not None
        return self._session.fresh_frame(table)

    def _wrote_directly(self, table: int) -> bool:
        assert self._session is not None
        return self._session.wrote_directly(table)

    def _not_captured(
        self, run: CaptureRun, dataset: str, error: Exception, tables: Collection[int], after: int
    ) -> None:
        """Forget what the failed capture staged (``tables``, and unfinished
        tables reserved after table id ``after``) and record the write as
        uncaptured; a strict run fails instead (``error`` goes on)."""
        if run.strict:
            raise error
        if self._session is not None:
            self._session.abandon(tables, after)
        self.uncaptured(run, dataset, _reason(error))

    def on_uncaptured(self, spark: SparkSession, dataset: str, reason: str) -> None:
        """A write seen and not captured (the caller does it as the user asked)."""
        with self._lock:
            run = self._started(spark)
            if run is not None:
                self.uncaptured(run, dataset, reason)

    def _started(self, spark: SparkSession) -> CaptureRun | None:
        """The run, or None when it could not start (logged; the writes go on)."""
        try:
            return self._start_run(spark)
        except CaptureNotStartedError:
            return None

    @staticmethod
    def uncaptured(run: CaptureRun, dataset: str, reason: str) -> None:
        """Record a write provplug did not capture (a strict run fails instead)."""
        if run.strict:
            raise CaptureError(f"the write of {dataset} cannot be captured: {reason}")
        run.record_uncaptured_write(dataset, reason)

    def _bound(self, run: CaptureRun, spark: SparkSession) -> SparkCaptureSession:
        session = run.session
        if not isinstance(session, SparkCaptureSession):
            raise CaptureError("capturing writes needs the Spark adapter's session")
        if self._session is None:
            self._session = session
        # Sessions of one SparkContext (spark.newSession()) share its JVM: their
        # analyzed plans run in the run's session as they are.
        elif session.spark.sparkContext is not spark.sparkContext:
            raise CaptureError("the script writes from a second SparkContext; a captured run follows one context")
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
            attributes = str(leaf.output().toString())
            if attributes in self._stand_ins:
                return self._stand_ins[attributes][1]
            found = Catalyst.relation(leaf) or _driver_rows(jvm, leaf, dataset)
            if found is None:  # literals, or a leaf the rewrite refuses with its own message
                return None
            plan = made_stand_in(leaf, *found)
            self._stand_ins[attributes] = (found[0], plan)
            return plan

        def made_stand_in(leaf: Any, key: str, name: str) -> Any:
            written = self._written.get(key)
            if written is None:
                return jvm.standing_in(leaf, session.fresh_frame(self._source(session, leaf, key, name)))
            try:
                return jvm.standing_in(leaf, session.fresh_frame(written))
            except CaptureError as exc:
                raise CaptureError(
                    f"cannot link a read of {key.split(':', 1)[1]} to the write that wrote it earlier in the run: {exc}"
                ) from None

        tree = jvm.tree(jvm.inlined(jvm.plan(df)))
        self._store_new_sources(session, tree)
        return jvm.frame(jvm.replace_leaves(tree, stand_in))

    def _store_new_sources(self, session: SparkCaptureSession, tree: PlanTree) -> None:
        """Store together the sources the plan reads that the run has not
        stored yet, when there are several: their files are copied together
        (on a cluster one Spark job; the stand-ins then find them stored)."""
        new: dict[str, tuple[Any, str]] = {}
        for leaf in tree.leaves():
            if str(leaf.output().toString()) in self._stand_ins:
                continue
            found = Catalyst.relation(leaf)
            if found is None or found[0] in self._written:
                continue
            read = _read_key(leaf, found[0])
            if read not in self._sources:
                new.setdefault(read, (leaf, found[1]))
        if len(new) < 2:
            return
        named = [
            (leaf, self._unique(name, naming.relation_identity(session.spark, leaf))) for leaf, name in new.values()
        ]
        stored = session.source_tables([(session.rewriter.jvm.frame(leaf), name) for leaf, name in named])
        self._sources.update(zip(new, stored, strict=True))

    def _source(self, session: SparkCaptureSession, leaf: Any, key: str, name: str) -> int:
        read = _read_key(leaf, key)
        if read not in self._sources:
            name = self._unique(name, naming.relation_identity(session.spark, leaf))
            self._sources[read] = session.source_table(session.rewriter.jvm.frame(leaf), name)
        return self._sources[read]

    def _written_key(self, spark: SparkSession, written: Written) -> str | None:
        """The key a later read of what was written has (see :meth:`Catalyst.relation`)."""
        assert self._session is not None
        jvm, target = self._session.rewriter.jvm, written.target
        if target is None:
            return None
        if not written.is_table:
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


def _read_key(leaf: Any, key: str) -> str:
    """What a source is: the files or table a leaf reads, and how: the same
    files read with other options (a CSV with or without its header, say)
    are another table, their columns differ."""
    return f"{key} {leaf.schema().json()}"


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
    yield from recording_replacements()
    for method, argument in WRITER_METHODS.items():
        yield DataFrameWriter, method, _writing(DataFrameWriter.__dict__[method], tracer, _to_path_or_table(argument))
    yield DataFrameWriter, "jdbc", _writing(DataFrameWriter.__dict__["jdbc"], tracer, _to_jdbc)
    for method in V2_METHODS:
        yield DataFrameWriterV2, method, _writing(DataFrameWriterV2.__dict__[method], tracer, _to_v2_table)
    yield SparkSession, "sql", sql_statements(SparkSession.__dict__["sql"], tracer)
    yield SparkSession, "stop", _stopping(SparkSession.__dict__["stop"], tracer)


def _writing(
    original: Callable[..., Any], tracer: WriteTracer, describe: Callable[[Any, dict[str, Any]], Written]
) -> Any:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        written = describe(self, arguments)
        if _ignored(self, arguments, written):
            return original(self, *args, **kwargs)  # Spark writes nothing: nothing to capture
        replay = replaying(self, original, args, kwargs)
        frame = _as_table_names_it(self._df, written.target) if original.__name__ == "insertInto" else self._df
        user_files = _direct(self, original.__name__, arguments, frame)
        return tracer.on_write(frame, written, lambda: original(self, *args, **kwargs), replay, user_files)

    return write


def _ignored(writer: Any, arguments: dict[str, Any], written: Written) -> bool:
    """A write in mode ``ignore`` over a path or table that exists: Spark
    writes nothing, so no row of it may be stored (a later read of the
    target reads what was there: a source)."""
    if not isinstance(writer, DataFrameWriter) or written.target is None or written.identity is not None:
        return False
    try:
        if recorded_mode(writer, arguments) != "ignore":
            return False
        spark = writer._spark
        if written.is_table:
            return bool(spark.catalog.tableExists(written.target))
        return path_exists(spark, written.target)
    except Exception as exc:  # py4j: cannot tell; capture the write as any other
        logger.debug("provplug: cannot tell whether %s exists: %s", written.target, _reason(exc))
        return False


def _direct(writer: Any, terminal: str, arguments: dict[str, Any], frame: DataFrame) -> DirectFiles | None:
    """The user's files the step's writer job may write itself; None, so
    that Spark writes them, when that cannot even be decided."""
    try:
        return direct_files(writer, terminal, arguments, frame)
    except Exception as exc:  # py4j, or an unusual argument: Spark's own write is always right
        logger.debug("provplug: the write is replayed by Spark: %s", _reason(exc))
        return None


def _as_table_names_it(frame: DataFrame, table: str | None) -> DataFrame:
    """``insertInto`` fills the table's columns by position: the written
    cells are named as the table names them (``frame`` as it is when the
    table cannot be looked up or has other columns: the write reports that)."""
    try:
        columns = frame.sparkSession.table(table).columns if table else []
    except Exception:  # py4j: not a table Spark can read back
        return frame
    return frame.toDF(*columns) if len(columns) == len(frame.columns) else frame


def _to_path_or_table(argument: str) -> Callable[[Any, dict[str, Any]], Written]:
    is_table = argument != "path"

    def describe(writer: Any, arguments: dict[str, Any]) -> Written:
        target = arguments.get(argument)
        return Written(target, is_table, target or "")

    return describe


def _to_jdbc(writer: Any, arguments: dict[str, Any]) -> Written:
    """A JDBC table: named after the table, recorded as the URL (without its
    parameters: they may hold credentials) and the table."""
    url, table = str(arguments["url"]), str(arguments["table"])
    base = re.split(r"[?;]", url, maxsplit=1)[0]
    return Written(table, True, f"{base}/{table}", linked=False, identity=(base, table))


def _to_v2_table(writer: Any, arguments: dict[str, Any]) -> Written:
    table = getattr(writer, V2_TABLE, None)  # None: a writer made before writes were intercepted
    return Written(table, True, table or "a table")


def _stopping(original: Callable[..., Any], tracer: WriteTracer) -> Any:
    @functools.wraps(original)
    def stop(self: Any) -> None:
        tracer.before_stop()
        original(self)

    return stop


def _reason(error: Exception) -> str:
    """An error in one line (a JVM error's first line), for an uncaptured write."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:500]
