"""Capture runs and the ``@provplug.step`` decorator.

``with provplug.capture(engine, store=...) as run:`` picks the capture adapter
that accepts ``engine`` (through the adapter hook), stages everything in one
store transaction and fires the lifecycle hooks. Decorated steps called inside
the block are captured; outside any capture they run unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from .errors import CaptureError
from .lifecycle import observed_run
from .model import OpInfo, RunInfo, StepInfo, TableInfo, TableOrigin
from .plugins import Plugins, get_plugins
from .protocols import AdapterSession
from .store import ParquetStore, RunTransaction

F = TypeVar("F", bound=Callable[..., Any])

_active_run: contextvars.ContextVar[ActiveRun | None] = contextvars.ContextVar("provplug_run", default=None)


class ActiveRun:
    """A capture run in progress: what adapters stage into and users call."""

    def __init__(
        self, store: ParquetStore, txn: RunTransaction, info: RunInfo, plugins: Plugins, store_rows: bool
    ) -> None:
        self.store = store
        self.txn = txn
        self.info = info
        self.plugins = plugins
        self.store_rows = store_rows
        self.session: AdapterSession | None = None
        self._names: set[str] = set()

    @property
    def run_id(self) -> str:
        return self.txn.run_id

    # -- user API ------------------------------------------------------------
    def source(self, data: Any, name: str) -> Any:
        """Register ``data`` as the source table ``name`` and return it traced."""
        assert self.session is not None
        return self.session.source(data, name)

    # -- adapter API ---------------------------------------------------------
    def new_table(self, name: str, origin: TableOrigin, columns: Sequence[str]) -> TableInfo:
        """Reserve a table id for ``name``; the adapter records it once written."""
        if name in self._names:
            raise CaptureError(f"table {name!r} is produced twice in one run")
        self._names.add(name)
        return TableInfo(self.txn.reserve("tables"), name, self.run_id, origin, tuple(columns))

    def new_op_id(self) -> int:
        return self.txn.reserve("ops")

    def record_table(self, table: TableInfo) -> None:
        self.txn.add_table(table)

    def record_op(self, op: OpInfo) -> None:
        self.txn.add_op(op)

    def update_op(self, op: OpInfo) -> None:
        """Replace the staged op with ``op.op_id`` (engines that run lazily,
        like Beam, learn an op's triple count and end time after the step)."""
        for i, staged in enumerate(self.txn.ops):
            if staged.op_id == op.op_id:
                self.txn.ops[i] = op
                return
        raise CaptureError(f"op {op.op_id} is not staged in this run")

    def mark_dataset(self, name: str) -> None:
        self.txn.mark_dataset(name)

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

        wrapper.provplug_step = StepInfo(name, (), outputs, params)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

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
    target: ParquetStore = plugins.store(os.fspath(store))  # type: ignore[assignment]
    with observed_run(target, plugins, "capture", adapter.name) as (txn, info):
        run = ActiveRun(target, txn, info, plugins, store_rows)
        token = _active_run.set(run)
        try:
            run.session = adapter.open(engine, run)
            yield run
            run.session.close(None)
        except BaseException as exc:
            if run.session is not None:
                run.session.close(exc)
            raise
        finally:
            _active_run.reset(token)
