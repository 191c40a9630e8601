"""Capture runs and the ``@provplug.step`` decorator.

``with provplug.capture(engine, store=...) as run:`` picks the capture adapter
that accepts ``engine`` (through the adapter hook), stages everything in one
store transaction and fires the lifecycle hooks. Decorated steps called inside
the block are captured; outside any capture they run unchanged. When the block
ends, the adapter's session closes, the run finishes (see
:meth:`provplug.recorder.StagedRun.finish`) and the transaction commits; when
it raises, the session closes with the error and nothing is committed.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from .errors import CaptureError
from .lifecycle import observed_run
from .model import RunInfo, StepInfo
from .plugins import Plugins, get_plugins
from .protocols import AdapterSession, Store, Transaction
from .recorder import StagedRun

F = TypeVar("F", bound=Callable[..., Any])

_active_run: contextvars.ContextVar[ActiveRun | None] = contextvars.ContextVar("provplug_run", default=None)


class ActiveRun(StagedRun):
    """A capture run in progress: what users call (:meth:`source`) and what
    the adapter's session stages into (the :class:`~provplug.protocols.RunRecorder`
    methods of :class:`~provplug.recorder.StagedRun`)."""

    def __init__(
        self, store: Store[Transaction], txn: Transaction, info: RunInfo, plugins: Plugins, store_rows: bool
    ) -> None:
        super().__init__(store, txn, store_rows=store_rows)
        self.info = info
        self.plugins = plugins
        self.session: AdapterSession | None = None

    # -- user API ------------------------------------------------------------
    def source(self, data: Any, name: str) -> Any:
        """Register ``data`` as the source table ``name`` and return it traced."""
        assert self.session is not None
        return self.session.source(data, name)

    # -- called by @step -----------------------------------------------------
    def call_step(self, step: StepInfo, func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        assert self.session is not None
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


def current_run() -> ActiveRun | None:
    """The capture run active in this context, if any."""
    return _active_run.get()


def step(name: str, *, output: str | Sequence[str], **params: Any) -> Callable[[F], F]:
    """Mark a pipeline function as a provenance step named ``name``.

    ``output`` names the table the function returns (a tuple of names when it
    returns a tuple). Extra keyword arguments are recorded as op parameters.
    """
    outputs = (output,) if isinstance(output, str) else tuple(output)
    if not outputs:
        raise ValueError("a step needs at least one output table name")

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


@contextlib.contextmanager
def capture(
    engine: object,
    store: str | os.PathLike[str],
    *,
    store_rows: bool = True,
    plugins: Plugins | None = None,
) -> Iterator[ActiveRun]:
    """Capture one run of a pipeline on ``engine`` into ``store``, atomically.

    ``store_rows=False`` keeps only ids (answers then show no cell values).
    """
    if _active_run.get() is not None:
        raise CaptureError("a capture run is already active in this context")
    plugins = plugins or get_plugins()
    adapter = plugins.adapter_for(engine)
    target = plugins.store(os.fspath(store))
    with observed_run(target, plugins, "capture", adapter.name) as (txn, info):
        run = ActiveRun(target, txn, info, plugins, store_rows)
        token = _active_run.set(run)
        try:
            run.session = adapter.open(engine, run)
            yield run
        except BaseException as exc:
            if run.session is not None:
                run.session.close(exc)
            raise
        else:
            run.session.close(None)  # a failure here fails the run; the session has closed
            run.finish()
        finally:
            _active_run.reset(token)
