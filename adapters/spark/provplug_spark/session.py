"""One capture run on a SparkSession: sources, steps, rows and triples.

Value ids are fixed by files, not by recomputation: every table is stored
ONCE with its row numbers, and downstream code gets a DataFrame read back from
those stored rows.

* A source that is a bare read of Parquet files is not rewritten at all: the
  files are copied into the store and a row's number is its file's offset
  (in the copy's name) plus its position (``_metadata.row_index`` for Spark),
  see :mod:`provplug.schema`. Any other source is written like an output.
* A step output is rewritten by :mod:`.rewrite` (its rows carry the row numbers
  of the input rows they came from) and written by ONE Spark job
  (:mod:`.writer`), in the background: each task numbers its rows and writes
  them, and the triples their row-number columns expand to. Rows and triples
  come from the same task, so they cannot disagree even when the plan is
  nondeterministic (sample, limit after shuffle, ...). The step returns a
  :class:`~._jvm.PendingFrame` at once; its first use waits for the job.
* Group joins (:mod:`.groupjoin`) join the stored grouping values of an
  aggregate back to its recomputed input rows, also in the background.
  :meth:`SparkCaptureSession.close` waits for every job, records the tables
  and completes the ops; a failure there fails the run.

Before anything is staged, :mod:`.workers` checks that Spark's Python
workers can import this adapter (a capture otherwise fails in its first task).

The DataFrame handed downstream is ``spark.read.parquet(rows/<table>)``
restricted to the table's columns: the row-number column stays in the files
(the rewrite finds it on the Parquet leaf) and never shows to the user.

Those files move (or, when the run keeps no rows, vanish) when the run ends,
so the DataFrames a run handed out (sources and step outputs, each a
:class:`~._jvm.PendingFrame`) are re-pointed then: a table whose own plan is
deterministic at the user's own plan (the DataFrame the user registered, or
the one the step returned, with every read of a table of the run replaced by
that table's after-run DataFrame), which recomputes the rows stored and no
longer depends on the store; a nondeterministic one at the rows stored for
it (the committed run's when it keeps rows, else a local checkpoint taken
before the files go), since recomputing it would give other rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import pyarrow.fs as pafs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from provplug import ids, schema
from provplug.errors import CaptureError, LostFilesError
from provplug.ingest.recorder import ROWS, StagedRun
from provplug.location import LocationEdge, Rates, RowRuns, declared_rates
from provplug.model import COARSE_REASON, OpInfo, StepInfo, TableInfo, TableOrigin
from provplug.plugin.protocols import RunRecorder
from provplug.plugin.writers import PositionalCopy, SourceFile

from . import aligned, declared, direct
from ._jvm import PendingFrame, threads_pinned
from .coarse import coarse_edges, coarse_inputs, every_column
from .direct import DirectFiles
from .groupjoin import group_jobs
from .readback import jvm_reaches, read_parquet
from .rewrite import PlanRewriter, Rewritten
from .rowlineage import PairLayout
from .shared import check_reported, check_shared_store
from .sources import Copied, TableLeaf, copied_tables, copy_sources, linked_rows, parquet_files, parquet_parts
from .workers import check_workers
from .writer import (
    RESULT_SCHEMA,
    RUNS,
    TASK_PROPERTY,
    OutputLayout,
    Target,
    TaskBody,
    task_property,
    write_output,
    write_pairs,
    writer_task,
)

KEYS_DIR = "keys"  # scratch: row numbers beside an aggregate's hidden group-join columns
logger = logging.getLogger("provplug.spark")  # under provplug's loggers: shown where the core's are


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _quoted(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


# The attribute of a step's "wrote" log record that carries its StepTimings.
STEP_TIMINGS = "provplug_step_timings"


@dataclasses.dataclass(frozen=True)
class StepTimings:
    """Where a captured step's own time went (on its log record, :data:`STEP_TIMINGS`)."""

    step: str
    table: str
    rewrite: float  # seconds: the plan rewrite, on the caller's thread
    writer_job: float  # seconds: the one Spark job writing rows, triples (and the user's files)


@dataclasses.dataclass(frozen=True)
class _Written:
    """A step output once its writer job has run (in the background)."""

    table: TableInfo  # with its row count
    frame: Callable[[], DataFrame]  # its stored rows, as downstream code sees them (read back when first used)
    triples: int
    finished: dt.datetime
    groups: Future[tuple[int, dt.datetime]] | None  # its group-join triples, still being written
    edge: LocationEdge | None = None  # a row-aligned output: the edge standing for its triples

    @property
    def stands_for(self) -> int:
        """The triples the output's job wrote or its edge stands for."""
        return self.triples + (self.edge.triple_count if self.edge is not None else 0)


