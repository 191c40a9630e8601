"""Kedro hooks that capture a whole ``kedro run`` into a provplug store.

Kedro loads :data:`hooks` through the ``kedro.hooks`` entry point, so
installing ``provplug[kedro]`` is enough. A run is captured when a store is
configured (first found wins):

1. the ``store`` given to ``ProvplugHooks(store=...)`` (for a hook manager
   built by hand; the entry point's instance has none, and a project needs
   no second instance in its ``settings.HOOKS``);
2. the environment variable ``PROVPLUG_STORE``;
3. the project's parameters: ``provplug: {store: PATH}`` in
   ``conf/<env>/parameters*.yml``, or the same key given to ``kedro run --params``.

The same parameter may reduce the provenance kept (see :mod:`provplug.reduce`):
``provplug: {reduce: {DATASET: "sample:ratio=0.33,seed=1"}}`` (a spec per
source dataset). By default (``reduce_mode: production``) every node computes
every row and the datasets Kedro saves are those of a run without provplug;
only ``reduce_mode: thesis``, named, runs the nodes on the kept rows only
(their outputs change), and the run's log says so in a warning. Name the run
with ``provplug: {label: nightly, tags: [prod]}``. The run records
the project, pipeline, environment and parameters as its entry point.

A relative path is taken from the project's root. With no store the hooks
return at once: the run is exactly Kedro's.

The mapping (docs/capturing.md "Kedro"): one capture run per ``kedro run``, committed in
``after_pipeline_run`` and discarded in ``on_pipeline_error``; each node is a
step named after the node (its namespace recorded as the op parameter
``module``); each dataset a node reads or writes is a table named after its
catalog entry without Kedro's transcoding suffix (``companies@spark`` is
``companies``; :func:`provplug_spark.naming.kedro_name`), and recorded as the
dataset its ``filepath`` is, where the catalog says (OpenLineage's naming:
``file`` and the absolute path, ``s3://bucket`` and the key, ...); an input no node of the run has produced yet (a free input) is
registered as a source when first read. ``params:*`` and ``parameters`` are
not tables: the ``params:*`` values a node reads are recorded as op
parameters.

How lineage crosses nodes: ``before_node_run`` hands the node, for each
dataset it reads, the traced DataFrame of that table (the source as
registered, or the output of the node that wrote it), not what the catalog
loaded, so the node's plan reads the run's tables even when a Spark dataset
would re-read its files. ``after_node_run`` passes the node's output
DataFrames (still lazy plans over those tables) through
:meth:`provplug.ingest.capture.ActiveRun.call_step`, which applies the Spark rules
and stores the outputs; Kedro then saves the node's own outputs as usual.

Only Spark DataFrames are captured. A node that reads or writes anything else
(pandas, a dict, a model) is refused with a :class:`~provplug.errors.CaptureError`
naming the node and the dataset, and the run commits nothing: no rows-level
rule would be exact for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl
from provplug_spark.naming import Aliases, DatasetId, kedro_name, path_identity

from provplug.errors import CaptureError
from provplug.ingest.capture import ActiveRun, capture
from provplug.model import StepInfo

STORE_ENV = "PROVPLUG_STORE"
STORE_PARAMETER = "params:provplug"  # the parameter provplug: {store: ...}
DEFAULT_REDUCE_MODE = "production"  # results unchanged; "thesis" only when named
NAMESPACE_PARAM = "module"  # op parameter holding the node's namespace (the zoom queries' module)

logger = logging.getLogger(__name__)


def is_parameter(dataset: str) -> bool:
    """Kedro's parameter datasets, which are not tables."""
    return dataset == "parameters" or dataset.startswith("params:")


def _is_spark_frame(data: Any) -> bool:
    from pyspark.sql import DataFrame

    return isinstance(data, DataFrame)


def _refuse(node: Any, role: str, dataset: str, data: Any) -> CaptureError:
    return CaptureError(
        f"node {node.name!r}: {role} {dataset!r} is a {type(data).__module__}.{type(data).__qualname__}, "
        "not a Spark DataFrame; provplug captures Kedro nodes over Spark DataFrames only "
        f"(configure no store, neither {STORE_ENV} nor the parameter provplug: {{store: ...}}, to run without capture)"
    )


