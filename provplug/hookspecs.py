"""The provplug hook specifications: the reference for plugin authors.

Implement any of these in a module or class decorated with
:data:`provplug.hookimpl` and expose it through the ``provplug`` entry-point
group::

    [project.entry-points.provplug]
    myplugin = "my_package.plugin"

Built-in behaviour (the Parquet store, the PySpark and Beam adapters, the
query methods, the split chooser) is registered through these same hooks.
Hooks are only ever called through :class:`provplug.plugins.Plugins`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .model import OpInfo, RunInfo, StepInfo
    from .protocols import CaptureAdapter, QueryMethod, Store, WorkflowGraph

hookspec = pluggy.HookspecMarker("provplug")
hookimpl = pluggy.HookimplMarker("provplug")


@hookspec
def provplug_register_adapters(register: Callable[[CaptureAdapter], None]) -> None:
    """Register capture adapters by calling ``register(adapter)``.

    An adapter (see :class:`provplug.protocols.CaptureAdapter`) turns the
    steps of one engine's pipelines (a ``SparkSession``, a Beam ``Pipeline``)
    into triples. ``provplug.capture(engine, ...)`` uses the first registered
    adapter whose ``accepts(engine)`` is true.
    """


@hookspec
def provplug_run_started(run: RunInfo) -> None:
    """A capture run or import started; nothing of it is visible in the store yet."""


@hookspec
def provplug_run_finished(run: RunInfo, error: BaseException | None) -> None:
    """A run ended: ``run.status`` is ``"committed"`` (now visible, atomically)
    or ``"failed"`` (the store is as it was before; ``error`` says why)."""


@hookspec
def provplug_step_started(run: RunInfo, step: StepInfo) -> None:
    """A decorated step is about to run inside a capture run."""


@hookspec
def provplug_step_finished(run: RunInfo, step: StepInfo, op: OpInfo) -> None:
    """A step ran and its op (inputs, outputs, kind, operations, timing) is staged.

    ``op.triples`` and ``op.finished`` are None when the adapter writes the
    step's triples later (Beam pipelines run at the end; Spark writes each
    step output in a background job while the pipeline goes on); the
    committed op carries them."""


@hookspec
def provplug_step_failed(run: RunInfo, step: StepInfo, error: BaseException) -> None:
    """A step raised; the run will fail and nothing of it is committed."""


@hookspec(firstresult=True)
def provplug_store_backend(uri: str) -> Store | None:
    """Return a store for ``uri``, or ``None`` to let another plugin decide.

    The built-in Parquet directory store answers last (``trylast``) for any
    local path or URI that pyarrow's filesystems understand.
    """


@hookspec
def provplug_register_query_methods(register: Callable[[QueryMethod], None]) -> None:
    """Register lineage query methods (``rq``, ``ccprov``, ``csprov``, ``auto``
    are built in) by calling ``register(method)``; ``method.name`` is what
    ``--method`` selects."""


@hookspec(firstresult=True)
def provplug_choose_splits(
    workflow: WorkflowGraph, stats: Mapping[str, Any]
) -> list[Any] | None:
    """Return the splits used to partition large components, or ``None`` to
    let the next plugin decide (the built-in automatic chooser answers last).

    ``workflow`` is the inferred table-level dependency graph and ``stats``
    the captured per-table sizes. The answer has the shape of ``--splits``:
    a list of splits, each a list of table names, where a nested list inside
    a split is one of its sub-splits. Splits must be disjoint and each must
    be weakly connected in ``workflow``.
    """
