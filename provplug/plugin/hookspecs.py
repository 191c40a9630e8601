"""The provplug hook specifications: the reference for plugin authors.

Implement any of these in a module or class, decorated with
:data:`provplug.hookimpl`, and expose it through the ``provplug`` entry-point
group::

    [project.entry-points.provplug]
    myplugin = "my_package.plugin"

Built-in behaviour (the Parquet store, the PySpark and Beam adapters, the
query methods, the split chooser) is registered through these same hooks.
Hooks are only ever called through :class:`provplug.plugin.manager.Plugins`. The
objects they exchange are described by the protocols of
:mod:`provplug.plugin.protocols` and the records of :mod:`provplug.model`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

# ``hookimpl`` is re-exported for modules that imported it from here; new
# code imports it as ``provplug.hookimpl`` (or from ``provplug.plugin.markers``).
from provplug.plugin.markers import hookimpl as hookimpl
from provplug.plugin.markers import hookspec

if TYPE_CHECKING:
    from provplug.model import OpInfo, RunInfo, StepInfo, StoreLocation
    from provplug.plugin.connection import Connection
    from provplug.plugin.protocols import CaptureAdapter, ExportFormat, QueryMethod, WorkflowGraph, WriteInterceptor
    from provplug.plugin.reductions import ReductionTechnique


@hookspec
def provplug_register_adapters(register: Callable[[CaptureAdapter], None]) -> None:
    """Register capture adapters.

    An adapter (:class:`provplug.plugin.protocols.CaptureAdapter`) turns the steps
    of one engine's pipelines (a ``SparkSession``, a Beam ``Pipeline``) into
    triples, through the :class:`provplug.plugin.protocols.RunRecorder` it is
    given. ``provplug.capture(engine, ...)`` uses the first registered
    adapter whose ``accepts(engine)`` is true.

    :param register: Call ``register(adapter)`` once per adapter. Two
        adapters with one ``name`` are an error when plugins load.
    """


@hookspec
def provplug_run_started(run: RunInfo) -> None:
    """A capture run or an import started; nothing of it is visible in the store yet.

    :param run: The run; ``run.kind`` is ``"capture"`` or ``"import"``,
        ``run.engine`` the adapter's name (``"import"`` for imports).
    """


@hookspec
def provplug_run_finished(run: RunInfo, error: BaseException | None) -> None:
    """A run ended: committed (now visible, atomically) or failed (the store
    is as it was before).

    :param run: The run; ``run.status`` is ``"committed"`` or ``"failed"``
        and ``run.finished`` is set.
    :param error: Why the run failed, or None when it committed.
    """


@hookspec
def provplug_step_started(run: RunInfo, step: StepInfo) -> None:
    """A decorated step is about to run inside a capture run.

    :param run: The capture run.
    :param step: The step: its name, output table names and parameters.
    """


@hookspec
def provplug_step_finished(run: RunInfo, step: StepInfo, op: OpInfo) -> None:
    """A step ran and its op (inputs, outputs, kind, operations, timing) is staged.

    Called once per op the step staged.

    :param run: The capture run.
    :param step: The step that ran.
    :param op: Its op. ``op.triples`` and ``op.finished`` are None when the
        adapter writes the step's triples later (Beam pipelines run at the
        end; Spark writes each step output in a background job while the
        pipeline goes on); the committed op carries them.
    """


@hookspec
def provplug_step_failed(run: RunInfo, step: StepInfo, error: BaseException) -> None:
    """A step raised; the run will fail and nothing of it is committed.

    :param run: The capture run.
    :param step: The step that raised.
    :param error: What it raised.
    """


@hookspec
def provplug_register_write_interceptors(register: Callable[[WriteInterceptor], None]) -> None:
    """Register write interceptors: how an engine's writes made by code that
    does not know provplug become steps (``provplug.capture_writes`` and
    ``provplug run`` enter every registered interceptor; the Spark adapter
    registers one that captures each ``DataFrame`` write).

    :param register: Call ``register(interceptor)`` once per
        :class:`~provplug.plugin.protocols.WriteInterceptor`. Two with one name
        are an error when plugins load.
    """


@hookspec(firstresult=True)
def provplug_store_location(uri: str) -> StoreLocation | None:
    """Return where the store of ``uri`` lives, or None to let another plugin decide.

    A backend decides where a store lives and how its bytes are reached (an
    alias, a filesystem with its own options, credentials), never its
    format: provplug opens every store in its own Parquet layout
    (:class:`provplug.store.parquet.ParquetStore`) on the
    :class:`~provplug.model.StoreLocation` given. The built-in backend answers
    last (``trylast``) for any local path or URI pyarrow's filesystems
    understand.

    Stops at the first non-None result.

    :param uri: The path or URI given to ``provplug.capture``,
        ``provplug.open``, ``provplug.open_store`` or the command line.
    :returns: A :class:`~provplug.model.StoreLocation`, or None.
    """


@hookspec(firstresult=True)
def provplug_filesystem_settings(engine: object) -> Connection | None:
    """Return how a capture on ``engine`` reaches object storage, or None.

    An adapter whose engine has its own settings for this (Spark's
    ``spark.provplug.fs.endpoint``, ``.region`` and ``.scheme``) answers for
    its engines. The capture writes the answer into every S3 URI it hands to
    the engine's workers (the store's, each source's), so workers on other
    machines reach the same storage; unset settings come from the driver's
    environment, and a URI's own query wins over both
    (:mod:`provplug.plugin.connection`).

    Stops at the first non-None result.

    :param engine: The engine given to ``provplug.capture``.
    :returns: A :class:`~provplug.plugin.connection.Connection`, or None.
    """


@hookspec
def provplug_register_query_methods(register: Callable[[QueryMethod], None]) -> None:
    """Register lineage query methods (``rq``, ``ccprov``, ``csprov`` and
    ``auto`` are built in).

    :param register: Call ``register(method)`` once per
        :class:`~provplug.plugin.protocols.QueryMethod`; ``method.name`` is what
        ``--method`` selects. Two methods with one name are an error when
        plugins load.
    """


@hookspec
def provplug_register_export_formats(register: Callable[[ExportFormat], None]) -> None:
    """Register export formats (``prov-json``, ``prov-n`` and ``openlineage``
    are built in; see :mod:`provplug.export`).

    A format (:class:`~provplug.plugin.protocols.ExportFormat`) has a
    ``name`` (what ``provplug export --format`` selects and
    ``provplug.export.export(store, name)`` takes), a one-line
    ``description`` (shown after the name in ``provplug export --help``), a
    ``media_type`` and file ``extension``, the modules it ``requires``,
    ``lists_values`` (whether a whole-run export should list every value and
    triple), and ``render(store, selection, namespace)``, which returns the
    document of an :class:`~provplug.plugin.protocols.ExportSelection` as
    text or bytes. The registry is read to build ``--help``, so a format
    imports its libraries inside ``render``, not when its plugin loads.

    :param register: Call ``register(export_format)`` once per format. Two
        formats with one name are an error when plugins load.
    """


@hookspec
def provplug_register_reductions(register: Callable[[ReductionTechnique], None]) -> None:
    """Register provenance reduction techniques (paper 001: ``sample``,
    ``stratified``, ``histogram``, ``kmeans``, ``equivalence`` and the explicit
    ``keep`` are built in; see :mod:`provplug.reduce`).

    A technique (:class:`provplug.reduce.ReductionTechnique`) has a ``name``
    (what a spec string ``TABLE=NAME:key=value,...`` selects, as
    ``provplug run --reduce`` and the Kedro ``provplug: reduce:`` entry give
    it), a one-line ``description``, and ``build(params, seed)``, which
    returns a :class:`provplug.reduce.Reduction`: an object whose
    ``select(frame, columns)`` returns the kept rows of a Spark DataFrame,
    computed in Spark and deterministic for its seed (the same rows for the
    same table content). Python code may also pass such an object directly:
    ``provplug.capture(..., reduce={"T": reduction})``.

    :param register: Call ``register(technique)`` once per technique. Two
        techniques with one name are an error when plugins load.
    """


@hookspec(firstresult=True)
def provplug_choose_splits(workflow: WorkflowGraph, stats: Mapping[str, Any]) -> list[Any] | None:
    """Return the splits used to partition large components, or None to let
    the next plugin decide (the built-in automatic chooser answers last).

    Stops at the first non-None result.

    :param workflow: The inferred table-level dependency graph ``G_wf``.
    :param stats: Captured sizes: ``theta``, ``triples``, ``values``,
        ``table_values`` (table name -> distinct values on a triple) and
        ``pair_triples`` (``(src table, dst table, triples)`` rows).
    :returns: The splits in the shape of ``--splits``: a list of splits,
        each a list of table names, where a nested list inside a split is
        one of its sub-splits. Splits must be disjoint and each must be
        weakly connected in ``workflow``. Or None.
    """