class _KedroRun:
    """The capture of one ``kedro run``: its tables so far."""

    def __init__(
        self, run: ActiveRun, stack: contextlib.ExitStack, store: str, catalog: Any = None, project: str | None = None
    ) -> None:
        self.run = run
        self.stack = stack
        self.store = store
        self.tables: dict[str, Any] = {}  # dataset name -> its traced DataFrame
        self.lock = threading.Lock()  # ThreadRunner calls the node hooks from several threads
        self.catalog = catalog
        self.project = project
        self._names: dict[str, str] = {}  # dataset name -> its table's name
        self._aliases = Aliases()

    def table_name(self, dataset: str) -> str:
        """The table ``dataset`` is: its name without the transcoding suffix,
        recorded with the dataset identity of its file, when the catalog has one."""
        if dataset not in self._names:
            identity = _catalog_identity(self.catalog, dataset, self.project)
            name = self._aliases.claim(kedro_name(dataset), identity)
            if identity is not None:
                self.run.identify_table(name, identity.namespace, identity.name)
            self._names[dataset] = name
        return self._names[dataset]

    def inputs(self, node: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The traced table of every dataset ``node`` reads (free inputs registered on first read)."""
        traced = {}
        with self.lock:
            for name, data in inputs.items():
                if is_parameter(name):
                    continue
                if name not in self.tables:
                    if not _is_spark_frame(data):
                        raise _refuse(node, "input", name, data)
                    self.tables[name] = _with_node(node, self.run.source, data, self.table_name(name))
                traced[name] = self.tables[name]
        return traced

    def outputs(self, node: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
        """Capture ``node`` as one step whose output tables are its ``outputs``."""
        names = list(outputs)
        if not names:
            return  # a node that writes nothing makes no table
        for name in names:
            if not _is_spark_frame(outputs[name]):
                raise _refuse(node, "output", name, outputs[name])
        frames = tuple(outputs[n] for n in names)
        with self.lock:
            read = tuple(self.table_name(n) for n in inputs if not is_parameter(n))
            written = tuple(self.table_name(n) for n in names)
        step = StepInfo(node.name, read, written, _op_params(node, inputs))

        def computed() -> Any:  # the node already ran: its outputs are lazy plans over the traced inputs
            return frames if len(frames) > 1 else frames[0]

        with self.lock:
            result = _with_node(node, self.run.call_step, step, computed, (), {})
            traced: Sequence[Any] = result if len(names) > 1 else (result,)
            self.tables.update(zip(names, traced, strict=True))


def _with_node(node: Any, action: Callable[..., Any], *args: Any) -> Any:
    """``action(*args)``; a CaptureError names the node it was capturing."""
    try:
        return action(*args)
    except CaptureError as exc:
        if f"node {node.name!r}" in str(exc):
            raise
        raise CaptureError(f"node {node.name!r}: {exc}") from exc


def _catalog_identity(catalog: Any, dataset: str, project: str | None) -> DatasetId | None:
    """The identity of the file behind catalog entry ``dataset``; None when
    the catalog gives it no ``filepath`` (memory datasets, parameters, ...)."""
    getter = getattr(catalog, "get", None)
    found = getter(dataset) if callable(getter) else None
    describe = getattr(found, "_describe", None)  # every Kedro dataset's own description of itself
    described = describe() if callable(describe) else None
    filepath = described.get("filepath") if isinstance(described, Mapping) else None
    if not filepath:
        return None
    assert isinstance(described, Mapping)
    where, protocol = str(filepath), str(described.get("protocol") or "")
    if "://" not in where and protocol not in ("", "file", "local"):
        where = f"{protocol}://{where}"  # fsspec datasets keep the protocol apart from the path
    elif "://" not in where and not where.startswith("file:") and not os.path.isabs(where) and project:
        where = os.path.join(project, where)  # Kedro reads relative paths from the project's root
    return path_identity(where)


def _op_params(node: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The op's parameters: the node's namespace and the ``params:*`` values it read."""
    params: dict[str, Any] = {name: value for name, value in inputs.items() if name.startswith("params:")}
    if node.namespace:
        params[NAMESPACE_PARAM] = node.namespace
    return params


def _kedro_entry(run_params: Mapping[str, Any], catalog: Any) -> dict[str, Any]:
    """The run's entry point: the Kedro project, pipeline, environment and parameters."""
    from provplug.ingest.runcontext import kedro_entry

    params = catalog.load("parameters") if "parameters" in catalog else run_params.get("extra_params")
    pipeline = run_params.get("pipeline_name") or ",".join(run_params.get("pipeline_names") or ()) or None
    return kedro_entry(run_params.get("project_path"), pipeline, run_params.get("env"), params)


def _spark() -> Any:
    """The project's SparkSession (made by its own hook or a dataset), else a local one."""
    from provplug.sparksession import local_spark

    return local_spark("kedro")


class ProvplugHooks:
    """Kedro hooks that capture ``kedro run`` into a provplug store (see the module docstring)."""

    def __init__(self, store: str | os.PathLike[str] | None = None) -> None:
        self.store = store
        self.current: _KedroRun | None = None

    # -- configuration ----------------------------------------------------------
    def configured_store(self, run_params: Mapping[str, Any], catalog: Any) -> str | None:
        """The store this run captures into, or None (no capture)."""
        value: str | os.PathLike[str] | None = self.store or os.environ.get(STORE_ENV) or None
        if value is None and STORE_PARAMETER in catalog:
            settings = catalog.load(STORE_PARAMETER)
            value = settings.get("store") if isinstance(settings, Mapping) else None
        if not value:
            return None
        path = os.path.expanduser(os.fspath(value))
        if "://" in path or os.path.isabs(path):
            return path
        project = run_params.get("project_path")
        return str(Path(project) / path) if project else os.path.abspath(path)

    @staticmethod
    def configured_reduction(catalog: Any) -> tuple[dict[str, str], str]:
        """``provplug: {reduce: {DATASET: SPEC}, reduce_mode: MODE}`` of the
        parameters: the reductions (spec text, see :mod:`provplug.reduce.spec`) and mode."""
        settings = catalog.load(STORE_PARAMETER) if STORE_PARAMETER in catalog else None
        if not isinstance(settings, Mapping):
            return {}, DEFAULT_REDUCE_MODE
        reduce = settings.get("reduce") or {}
        if not isinstance(reduce, Mapping):
            raise CaptureError("provplug: reduce must map dataset names to reduction specs (TECHNIQUE:key=value,...)")
        return {str(k): str(v) for k, v in reduce.items()}, str(settings.get("reduce_mode") or DEFAULT_REDUCE_MODE)

    @staticmethod
    def configured_label(catalog: Any) -> tuple[str | None, list[str]]:
        """``provplug: {label: LABEL, tags: [TAG, ...]}`` of the parameters: what names the run."""
        settings = catalog.load(STORE_PARAMETER) if STORE_PARAMETER in catalog else None
        if not isinstance(settings, Mapping):
            return None, []
        label, tags = settings.get("label"), settings.get("tags") or []
        return (None if label is None else str(label)), ([str(tags)] if isinstance(tags, str) else list(tags))

    # -- the run --------------------------------------------------------------------
    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        self._end(CaptureError("a previous kedro run ended without after_pipeline_run"))
        store = self.configured_store(run_params, catalog)
        if store is None:
            return
        if run_params.get("runner") == "ParallelRunner":
            raise CaptureError(
                "provplug cannot capture a ParallelRunner run (its nodes run in other processes); "
                "use the SequentialRunner or the ThreadRunner"
            )
        reduce, reduce_mode = self.configured_reduction(catalog)
        label, tags = self.configured_label(catalog)
        stack = contextlib.ExitStack()
        try:
            run = stack.enter_context(
                capture(
                    _spark(),
                    store,
                    reduce=reduce,
                    reduce_mode=reduce_mode,
                    label=label,
                    tags=tags,
                    entry_point=_kedro_entry(run_params, catalog),
                )
            )
        except BaseException:
            stack.close()
            raise
        self.current = _KedroRun(run, stack, store, catalog, run_params.get("project_path"))
        if logger.level == logging.NOTSET:  # Kedro's default logging shows INFO for its own loggers only
            logger.setLevel(logging.INFO)
        logger.info("provplug: capturing this run into %s", store)

    @hook_impl
    def before_node_run(
        self, node: Any, catalog: Any, inputs: dict[str, Any], is_async: bool, run_id: str
    ) -> dict[str, Any] | None:
        if self.current is None:
            return None
        return self.current.inputs(node, inputs)

    @hook_impl
    def after_node_run(
        self, node: Any, catalog: Any, inputs: dict[str, Any], outputs: dict[str, Any], is_async: bool, run_id: str
    ) -> None:
        if self.current is not None:
            self.current.outputs(node, inputs, outputs)

    @hook_impl
    def after_pipeline_run(self, run_params: dict[str, Any], run_result: Any, pipeline: Any, catalog: Any) -> None:
        current, self.current = self.current, None
        if current is None:
            return
        current.stack.close()  # commits the run; an error here fails `kedro run`
        logger.info("provplug: committed run %s into %s", current.run.info.run_id, current.store)

    @hook_impl
    def on_pipeline_error(self, error: Exception, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        self._end(error)

    def _end(self, error: BaseException) -> None:
        """Discard the open capture, if any: nothing of it is committed."""
        current, self.current = self.current, None
        if current is None:
            return
        try:
            current.stack.__exit__(type(error), error, error.__traceback__)
        except Exception:  # Kedro re-raises the run's own error; this one is only logged
            logger.exception("provplug: discarding the failed run's capture failed")
        else:
            logger.info("provplug: the run failed; nothing was committed to %s", current.store)


hooks = ProvplugHooks()