@dataclasses.dataclass(frozen=True)
class _FoundSource:
    """A source table reserved, before its rows are stored (see source_tables)."""

    table: TableInfo
    frame: DataFrame
    linked: tuple[int, RowRuns] | None  # the rows an earlier run wrote of the same files
    parts: list[SourceFile] | None  # its Parquet files, when copies of them store it exactly


def _frame_of(job: Future[_Written]) -> DataFrame:
    return job.result().frame()


class _Once:
    """A DataFrame made on first use, then always the same one (one plan, so
    one set of expression ids); thread-safe. A step output's stored rows are
    read back (a file listing, an analysis: tens of milliseconds) only when
    code downstream uses them, not by every writer job: a write whose user
    files the job wrote itself never reads them."""

    def __init__(self, make: Callable[[], DataFrame]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._made: DataFrame | None = None

    def __call__(self) -> DataFrame:
        with self._lock:
            if self._made is None:
                self._made = self._make()
            return self._made


@dataclasses.dataclass(frozen=True)
class _Handed:
    """A table of the run as the DataFrames handed out see it."""

    original: DataFrame  # the user's own DataFrame: what the table is once the run has ended
    current: Callable[[], DataFrame]  # its stored rows while the run lasts (one DataFrame: a stable plan)
    fresh: Callable[[], DataFrame]  # a new read of its stored rows (own expression ids)
    written: Callable[[], object] = lambda: None  # waits until its rows are written (raises the writer's error)


class SparkCaptureSession:
    """The Spark adapter's state for one capture run (AdapterSession protocol)."""

    def __init__(self, spark: SparkSession, run: RunRecorder) -> None:
        check_shared_store(spark, run)  # before anything runs on the executors
        check_workers(spark)  # before anything is staged: fail at once, in one line
        self.spark = spark
        self.run = run
        self.rewriter = PlanRewriter(spark)
        # Every writer job's one Python function (its body rides on the job: writer.TASK_PROPERTY).
        self._writer_udf = self.rewriter.jvm.arrow_map(writer_task, RESULT_SCHEMA)
        # A step output is written by a Spark job in the background while the
        # pipeline goes on (its DataFrame waits for it when first used), and so
        # are group-join triples: Spark jobs here are mostly latency (planning,
        # scheduling, a stage's last task), so independent steps overlap.
        # close() waits for both, records the tables and completes the ops.
        self.steps = ThreadPoolExecutor(max_workers=2, thread_name_prefix="provplug-rows")
        self.triples = ThreadPoolExecutor(max_workers=2, thread_name_prefix="provplug-triples")
        self.pending: list[tuple[OpInfo, list[Future[_Written]]]] = []
        self._handed: dict[int, _Handed] = {}
        self._after_run: dict[int, DataFrame] = {}  # the re-pointed plans, once the run has ended
        self._ended = False
        self._committed_rows = False  # set as the run ends: whether its committed run will hold the rows
        self._lock = threading.RLock()
        # The user's files a step's writer job writes itself (:mod:`.direct`), by step name, and the
        # tables whose job did.
        self._direct: dict[str, DirectFiles] = {}
        self._wrote_directly: set[int] = set()
        # Row-aligned outputs stored as location edges (:mod:`.aligned`).
        self.location_lineage = aligned.enabled(spark, run.location_lineage)
        self._runs: dict[int, RowRuns] = {}  # table id -> its row numbers, once written
        self.lost: LostFilesError | None = None  # set when a writer job's files are not in the store
        self._stored: dict[int, tuple[str, ...]] = {}  # table id -> columns, of every table steps may read

    # -- sources ---------------------------------------------------------------
    def _copy_sources(self, copies: list[PositionalCopy]) -> None:
        copy_sources(self.spark, copies)

    def source(self, data: Any, name: str) -> DataFrame:
        return self.table_frame(self.source_table(data, name))

    def source_table(self, data: Any, name: str) -> int:
        """Store ``data`` as the source table ``name``; return its table id."""
        return self.source_tables([(data, name)])[0]

    def source_tables(self, sources: Sequence[tuple[Any, str]]) -> list[int]:
        """Store each ``(data, name)`` as a source table; return their table
        ids. The files of those stored as copies are copied together, by one
        call of :func:`.sources.copy_sources` (:func:`.sources.copied_tables`)."""
        found = [self._found_source(data, name) for data, name in sources]
        parts = {f.table.table_id: f.parts for f in found if f.parts is not None}
        copied = copied_tables(self.run, parts, self._copy_sources)
        return [self._stored_source(f, copied.get(f.table.table_id)) for f in found]

    def _found_source(self, data: Any, name: str) -> _FoundSource:
        """A new source table and how it can be stored: as the rows an earlier
        run wrote, as copies of its files (their parts), else through Spark."""
        frame = data if isinstance(data, DataFrame) else self.spark.createDataFrame(data)
        columns = self._checked_columns(frame.columns, name)
        table = self.run.new_table(name, "source", columns)
        listed = parquet_files(frame)
        linked = linked_rows(self.run, table, frame, listed)  # the version an earlier run wrote: its rows (.sources)
        parts = None if linked is not None else parquet_parts(listed, columns)
        return _FoundSource(table, frame, linked, parts)

    def _stored_source(self, found: _FoundSource, copied: Copied | None) -> int:
        """Store ``found`` (``copied``: its files' copies, when they were made)."""
        table, frame = found.table, found.frame
        positional = copied is not None
        if found.linked is not None:
            rows, self._runs[table.table_id] = found.linked
        elif copied is not None:  # immutable input files: stored as copies, rows numbered by position
            rows = copied.rows
            self._runs[table.table_id] = RowRuns.of([(0, rows)])
        else:
            layout = OutputLayout(tuple(table.columns), (), ())
            rows, _, runs = self._write(frame.select(*[_quoted(c) for c in table.columns]), layout, table.table_id, 0)
            self._runs[table.table_id] = RowRuns.of(sorted(runs))
        self._publish(table, "source", rows, positional, copied.files if copied else ())
        read = functools.partial(self._read_back, table, frame.schema, positional)
        # Read back when user code first uses it (a script's writes read fresh copies only).
        self._handed[table.table_id] = _Handed(frame, _Once(read), read)
        return table.table_id

    def table_frame(self, table_id: int) -> DataFrame:
        """The DataFrame user code gets for a table of the run."""
        return PendingFrame(self.spark, functools.partial(self._frame, table_id), table_id)

    def fresh_frame(self, table_id: int) -> DataFrame:
        """A new read of the stored rows of a table of the run (with its own
        expression ids: one per occurrence in a plan); waits for its writer."""
        return self._handed[table_id].fresh()

    def _frame(self, table_id: int) -> DataFrame:
        return self._original(table_id) if self._ended else self._handed[table_id].current()

    @staticmethod
    def _checked_columns(columns: Sequence[str], name: str) -> list[str]:
        if len(set(columns)) != len(columns):
            raise CaptureError(f"table {name!r} has duplicate column names {list(columns)}")
        if len(columns) > ids.MAX_COLUMNS:
            raise CaptureError(f"table {name!r} has {len(columns)} columns; at most {ids.MAX_COLUMNS} fit a value id")
        if schema.ROW_COLUMN in columns:
            raise CaptureError(f"table {name!r} has a column named {schema.ROW_COLUMN}, which provplug reserves")
        return list(columns)

    def _rows_path(self, table_id: int) -> str:
        return self.run.rows_destination(table_id).spark_path

    def _publish(
        self, table: TableInfo, origin: TableOrigin, rows: int, positional: bool = False, files: tuple[str, ...] = ()
    ) -> None:
        """Record ``table`` (now stored) and make it a table plans may read
        (``files``: a positional table's copies, :class:`.sources.TableLeaf`)."""
        self.run.record_table(self._counted(table, origin, rows))
        self._register(
            TableLeaf(table.table_id, table.columns, self._rows_path(table.table_id), positional, files, rows)
        )

    def _counted(self, table: TableInfo, origin: TableOrigin, rows: int) -> TableInfo:
        return TableInfo(
            table.table_id, table.name, self.run.run_id, origin, table.columns, rows, bool(self.run.store_rows)
        )

    def _read_back(self, table: TableInfo, data_schema: StructType, positional: bool = False) -> DataFrame:
        path = self._rows_path(table.table_id)
        # An explicit schema: no footer read to infer it.
        fields = [data_schema[c] for c in table.columns]
        if positional and jvm_reaches(self.spark, path):  # exactly the table's columns: no projection to walk
            return read_parquet(self.spark, self.run.store_uri, path, StructType(fields))
        # (Read back through the Python Data Source, a positional copy's rows come with their numbers.)
        fields.append(StructField(schema.ROW_COLUMN, LongType()))
        rows = read_parquet(self.spark, self.run.store_uri, path, StructType(fields))
        return rows.select(*[_quoted(c) for c in table.columns])

    def _write(
        self,
        frame: DataFrame,
        layout: OutputLayout,
        table_id: int,
        op_id: int,
        keys: bool = False,
        user_files: DirectFiles | None = None,
    ) -> tuple[int, int, list[tuple[int, int]]]:
        """Write ``frame`` as the rows (and per-row triples and row-lineage
        records) of ``table_id`` in one Spark job, and with ``user_files``
        the user's own files; return (rows, triples, the runs of row numbers
        a row-aligned output's tasks used)."""
        target = Target(
            table_id,
            op_id,
            self.run.rows_destination(table_id),
            self.run.triples_destination(),
            self.run.scratch_destination(KEYS_DIR, str(table_id)) if keys else None,
            self.run.row_lineage_destination() if layout.members is not None else None,
            direct=None if user_files is None else direct.prepare(user_files),
        )
        runs: list[tuple[int, int]] = []
        try:
            written = self._run_writer(frame, functools.partial(write_output, target, layout), target, runs)
        except BaseException:
            if target.direct is not None:
                direct.abandon(target.direct)  # the user's own write follows: nothing of this one stays
            raise
        return written.get("rows", 0), written.get("triples", 0), runs

    def _run_writer(
        self, frame: DataFrame, body: TaskBody, target: Target, runs: list[tuple[int, int]] | None = None
    ) -> dict[str, int]:
        """Run the writer job of ``body`` over ``frame``; keep only the files
        its used attempts wrote; rows per dataset (the runs of row numbers its
        tasks reported go to ``runs``)."""
        if not threads_pinned():  # a local property could reach another thread's job: a UDF of its own
            results = frame.mapInArrow(body, RESULT_SCHEMA).collect()
        else:
            job = self.rewriter.jvm.map_in_arrow(frame, self._writer_udf)
            context = self.spark.sparkContext
            context.setLocalProperty(TASK_PROPERTY, task_property(body))  # this thread's jobs only
            try:
                results = job.collect()
            finally:
                context.setLocalProperty(TASK_PROPERTY, None)  # type: ignore[arg-type]
        counts: dict[str, int] = {}
        for r in results:
            if r["dataset"] == RUNS:
                if runs is not None:
                    runs.append((int(r["path"]), r["rows"]))
                continue
            counts[r["dataset"]] = counts.get(r["dataset"], 0) + r["rows"]
        kept = {r["path"]: r["rows"] for r in results if r["dataset"] not in (RUNS, direct.DIRECT)}
        found: set[str] = set()
        for destination in (target.rows, target.triples, target.keys, target.lineage):
            if destination is not None:
                found |= destination.discard_files(target.prefix, kept)
        try:
            check_reported(self.run, kept, found)
        except LostFilesError as lost:  # never abandoned like a failed step: the run must fail
            self.lost = self.lost or lost
            raise
        if target.direct is not None:
            direct.finish(target.direct, [r["path"] for r in results if r["dataset"] == direct.DIRECT])
            self._wrote_directly.add(target.table_id)
        return counts

    # -- steps -----------------------------------------------------------------
    def run_step(self, step: StepInfo, func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        started = _now()
        result = func(*args, **kwargs)  # the user's own code: its errors are the pipeline's
        if self.run.strict:
            return self._captured_step(step, result, started)
        try:
            return self._captured_step(step, result, started)
        except Exception as failed:  # fail open: the pipeline goes on with the step's own result
            reason = f"{type(failed).__name__}: {failed}"
            logger.warning("provplug: step %s was not captured: %s", step.name, reason)
            self.run.record_uncaptured_write(", ".join(step.outputs), f"step {step.name}: {reason}")
            return result

    def write_directly(self, step: str, user_files: DirectFiles) -> None:
        """Let the writer job of ``step`` (one output) write ``user_files`` too (:mod:`.direct`)."""
        self._direct[step] = user_files

    def wrote_directly(self, table_id: int) -> bool:
        """Whether the (finished) writer job of ``table_id`` wrote the user's files itself."""
        self._handed[table_id].written()
        return table_id in self._wrote_directly

    def _captured_step(self, step: StepInfo, result: Any, started: dt.datetime) -> Any:
        """Capture the step that returned ``result``; the DataFrames downstream steps read."""
        user_files = self._direct.pop(step.name, None) if len(step.outputs) == 1 else None
        outputs = self._outputs(step, result)
        op_id = self.run.new_op_id()
        # Every output rewritten, and everything that may fail computed, before
        # any is registered or written: a step that fails to capture leaves no
        # file and no table behind, and the caller may go on.
        rewriting = time.perf_counter()
        try:
            rewrites = [self.rewriter.rewrite(frame) for frame in outputs]
        except Exception as refused:  # a refusal, or a plan the rewrite could not handle
            if self.run.strict:
                raise
            why = (
                str(refused) if isinstance(refused, CaptureError) else f"internal: {type(refused).__name__}: {refused}"
            )
            return self._coarse_step(step, outputs, op_id, started, why, user_files=user_files)
        tables = [
            self.run.new_table(name, "output", self._checked_columns(frame.columns, name))
            for name, frame in zip(step.outputs, outputs, strict=True)
        ]
        locations = [
            self._location(step, len(outputs), frame, rewritten)
            for frame, rewritten in zip(outputs, rewrites, strict=True)
        ]
        row_rules = [r.rules_for(op_id, t.table_id) for r, t in zip(rewrites, tables, strict=True)]
        for rules in row_rules:
            if rules is not None:
                self.run.record_row_rules(rules)
        rewritten_in = time.perf_counter() - rewriting
        jobs, frames = [], []
        for frame, rewritten, table, location in zip(outputs, rewrites, tables, locations, strict=True):
            # Registered now: a downstream rewrite can only meet this table once its rows are written.
            self._register(TableLeaf(table.table_id, table.columns, self._rows_path(table.table_id)))
            jobs.append(
                self.steps.submit(
                    self._materialise, table, rewritten, op_id, frame, location, step.name, user_files, rewritten_in
                )
            )
            self._handed[table.table_id] = _Handed(
                frame,
                functools.partial(_frame_of, jobs[-1]),
                functools.partial(self._reread, jobs[-1], table, frame.schema),
                jobs[-1].result,
            )
            frames.append(self.table_frame(table.table_id))
        operations = list(dict.fromkeys(o for r in rewrites for o in r.operations))
        op = OpInfo(
            op_id,
            step.name,
            self.run.run_id,
            "udf" if any(r.uses_udf for r in rewrites) else "builtin",
            tuple(sorted(set().union(*[r.inputs for r in rewrites]))),
            tuple(t.table_id for t in tables),
            tuple(operations),
            dict(step.params),
            started,
            None,
            None,
        )
        self.run.record_op(op)  # finished and triples are known when the writes end (close)
        self.pending.append((op, jobs))
        return tuple(frames) if len(step.outputs) > 1 else frames[0]

    def coarse_step(self, step: StepInfo, outputs: Sequence[DataFrame], inputs: Sequence[int], reason: str) -> Any:
        """Store ``outputs`` (Spark DataFrames of data provplug cannot trace,
        e.g. built from a pandas node's result) as a coarse step: every
        output column on every column of the ``inputs`` tables. Returns the
        DataFrames (one, or a tuple) downstream steps should read."""
        started = _now()
        every = {t: self._stored[t] for t in inputs if t in self._stored}
        return self._coarse_step(step, list(outputs), self.run.new_op_id(), started, reason, every)

    def _coarse_step(
        self,
        step: StepInfo,
        outputs: list[DataFrame],
        op_id: int,
        started: dt.datetime,
        reason: str,
        every: Mapping[int, tuple[str, ...]] | None = None,
        user_files: DirectFiles | None = None,
    ) -> Any:
        """A step whose rows cannot be traced exactly: its outputs are stored
        as usual (numbered rows, read back downstream), with no triple; one
        coarse edge per input table says what each output column may derive
        from (:mod:`.coarse`; ``every``: on every column of these tables).
        Fail open: the pipeline goes on unchanged."""
        stored = dict(self._stored)
        tables, jobs, frames, inputs = [], [], [], set()
        for name, frame in zip(step.outputs, outputs, strict=True):
            table = self.run.new_table(name, "output", self._checked_columns(frame.columns, name))
            if every is None:
                found = coarse_inputs(self.rewriter.jvm, self.rewriter.tables, self.rewriter.jvm.plan(frame), stored)
            else:
                found = every_column(every, len(table.columns))
            why = reason + ("; it also reads data that is not a table of the run" if found.hidden_inputs else "")
            for edge in coarse_edges(op_id, table.table_id, found, why):
                self.run.record_coarse_edge(edge)
                inputs.add(edge.src_table)
            self._register(TableLeaf(table.table_id, table.columns, self._rows_path(table.table_id)))
            jobs.append(self.steps.submit(self._materialise_coarse, table, op_id, frame, step.name, user_files))
            self._handed[table.table_id] = _Handed(
                frame,
                functools.partial(_frame_of, jobs[-1]),
                functools.partial(self._reread, jobs[-1], table, frame.schema),
                jobs[-1].result,
            )
            tables.append(table)
            frames.append(self.table_frame(table.table_id))
        logger.warning("provplug: step %s is stored as a coarse step: %s", step.name, reason)
        params = {**step.params, COARSE_REASON: reason}
        op = OpInfo(
            op_id, step.name, self.run.run_id, "coarse", tuple(sorted(inputs)),
            tuple(t.table_id for t in tables), (), params, started, None, None,
        )  # fmt: skip
        self.run.record_op(op)
        self.pending.append((op, jobs))
        return tuple(frames) if len(step.outputs) > 1 else frames[0]

    def _register(self, leaf: TableLeaf) -> None:
        """Make ``leaf`` a table downstream plans may read (the rewrite finds it by its path)."""
        self.rewriter.register(leaf)
        self._stored[leaf.table_id] = leaf.columns

    def _materialise_coarse(
        self, table: TableInfo, op_id: int, frame: DataFrame, step: str, user_files: DirectFiles | None = None
    ) -> _Written:
        """Write a coarse step's output rows once (numbered, no triple)."""
        layout = OutputLayout(tuple(table.columns), (), ())
        selected = frame.select(*[_quoted(c) for c in table.columns])
        rows, _, runs = self._write(selected, layout, table.table_id, op_id, user_files=user_files)
        self._runs[table.table_id] = RowRuns.of(sorted(runs))
        logger.info("coarse step %s wrote %s: %s rows", step, table.name, f"{rows:,}")
        read = _Once(functools.partial(self._read_back, table, frame.schema))
        return _Written(self._counted(table, "output", rows), read, 0, _now(), None)

    @staticmethod
    def _outputs(step: StepInfo, result: Any) -> list[DataFrame]:
        outputs = list(result) if len(step.outputs) > 1 and isinstance(result, (tuple, list)) else [result]
        if len(outputs) != len(step.outputs):
            raise CaptureError(
                f"step {step.name!r} declares outputs {list(step.outputs)} but returned {len(outputs)} value(s)"
            )
        for name, out in zip(step.outputs, outputs, strict=True):
            if not isinstance(out, DataFrame):
                raise CaptureError(
                    f"step {step.name!r} returned {type(out).__name__} for {name!r}, not a Spark DataFrame"
                )
        return outputs

    def _location(
        self, step: StepInfo, outputs: int, frame: DataFrame, rewritten: Rewritten
    ) -> aligned.Aligned | tuple[int, Rates] | None:
        """How the output is stored as a location edge: row-aligned, declared
        rates (its one input table and the rates), or None (its triples)."""
        if not self.location_lineage:
            return None
        rates = declared_rates(step.params, step.name)
        if rates is not None:
            return declared.checkable(step.name, outputs, rewritten), rates
        return aligned.aligned_output(self.rewriter.jvm, self.rewriter.jvm.plan(frame), rewritten)

    def _materialise(
        self,
        table: TableInfo,
        rewritten: Rewritten,
        op_id: int,
        frame: DataFrame,
        location: aligned.Aligned | tuple[int, Rates] | None = None,
        step: str = "",
        user_files: DirectFiles | None = None,
        rewritten_in: float = 0.0,
    ) -> _Written:
        """Write the output once (rows, row numbers, per-row triples and the
        markers of group joins); start writing the group joins' triples. A
        row-aligned output keeps its input's row numbers and gets an edge
        instead of triples. The log line says where the step's time went
        (``rewritten_in``: seconds the step's plan rewrite took)."""
        deferred = any(g.cells or g.member is not None for g in rewritten.groups)
        # The group joins' rows need the output rows' flat members beside the keys.
        flat = tuple(s.column for s in rewritten.members.flat) if deferred and rewritten.members else ()
        kept = (*rewritten.hidden, *flat) if deferred else ()
        row_aligned = location if isinstance(location, aligned.Aligned) else None
        if row_aligned is not None:
            layout = OutputLayout(tuple(table.columns), (), kept, rewritten.members, numbered_by=row_aligned.rows)
        else:
            layout = OutputLayout(tuple(table.columns), tuple(rewritten.cells), kept, rewritten.members)
        writing = time.perf_counter()
        rows, triples, runs = self._write(
            rewritten.frame, layout, table.table_id, op_id, keys=deferred, user_files=user_files
        )
        timings = StepTimings(step, table.name, rewritten_in, time.perf_counter() - writing)
        edge = None
        if row_aligned is not None:
            source = self._runs.get(row_aligned.input)
            checked = aligned.checked_runs(step, runs, rows, None if source is None else source.size)
            edge = aligned.edge_of(op_id, table.table_id, row_aligned, checked)
        self._runs[table.table_id] = RowRuns.of(sorted(runs))
        # Its row count now known: a later step's rewrite may bound its rows by it.
        self._register(TableLeaf(table.table_id, table.columns, self._rows_path(table.table_id), rows=rows))
        if isinstance(location, tuple):
            edge = self._declared_edge(step, op_id, table.table_id, rewritten, *location, captured=triples)
            triples = 0
        # The group joins' jobs, and the read of the keys they join on, run in the background.
        groups = self.triples.submit(self._write_groups, kept, rewritten, table.table_id, op_id) if deferred else None
        logger.info(
            "step %s wrote %s: %s rows, %s triples%s (plan rewrite %.2f s, writer job %.2f s)",
            step,
            table.name,
            f"{rows:,}",
            f"{triples:,}",
            " (as a location edge)" if edge is not None else "",
            timings.rewrite,
            timings.writer_job,
            extra={STEP_TIMINGS: timings},
        )
        read = _Once(functools.partial(self._read_back, table, frame.schema))
        return _Written(self._counted(table, "output", rows), read, triples, _now(), groups, edge)

    def _declared_edge(
        self, step: str, op_id: int, table_id: int, rewritten: Rewritten, input_table: int, rates: Rates, captured: int
    ) -> LocationEdge:
        """The rated edge of a step that declares rates, checked on Spark
        against the ``captured`` triples its job wrote, which it then replaces
        (:mod:`.declared`)."""
        destination = self.run.triples_destination()
        prefix = Target(table_id, op_id, None, destination).prefix  # the files of the output's writer job
        edge = declared.rated_edge(
            step, op_id, table_id, input_table, rewritten, self._runs[input_table], self._runs[table_id], rates
        )
        declared.check(self.spark, step, edge, declared.written_triples(self.spark, destination, prefix), captured)
        destination.discard_files(prefix, ())
        return edge

    def _reread(self, job: Future[_Written], table: TableInfo, data_schema: StructType) -> DataFrame:
        job.result()  # its rows are all written
        return self._read_back(table, data_schema)

    def _write_groups(
        self, kept: Sequence[str], rewritten: Rewritten, table_id: int, op_id: int
    ) -> tuple[int, dt.datetime]:
        """Write the triples of the output's group joins, from the row numbers
        and ``kept`` columns its writer job wrote beside them (:mod:`.groupjoin`)."""
        keys_schema = StructType(
            [StructField(schema.ROW_COLUMN, LongType())] + [rewritten.frame.schema[h] for h in kept]
        )
        keys = read_parquet(
            self.spark,
            self.run.store_uri,
            self.run.scratch_destination(KEYS_DIR, str(table_id)).spark_path,
            keys_schema,
        )
        written = 0
        flat = rewritten.members.flat if rewritten.members else ()
        for g, (frame, cells, group) in enumerate(group_jobs(keys, rewritten.groups, [s.column for s in flat])):
            pairs = PairLayout(group.member, flat) if group.member is not None else None
            target = Target(
                table_id,
                op_id,
                None,
                self.run.triples_destination(),
                lineage=self.run.row_lineage_destination() if pairs else None,
                job=f"group{g}",
            )
            body = functools.partial(write_pairs, target, cells, pairs)
            written += self._run_writer(frame, body, target).get("triples", 0)
        return written, _now()

    # -- end of run ------------------------------------------------------------
    def settle(self) -> None:
        """Wait for every background job, without raising their errors (the
        run raises them when it ends): Spark may be stopped next."""
        jobs = [job for _, op_jobs in self.pending for job in op_jobs]
        wait(jobs)
        groups = [j.result().groups for j in jobs if j.exception() is None]
        wait([g for g in groups if g is not None])

    def close(self, error: BaseException | None) -> None:
        failed = error
        try:
            self._close(error)
        except BaseException as exc:
            failed = exc
            raise
        finally:  # the run's files are about to move or vanish
            self._keep_nondeterministic(committing=failed is None and self.run.store_rows)
            self._ended = True

    def _close(self, error: BaseException | None) -> None:
        pending, self.pending = self.pending, []
        writing = sum(not job.done() for _, jobs in pending for job in jobs)
        if writing and error is None:
            logger.info("waiting for %d step output(s) still being written", writing)
        # No job may outlive the staging directory: wait for every one, even
        # when the run failed (the transaction then discards the directory).
        # A failed run starts no queued job. Step jobs end before the triple
        # jobs shut down: a step job may still submit one.
        self.steps.shutdown(wait=True, cancel_futures=error is not None)
        self.triples.shutdown(wait=True, cancel_futures=error is not None)
        if error is not None:
            return
        if self.lost is not None:  # files a task wrote are not in the store: commit nothing
            raise self.lost
        for op, jobs in pending:  # a failed write fails the run
            outputs = [j.result() for j in jobs]
            groups = [o.groups.result() for o in outputs if o.groups is not None]
            for out in outputs:
                self.run.record_table(out.table)
                if out.edge is not None:
                    self.run.record_location_edge(out.edge)
            self.run.finish_op(  # the triples the op stands for, stored or as edges: the same with edges off
                op.op_id,
                triples=sum(o.stands_for for o in outputs) + sum(g[0] for g in groups),
                finished=max([o.finished for o in outputs] + [g[1] for g in groups]),
            )
        # The run's finish() (after close) removes the scratch files, drops the
        # rows of a run that keeps none (they were only the fixed ids' carrier
        # for downstream steps) and records the rows and triples datasets.

    # -- a failed capture (fail open) ---------------------------------------------
    def table_ids(self) -> frozenset[int]:
        """The tables of the run handed out so far (sources and step outputs)."""
        return frozenset(self._handed)

    def abandon(self, tables: Collection[int], after: int) -> None:
        """Forget the step outputs ``tables`` whose capture failed, so that
        the run commits without them: the ops writing them (their jobs
        waited for) leave the staged ops, and their files are deleted; so are
        the rows of any table reserved after table id ``after`` and never
        handed out (a source whose storing failed half way)."""
        abandoned = set(tables)
        dropped = [(op, jobs) for op, jobs in self.pending if abandoned & set(op.outputs)]
        for op, jobs in dropped:
            wait(jobs)  # no job may write into the files deleted below
            groups = [j.result().groups for j in jobs if j.exception() is None]
            wait([g for g in groups if g is not None])
            self.pending.remove((op, jobs))
            abandoned |= set(op.outputs)
        self.run.forget_tables(abandoned)
        for table_id in sorted(abandoned | self._unhanded_rows(after)):
            self._handed.pop(table_id, None)
            self._runs.pop(table_id, None)
            self._stored.pop(table_id, None)
            self._delete_files(table_id)

    def _unhanded_rows(self, after: int) -> set[int]:
        """Tables reserved after ``after`` with a rows directory but never handed out."""
        rows = self.run.triples_destination()  # a sibling of the rows directories' parent (see StagedRun)
        parent = dataclasses.replace(
            rows, path=rows.path.rsplit("/", 1)[0] + "/rows", spark_path=rows.spark_path.rsplit("/", 1)[0] + "/rows"
        )
        listing = parent.filesystem().get_file_info(pafs.FileSelector(parent.path, allow_not_found=True))
        found = {int(i.base_name) for i in listing if i.type == pafs.FileType.Directory and i.base_name.isdigit()}
        return {t for t in found if t > after and t not in self._handed}

    def _delete_files(self, table_id: int) -> None:
        self.run.rows_destination(table_id).delete()
        prefix = f"t{table_id}-"  # every writer job of the table names its files so (writer.Target)
        self.run.triples_destination().discard_files(prefix, ())
        self.run.row_lineage_destination().discard_files(prefix, ())
        self.run.scratch_destination(KEYS_DIR, str(table_id)).delete()

    # -- after the run ---------------------------------------------------------
    # The DataFrames handed out stay usable after the run (module docstring).
    # A table whose own plan is deterministic becomes that plan again, over
    # its inputs' after-run DataFrames: recomputing it gives the rows stored,
    # and it no longer depends on the store. A nondeterministic one
    # (monotonically_increasing_id, rand, uuid, ...) would give other rows if
    # recomputed: it reads the rows stored for it instead -- in the
    # committed run when the run keeps rows (read on first use), else a
    # local checkpoint of them taken before the run's files go.
    def _keep_nondeterministic(self, committing: bool) -> None:
        """Before the run's files move or vanish: checkpoint the stored rows of
        every nondeterministic table (none when the committed run keeps them)."""
        self._committed_rows = committing
        if committing:
            return
        for table_id, handed in list(self._handed.items()):
            try:
                if not self.rewriter.jvm.plan(handed.original).deterministic():
                    self._after_run[table_id] = handed.current().localCheckpoint(eager=True)
            except Exception as exc:  # its rows were never written (the run failed), or Spark has stopped
                logger.warning("table %d: its stored rows cannot be kept after the run (%s)", table_id, exc)

    def _original(self, table_id: int) -> DataFrame:
        """Table ``table_id`` after the run: the user's own plan (the DataFrame
        the user gave or the step returned, its reads of the run's tables
        replaced by theirs, recursively) or, for a nondeterministic plan,
        its stored rows. Built on first use, once."""
        with self._lock:  # PySpark allows several threads; build each plan once
            if table_id not in self._after_run:
                jvm = self.rewriter.jvm
                plan = jvm.plan(self._handed[table_id].original)
                if not plan.deterministic() and self._committed_rows:
                    self._after_run[table_id] = self._committed(table_id)
                else:
                    self._after_run[table_id] = jvm.frame(jvm.replace_leaves(plan, self._original_leaf))
            return self._after_run[table_id]

    def _committed(self, table_id: int) -> DataFrame:
        """The rows of ``table_id`` in the committed run (the user's plan,
        recomputed, when they are not there: the commit failed)."""
        original = self._handed[table_id].original
        store = self.run.store if isinstance(self.run, StagedRun) else None
        fields = StructType([original.schema[c] for c in original.columns])  # the stored row number is not shown
        try:
            if store is None:
                raise CaptureError("the run's store is unknown")
            return read_parquet(
                self.spark, store.uri, store.spark_path("runs", self.run.run_id, ROWS, str(table_id)), fields
            )
        except Exception as exc:
            logger.warning("table %d: the committed run's rows cannot be read (%s); recomputed", table_id, exc)
            jvm = self.rewriter.jvm
            return jvm.frame(jvm.replace_leaves(jvm.plan(original), self._original_leaf))

    def _original_leaf(self, leaf: Any) -> Any | None:
        """The after-run DataFrame standing in for ``leaf`` when it reads a table of the run."""
        jvm = self.rewriter.jvm
        if leaf.nodeName() != "LogicalRelation":
            return None
        try:
            paths = [str(p) for p in jvm.items(leaf.relation().location().rootPaths())]
            stored = self.rewriter.tables.read_by(paths)
        except Exception:  # py4j: not a file relation; CaptureError: not a table of this run
            return None
        row_number = {schema.ROW_COLUMN: F.lit(None)}  # the stored rows' own column: no user code reads it
        return jvm.standing_in(leaf, self._original(stored.table_id), row_number)
