"""Capture without touching the pipeline: every DataFrame write is a step.

``with provplug.capture_writes(spark, store=...):`` captures each DataFrame
write made inside the block as a step whose output table is the written
dataset and whose inputs are the files, tables and earlier writes its plan
reads (the Spark adapter's write interceptor, registered through
``provplug_register_write_interceptors``). :func:`run_script` runs an
unmodified script that way (``provplug run``).

The run starts with the first write, on that DataFrame's SparkSession (a
script creates its own session, after the writes are intercepted): a block
or script that writes nothing commits nothing. It commits when the block (or
the script) ends normally; an exception, or a script's non-zero exit status,
commits nothing and leaves the store as it was.

The files a captured write produces are written from the rows the run stored
(one execution); a write provplug cannot capture is still done, as without
provplug, and recorded as an uncaptured write, unless ``strict`` (see
docs/capturing.md, "One execution" and "Fail open").
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import logging
import os
import runpy
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from provplug.errors import CaptureError, CaptureNotStartedError
from provplug.ingest.capture import ActiveRun, capture
from provplug.plugin.manager import Plugins, get_plugins

logger = logging.getLogger(__name__)


class WriteCapture:
    """One capture run of writes, started by the first write (:attr:`run`
    stays None while nothing has been written)."""

    def __init__(
        self,
        store: str | os.PathLike[str],
        store_rows: bool,
        plugins: Plugins | None,
        engine: object | None,
        reduce: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        strict: bool = False,
    ) -> None:
        self.store, self.store_rows, self.plugins = store, store_rows, plugins
        self.strict = strict
        self.context = dict(context or {})  # capture()'s label, tags and entry_point
        self.engine = engine
        self.reduce = reduce
        self.run: ActiveRun | None = None
        self.not_started: CaptureNotStartedError | None = None  # why the run could not start (not strict)
        # The run is entered and left in a context of its own: the first
        # write may come from any thread of the script, its end from another.
        self._context = contextvars.Context()
        self._stack = contextlib.ExitStack()

    def start(self, engine: object) -> ActiveRun:
        """The run, started on ``engine`` by the first write. When it cannot
        start (its workers cannot import provplug, the store cannot be
        opened, ...), a strict capture raises; otherwise this and every
        later call raise :class:`CaptureNotStartedError`, logged once, and
        the writes go on as in a plain run (fail open)."""
        if self.not_started is not None:
            raise self.not_started
        if self.run is None:
            if self.engine is not None and not _same_engine(engine, self.engine):
                raise CaptureError("a write inside capture_writes comes from another SparkSession than the one given")
            opened = capture(
                engine,
                self.store,
                store_rows=self.store_rows,
                plugins=self.plugins,
                reduce=self.reduce,
                reduce_mode="production",
                strict=self.strict,
                **self.context,
            )
            try:
                self.run = self._context.run(self._stack.enter_context, opened)
            except CaptureError as exc:
                if self.strict:
                    raise
                logger.warning("provplug: nothing is captured, the run could not start: %s", exc)
                self.not_started = CaptureNotStartedError(str(exc))
                raise self.not_started from exc
        return self.run

    def end(self, error: BaseException | None) -> None:
        """Commit the run (no error) or roll it back; nothing when nothing was written."""
        if error is None:
            self._context.run(self._stack.close)
        else:
            self._context.run(self._stack.__exit__, type(error), error, error.__traceback__)


def _same_engine(engine: object, given: object) -> bool:
    """``engine`` is the one given, or a session of the same context (Spark's
    ``newSession()``, or the active session a DataFrame built from an RDD
    takes): one run follows one SparkContext, as the write tracer does."""
    context = getattr(given, "sparkContext", None)
    return engine is given or (context is not None and getattr(engine, "sparkContext", None) is context)


@contextlib.contextmanager
def capture_writes(
    spark: object | None = None,
    *,
    store: str | os.PathLike[str],
    store_rows: bool = True,
    plugins: Plugins | None = None,
    reduce: Mapping[str, Any] | None = None,
    label: str | None = None,
    tags: Sequence[str] = (),
    entry_point: Mapping[str, Any] | None = None,
    strict: bool = False,
    index: str | None = None,
) -> Iterator[WriteCapture]:
    """Capture every DataFrame write inside the block as a step, into ``store``.

    ``spark``, when given, is the session the writes must come from; without
    it the run binds to the session of the first write. ``reduce`` (source
    table name -> reduction or its spec, see :mod:`provplug.reduce`) reduces
    the provenance kept, in production mode: the script reads its own
    inputs, so every row is computed and only the kept rows' triples stored.
    ``label``, ``tags``, ``entry_point``, ``strict`` and ``index`` are
    :func:`provplug.capture`'s (the entry point defaults to the module
    calling this function).
    """
    from provplug.ingest.runcontext import checked_label, python_entry

    label, tags = checked_label(label, tags)  # a bad label fails before anything runs
    entry = dict(entry_point) if entry_point is not None else python_entry(sys._getframe(1))
    writes = WriteCapture(
        store,
        store_rows,
        plugins,
        spark,
        reduce,
        {"label": label, "tags": tags, "entry_point": entry, "index": index},
        strict,
    )
    interceptors = (plugins or get_plugins()).write_interceptors()
    if not interceptors:
        raise CaptureError(
            "no plugin intercepts writes: install a capture adapter that does (provplug's Spark adapter)"
        )
    with contextlib.ExitStack() as intercepting:
        for interceptor in interceptors:
            intercepting.enter_context(interceptor.intercept(writes.start))
        try:
            yield writes
        except BaseException as exc:
            writes.end(exc)
            raise
        writes.end(None)


# -- provplug run ----------------------------------------------------------------------
class _ScriptFailed(Exception):
    """The script exited with a non-zero status or raised: commit nothing."""

    def __init__(self, status: int, error: BaseException | None = None) -> None:
        super().__init__(f"the script failed with status {status}")
        self.status, self.error = status, error


def run_script(
    script: str,
    args: Sequence[str],
    store: str | os.PathLike[str],
    *,
    store_rows: bool = True,
    reduce: Mapping[str, Any] | None = None,
    label: str | None = None,
    tags: Sequence[str] = (),
    strict: bool = False,
    index: str | None = None,
) -> tuple[int, ActiveRun | None]:
    """Run ``script`` with ``args`` as ``python script ARGS`` would
    (``sys.argv``, ``__name__ == "__main__"``, its directory first on
    ``sys.path``), capturing its writes into ``store``. Returns the script's
    exit status and the committed run (None when the script failed or wrote
    nothing). A script's uncaught exception is printed as Python prints it.
    The run records the script and its arguments as its entry point.
    What the capture is doing (run started, each step started and written,
    committed) is shown on stderr unless the application configured logging."""
    from provplug.ingest.runcontext import script_entry

    path = os.path.abspath(script)
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "no such script", script)
    from provplug.progress import Progress, logs_shown

    try:
        with (
            logs_shown(Progress()),
            _as_main(path, args),
            capture_writes(
                store=store,
                store_rows=store_rows,
                reduce=reduce,
                label=label,
                tags=tags,
                entry_point=script_entry(path, args),
                strict=strict,
                index=index,
            ) as writes,
        ):
            logger.info("running %s; its first DataFrame write starts the capture run", script)
            status, error = _execute(path)
            if status != 0:
                raise _ScriptFailed(status, error)
    except _ScriptFailed as failed:
        if failed.error is not None:
            _print_script_traceback(failed.error, path)
        return failed.status, None
    return 0, writes.run


@contextlib.contextmanager
def _as_main(path: str, args: Sequence[str]) -> Iterator[None]:
    argv, search_path = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(path))
    try:
        yield
    finally:
        sys.argv, sys.path[:] = argv, search_path


def _execute(path: str) -> tuple[int, BaseException | None]:
    """Run the script; its exit status, and its uncaught exception if any."""
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        return _exit_status(exc.code), None
    except KeyboardInterrupt as exc:
        return 130, exc
    except BaseException as exc:  # the script's own failure, reported as Python reports it
        return 1, exc
    return 0, None


def _exit_status(code: Any) -> int:
    """What ``sys.exit(code)`` makes the interpreter exit with."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_script_traceback(error: BaseException, path: str) -> None:
    """The traceback from the script's own frames on (none of provplug's or runpy's)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb or error.__traceback__)
