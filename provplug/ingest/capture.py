"""Capture runs and the ``@provplug.step`` decorator.

``with provplug.capture(engine, store=...) as run:`` picks the capture adapter
that accepts ``engine`` (through the adapter hook), stages everything in one
store transaction and fires the lifecycle hooks. Decorated steps called inside
the block are captured; outside any capture they run unchanged. When the block
ends, the adapter's session closes, the run finishes (see
:meth:`provplug.ingest.recorder.StagedRun.finish`) and the transaction commits; when
it raises, the session closes with the error and nothing is committed.

``reduce={"TABLE": reduction}`` keeps provenance for only some rows of a
source (see :mod:`provplug.reduce`): in ``reduce_mode="production"`` (the
default) it is stored whole, the pipeline computes every row and, once the
session has closed, only the triples on paths from kept rows are kept; only
when ``reduce_mode="thesis"`` is named is the source reduced before the
adapter stores it (the pipeline runs on the kept rows, so its outputs
change), and a warning on the ``provplug.reduce`` logger says so. Either way
the run's manifest records the reduction.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from provplug.errors import CaptureError
from provplug.ingest.recorder import StagedRun
from provplug.ingest.runcontext import checked_label, python_entry, run_context
from provplug.ingest.transaction import observed_run
from provplug.model import COARSE_REASON, RunInfo, StepInfo
from provplug.plugin.manager import Plugins, get_plugins
from provplug.plugin.protocols import AdapterSession, Store, Transaction
from provplug.plugin.reductions import MODES, Reduction
from provplug.reduce.spec import reductions_from

F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger(__name__)  # what a capture is doing: run started, steps, committed

_active_run: contextvars.ContextVar[ActiveRun | None] = contextvars.ContextVar("provplug_run", default=None)
_modules: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("provplug_modules", default=())
MODULE_PARAM = "module"  # op parameter naming a step's module (the zoom queries')
reduce_logger = logging.getLogger("provplug.reduce")
INDEX_MODES = ("auto", "always")  # capture(index=...): see provplug.index.at_commit
summary_logger = logging.getLogger("provplug.summary")  # one line per committed run


class ActiveRun(StagedRun):
    """A capture run in progress: what users call (:meth:`source`) and what
    the adapter's session stages into (the :class:`~provplug.plugin.protocols.RunRecorder`
    methods of :class:`~provplug.ingest.recorder.StagedRun`)."""

    def __init__(
        self,
        store: Store[Transaction],
        txn: Transaction,
        info: RunInfo,
        plugins: Plugins,
        store_rows: bool,
        engine: object = None,
        reduce: Mapping[str, Reduction] | None = None,
        reduce_mode: str = "production",
        location_lineage: bool = True,
        strict: bool = False,
    ) -> None:
        # Production-mode reduction filters the stored triples to paths from
        # kept rows: every step keeps its triples for it (no location edges).
        super().__init__(
            store,
            txn,
            store_rows=store_rows,
            location_lineage=location_lineage and not (reduce and reduce_mode == "production"),
            strict=strict,
        )
        self.info = info
        self.plugins = plugins
        self.session: AdapterSession | None = None
        self.engine = engine
        self.reductions = dict(reduce or {})
        self.reduce_mode = reduce_mode
        if self.reductions:
            self.record_reduction(
                {"mode": reduce_mode, "tables": {t: r.record() for t, r in sorted(self.reductions.items())}}
            )

    # -- user API ------------------------------------------------------------
    def source(self, data: Any, name: str) -> Any:
        """Register ``data`` as the source table ``name`` and return it traced
        (in thesis mode, only its rows the table's reduction keeps)."""
        assert self.session is not None
        if name in self.reductions and self.reduce_mode == "thesis":
            data = self.reductions[name].select(self._frame(data))
        return self.session.source(data, name)

    def _frame(self, data: Any) -> Any:
        """``data`` as a Spark DataFrame (reductions select in Spark)."""
        from pyspark.sql import DataFrame

        return data if isinstance(data, DataFrame) else self.engine.createDataFrame(data)  # type: ignore[attr-defined]

    def finish(self) -> None:
        """In production mode, choose the kept rows of each reduced source
        (in Spark, beside its stored rows) before the run's triples are
        filtered to the paths from them; then finish the run."""
        missing = sorted(set(self.reductions) - set(self.sources))
        if missing:
            raise CaptureError(
                f"reduce names {', '.join(map(repr, missing))}, which the run never registered "
                f"as a source (sources: {', '.join(sorted(self.sources)) or 'none'})"
            )
        if self.reductions and self.reduce_mode == "production":
            from provplug.reduce.production import kept_row_numbers

            kept = {}
            for name, reduction in self.reductions.items():
                table = self.sources[name]
                kept[table.table_id] = kept_row_numbers(
                    self.engine,  # type: ignore[arg-type]
                    self.rows_destination(table.table_id),
                    table.columns,
                    reduction,
                )
            self.keep_source_rows(kept)
        super().finish()

    # -- called by @step -----------------------------------------------------
    def call_step(
        self, step: StepInfo, func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Any:
        assert self.session is not None
        step = _in_module(step)
        logger.info("step %s started", step.name)
        self.plugins.step_started(self.info, step)
        ops_before = len(self.txn.ops)
        try:
            result = self.session.run_step(step, func, args, kwargs)
        except BaseException as exc:
            self.plugins.step_failed(self.info, step, exc)
            raise
        for op in self.txn.ops[ops_before:]:
            self.plugins.step_finished(self.info, step, op)
        return result


@contextlib.contextmanager
def module(name: str) -> Iterator[None]:
    """Group the steps called inside the block as module ``name``: each
    records it as its op parameter ``module``, which ``provplug lineage
    --zoom-out NAME`` zooms out of. Nested blocks give dotted names
    (``outer.inner``), as does a step that names its own module inside one."""
    if not isinstance(name, str) or not name.strip(".") or name != name.strip("."):
        raise CaptureError(f"a module name is non-empty text without a leading or trailing dot, not {name!r}")
    token = _modules.set((*_modules.get(), name))
    try:
        yield
    finally:
        _modules.reset(token)


def _in_module(step: StepInfo) -> StepInfo:
    """``step`` with the enclosing modules prefixed to its ``module`` parameter."""
    enclosing = _modules.get()
    if not enclosing:
        return step
    own = step.params.get(MODULE_PARAM)
    name = ".".join([*enclosing, own] if isinstance(own, str) and own else enclosing)
    return dataclasses.replace(step, params={**step.params, MODULE_PARAM: name})


def current_run() -> ActiveRun | None:
    """The capture run active in this context, if any."""
    return _active_run.get()


def step(name: str, *, output: str | Sequence[str], **params: Any) -> Callable[[F], F]:
    """Mark a pipeline function as a provenance step named ``name``.

    ``output`` names the table the function returns (a tuple of names when it
    returns a tuple). Extra keyword arguments are recorded as op parameters.
    ``rates=`` (a :class:`provplug.location.Rates` or its fields as a
    mapping) declares the static rates of a one-input, one-output step
    (output position k from the input positions of the firing that made it,
    rows in row-number order): with location lineage on, a Spark capture
    checks the declaration against the triples it captured and stores one
    rated edge instead; a Beam capture stores a declared step whose body is
    one Map, MapTuple, FlatMap or ParDo (consumption 1, production f, no
    buffer) as an edge, its output numbered by position and each element's
    fan-out checked in the worker; a declaration the data contradicts is a
    :class:`~provplug.errors.LocationError` (never a wrong answer).
    """
    outputs = (output,) if isinstance(output, str) else tuple(output)
    if not outputs:
        raise ValueError("a step needs at least one output table name")
    if params.get("rates") is not None:
        params = {**params, "rates": _rates_record(params["rates"])}

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            run = _active_run.get()
            if run is None:
                return func(*args, **kwargs)
            return run.call_step(StepInfo(name, (), outputs, params), func, args, kwargs)

        wrapper.__dict__["provplug_step"] = StepInfo(name, (), outputs, params)  # what the step declares
        return cast(F, wrapper)  # functools.wraps keeps func's signature; mypy cannot see it

    return decorate


def _rates_record(rates: Any) -> dict[str, Any]:
    """Declared rates as an op parameter (checked now: a bad one fails at declaration)."""
    from provplug.location import rates_of

    return dataclasses.asdict(rates_of(rates))


def warn_thesis_mode(reductions: Mapping[str, Reduction]) -> None:
    """Say, where a person sees it, that thesis mode changes the pipeline's results."""
    # A logging warning, not warnings.warn: it is shown on every run (Python
    # prints it on stderr when logging is not configured; Kedro shows it in its log).
    reduce_logger.warning(
        "provplug: reduce_mode='thesis': the pipeline runs on the kept rows of %s only, so its outputs are "
        "computed from the kept rows only and differ from an unreduced run; reduce_mode='production' (the "
        "default) keeps every result",
        ", ".join(sorted(reductions)),
    )


@contextlib.contextmanager
def capture(
    engine: object,
    store: str | os.PathLike[str],
    *,
    store_rows: bool = True,
    plugins: Plugins | None = None,
    reduce: Mapping[str, Reduction | str] | None = None,
    reduce_mode: str = "production",
    location_lineage: bool = True,
    label: str | None = None,
    tags: Sequence[str] = (),
    entry_point: Mapping[str, Any] | None = None,
    strict: bool = False,
    index: str | None = None,
) -> Iterator[ActiveRun]:
    """Capture one run of a pipeline on ``engine`` into ``store``, atomically.

    By default a step provplug cannot capture cell by cell becomes a coarse
    step (its rows stored, its dependency recorded at the finest certain
    grain, docs/capture-semantics.md); ``strict=True`` makes it fail the run
    instead. ``index="auto"`` indexes the run as it commits when it is small
    (``index="always"``: whatever its size; docs/queries.md).

    ``store_rows=False`` keeps only ids (answers then show no cell values).
    ``reduce``: source table name -> a :class:`provplug.reduce.Reduction`
    (or its spec text, ``"sample:ratio=0.33,seed=1"``); ``reduce_mode``:
    ``"production"`` (the default: every row is computed, results unchanged)
    or ``"thesis"`` (the pipeline runs on the kept rows only, so its outputs
    change; said in a warning), see :mod:`provplug.reduce`. Reduction
    needs a Spark pipeline. ``location_lineage=False`` stores every step's
    triples; by default a step the adapter finds row-aligned (a Spark
    select / withColumn / cast / scalar UDF over one input) stores one
    location edge instead (:mod:`provplug.location`, docs/capture-semantics.md), which
    every reader expands to the same triples.
    ``label`` and ``tags`` name the run (``provplug runs``; ``--run LABEL``
    picks its latest run); ``entry_point`` says how it was started (see
    :mod:`provplug.ingest.runcontext`; default: the calling Python module).
    """
    if _active_run.get() is not None:
        raise CaptureError("a capture run is already active in this context")
    if index is not None and index not in INDEX_MODES:
        raise CaptureError(f"index must be one of {', '.join(INDEX_MODES)} or None, not {index!r}")
    if reduce_mode not in MODES:
        raise CaptureError(f"reduce_mode must be one of {', '.join(MODES)}, not {reduce_mode!r}")
    plugins = plugins or get_plugins()
    reductions = reductions_from(reduce, plugins)
    adapter = plugins.adapter_for(engine)
    if reductions and not getattr(adapter, "reduces", False):
        raise CaptureError(
            f"provenance reduction needs an adapter that reduces (Spark's); the {adapter.name} adapter cannot reduce"
        )
    if reductions and reduce_mode == "thesis":
        warn_thesis_mode(reductions)
    label, tags = checked_label(label, tags)
    entry = dict(entry_point) if entry_point is not None else python_entry(sys._getframe(1))
    from provplug.plugin.connection import Connection, connecting  # pyarrow: not before a run starts
    from provplug.store.open import open_store

    connection = (plugins.filesystem_settings(engine) or Connection()).over(Connection.from_environment())
    target = open_store(connection.applied(os.fspath(store)), plugins)
    with connecting(connection), observed_run(target, plugins, "capture", adapter.name) as (txn, info):
        info.index = index  # run_finished indexes it (provplug.index.at_commit)
        run = ActiveRun(
            target, txn, info, plugins, store_rows, engine, reductions, reduce_mode, location_lineage, strict
        )
        logger.info("capture run %s started (%s) into %s", info.run_id, adapter.name, target.uri)
        run.record_context(run_context(adapter.name, engine, entry, label, tags))
        token = _active_run.set(run)
        try:
            run.session = adapter.open(engine, run)
            yield run
        except BaseException as exc:
            logger.info("run %s failed (%s): nothing is committed", info.run_id, type(exc).__name__)
            if run.session is not None:
                run.session.close(exc)
            raise
        else:
            run.session.close(None)  # a failure here fails the run; the session has closed
            logger.info("run %s: all steps written; committing", info.run_id)
            run.finish()
        finally:
            _active_run.reset(token)
    logger.info("run %s committed: %d ops into %s", info.run_id, len(txn.ops), target.uri)
    _announce(run)


def run_summary(run: StagedRun) -> str:
    """One line saying what a committed run holds: its number and id,
    tables, triples, and -- what a user must not miss -- its coarse steps
    with their reasons and the writes it could not capture."""
    txn = run.txn
    number = getattr(txn, "number", None)
    tables = {t for op in txn.ops for t in (*op.inputs, *op.outputs)}
    triples = sum(op.triples or 0 for op in txn.ops)
    parts = [f"{len(txn.ops)} steps", f"{len(tables)} tables", f"{triples:,} triples"]
    coarse = [op for op in txn.ops if op.kind == "coarse"]
    if coarse:
        reasons = "; ".join(f"{op.name}: {op.params.get(COARSE_REASON, 'not captured exactly')}" for op in coarse)
        parts.append(f"{len(coarse)} coarse step{'s' if len(coarse) > 1 else ''} ({reasons})")
    if run.uncaptured_writes:
        writes = "; ".join(f"{w.name}: {w.reason}" for w in run.uncaptured_writes)
        parts.append(
            f"{len(run.uncaptured_writes)} uncaptured write{'s' if len(run.uncaptured_writes) > 1 else ''} ({writes})"
        )
    return (
        f"captured run {number if number is not None else '?'} ({run.run_id}; {', '.join(parts)}) into {run.store.uri}"
    )


def _announce(run: StagedRun) -> None:
    """When the run has coarse steps or uncaptured writes, its summary as a
    warning (shown on stderr even when the application configured no
    logging): what a user must not miss. (A run without either has said
    "committed" at info level.)"""
    if any(op.kind == "coarse" for op in run.txn.ops) or run.uncaptured_writes:
        summary_logger.warning("provplug: %s", run_summary(run))
