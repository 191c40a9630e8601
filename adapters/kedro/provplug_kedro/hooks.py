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

How lineage crosses nodes: when every dataset a node reads is a Spark
DataFrame whose table holds the rows the catalog loaded, ``before_node_run``
hands the node, for each, the traced DataFrame of that table (the source as
registered, or the output of the node that wrote it), so the node's plan
reads the run's tables even when a Spark dataset would re-read its files;
otherwise the node reads what the catalog loaded, and is a coarse step.
``after_node_run`` passes a traced node's output DataFrames (still lazy plans
over those tables) through :meth:`provplug.ingest.capture.ActiveRun.call_step`,
which applies the Spark rules and stores the outputs; Kedro then saves the
node's own outputs as usual.

Nodes provplug cannot trace cell by cell fail open: they become coarse
steps (docs/capture-semantics.md), and the run goes on exactly as without
provplug. A node is traced cell by cell when every dataset it reads is a Spark
DataFrame whose table of the run holds the rows the catalog loaded, and every
dataset it writes is a Spark DataFrame. Any other node (one over pandas, a
dict, a model; one whose Spark plan provplug refuses) is a coarse step: its
tabular outputs (Spark or pandas DataFrames, pandas Series) are stored as the
step's output tables, each output column recorded as derived from every
column of the tables the node read, with the reason. A coarse output is
stored when a node first reads it, as that node loaded it (a pandas output
saved through a Spark dataset is stored as the Spark DataFrame the catalog
loads, so the Spark node reading it is traced cell by cell), or at the end of
the run. A free pandas input is registered as a source. A dataset that is not
a table (a model, a dict of metrics, a figure) stands for the tables behind
it: the tables the node that wrote it read, transitively, so a coarse step
reading it depends on all of them. The hooks never change what a node
returns or what the catalog saves; an unexpected capture failure is logged
and the dataset recorded as an uncaptured write, never raised into the run.

``provplug: {strict: true}`` keeps the refusals instead: a node that reads or
writes anything but Spark DataFrames, or whose plan provplug refuses, fails
the run with a :class:`~provplug.errors.CaptureError` naming the node and the
dataset, and the run commits nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl
from provplug_spark.naming import Aliases, DatasetId, kedro_name, path_identity
from provplug_spark.plugin import SPARK_CONNECT_REFUSAL, connect_in_use

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


@dataclasses.dataclass
class _Pending:
    """A coarse node's tabular outputs, stored (as one step) when a node first
    reads one of them or when the run ends."""

    step: StepInfo  # its outputs: the tabular datasets only
    outputs: dict[str, Any]  # dataset -> what the node returned
    inputs: frozenset[int]  # the tables behind everything the node read
    reason: str


class _KedroRun:
    """The capture of one ``kedro run``: its tables so far.

    Datasets are tracked by their name without Kedro's transcoding suffix
    (``x@spark`` and ``x@pandas`` are one dataset: Kedro orders nodes by it)."""

    def __init__(
        self,
        run: ActiveRun,
        stack: contextlib.ExitStack,
        store: str,
        strict: bool = False,
        catalog: Any = None,
        project: str | None = None,
    ) -> None:
        self.run = run
        self.stack = stack
        self.store = store
        self.strict = strict
        # dataset -> its traced DataFrame, for the tables whose rows are what a Spark node loads
        self.tables: dict[str, Any] = {}
        self.table_ids: dict[str, int] = {}  # dataset -> its table, for every dataset stored as a table
        self.behind: dict[str, frozenset[int]] = {}  # a dataset that is not a table -> the tables it derives from
        self.pending: dict[str, _Pending] = {}  # a coarse output not stored yet -> its node's outputs
        self.traced_nodes: set[str] = set()  # nodes handed the traced tables of all they read
        self.lock = threading.RLock()  # ThreadRunner calls the node hooks from several threads
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

    # -- before a node runs ---------------------------------------------------------
    def inputs(self, node: Any, inputs: Mapping[str, Any]) -> dict[str, Any] | None:
        """The traced table of every dataset ``node`` reads, when each is a
        Spark DataFrame with a table holding the rows loaded; else None (the
        node reads what the catalog loaded). Free inputs are registered and
        pending coarse outputs stored, so the node's step knows its tables."""
        with self.lock:
            traced = {}
            for name, data in inputs.items():
                if is_parameter(name):
                    continue
                if self.strict and not _is_spark_frame(data):
                    raise _refuse(node, "input", name, data)
                key = _dataset_key(name)
                self._resolve(node, name, key, data)
                if _is_spark_frame(data) and key in self.tables:
                    traced[name] = self.tables[key]
            if len(traced) < sum(not is_parameter(n) for n in inputs):
                return None
            self.traced_nodes.add(node.name)
            return traced

    def _resolve(self, node: Any, name: str, key: str, loaded: Any) -> None:
        """Make the dataset ``name`` (as ``loaded``) known to the run: a pending
        coarse output is stored, a free input registered as a source."""
        if key in self.pending:
            self._store_pending(key, loaded)
        if key in self.table_ids or key in self.behind:
            return
        if not _is_tabular(loaded):  # a free model, dict, ...: no table of the run is behind it
            self.behind[key] = frozenset()
            return
        try:
            traced = _with_node(node, self.run.source, _as_table(loaded), self.table_name(name))
        except Exception as exc:  # fail open: the node runs on what the catalog loaded
            if self.strict:
                raise
            logger.warning("provplug: input %r of node %r is not captured: %s", name, node.name, exc)
            self.behind[key] = frozenset()
            return
        self.table_ids[key] = traced.table_id
        if _is_spark_frame(loaded):
            self.tables[key] = traced

    # -- after a node ran ------------------------------------------------------------
    def outputs(self, node: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
        """Capture ``node`` as one step whose output tables are its ``outputs``."""
        if not outputs:
            return  # a node that writes nothing makes no table
        with self.lock:
            if self.strict:
                for name, data in outputs.items():
                    if not _is_spark_frame(data):
                        raise _refuse(node, "output", name, data)
            read = self._tables_read(inputs)
            if node.name in self.traced_nodes and all(_is_spark_frame(d) for d in outputs.values()):
                self._traced_step(node, inputs, outputs, read)
            else:
                self._coarse_node(node, inputs, outputs, read)

    def _tables_read(self, inputs: Mapping[str, Any]) -> frozenset[int]:
        """The tables behind the datasets a node read."""
        read: set[int] = set()
        for name in inputs:
            if is_parameter(name):
                continue
            key = _dataset_key(name)
            if key in self.table_ids:
                read.add(self.table_ids[key])
            else:
                read |= self.behind.get(key, frozenset())
        return frozenset(read)

    def _traced_step(
        self, node: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Any], read: frozenset[int]
    ) -> None:
        """A node over traced Spark tables: call_step captures it cell by cell
        (or, should provplug refuse its plan, as a coarse step)."""
        names = list(outputs)
        frames = tuple(outputs[n] for n in names)
        step = StepInfo(
            node.name,
            tuple(self.table_name(n) for n in inputs if not is_parameter(n)),
            tuple(self.table_name(n) for n in names),
            _op_params(node, inputs),
        )

        def computed() -> Any:  # the node already ran: its outputs are lazy plans over the traced inputs
            return frames if len(frames) > 1 else frames[0]

        uncaptured = len(self.run.uncaptured_writes)
        try:
            result = _with_node(node, self.run.call_step, step, computed, (), {})
        except Exception as exc:
            if self.strict:
                raise
            self._uncaptured(node, names, read, exc)
            return
        if len(self.run.uncaptured_writes) > uncaptured:
            # The session failed open: it recorded the uncaptured write and returned the node's own outputs.
            for name in names:
                self.behind[_dataset_key(name)] = read
            return
        traced: Sequence[Any] = result if len(names) > 1 else (result,)
        for name, frame in zip(names, traced, strict=True):
            key = _dataset_key(name)
            self.tables[key] = frame
            self.table_ids[key] = frame.table_id

    def _coarse_node(
        self, node: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Any], read: frozenset[int]
    ) -> None:
        """A node provplug cannot trace cell by cell: its tabular outputs wait
        to be stored as a coarse step; the others stand for the tables it read."""
        tabular = {name: data for name, data in outputs.items() if _is_tabular(data)}
        for name in outputs.keys() - tabular.keys():
            self.behind[_dataset_key(name)] = read
        if not tabular:
            return
        step = StepInfo(
            node.name,
            tuple(self.table_name(n) for n in inputs if not is_parameter(n)),
            tuple(self.table_name(n) for n in tabular),
            _op_params(node, inputs),
        )
        pending = _Pending(step, tabular, read, _coarse_reason(node, inputs, outputs))
        for name in tabular:
            self.pending[_dataset_key(name)] = pending

    def _store_pending(self, key: str, loaded: Any) -> None:
        """Store the pending outputs of the node that wrote ``key``, that one as ``loaded``."""
        pending = self.pending[key]
        for name in pending.outputs:
            self.pending.pop(_dataset_key(name), None)
        frames: dict[str, Any] = {}
        for name, data in pending.outputs.items():
            as_loaded = _dataset_key(name) == key and _is_tabular(loaded)
            try:
                frames[name] = self._spark_table(loaded if as_loaded else data, self.table_name(name))
            except Exception as exc:
                if self.strict:
                    raise
                self._uncaptured_dataset(pending.step.name, name, pending.inputs, exc)
        if not frames:
            return
        names = list(frames)
        step = dataclasses.replace(pending.step, outputs=tuple(self.table_name(n) for n in names))
        try:
            result = self._session().coarse_step(step, list(frames.values()), sorted(pending.inputs), pending.reason)
        except Exception as exc:
            if self.strict:
                raise
            for name in names:
                self._uncaptured_dataset(step.name, name, pending.inputs, exc)
            return
        stored: Sequence[Any] = result if len(names) > 1 else (result,)
        for name, frame in zip(names, stored, strict=True):
            self.table_ids[_dataset_key(name)] = frame.table_id
            if _dataset_key(name) == key and _is_spark_frame(loaded):  # its rows are what Spark nodes load
                self.tables[key] = frame

    def store_pending(self) -> None:
        """Store the coarse outputs no node has read (at the run's end)."""
        with self.lock:
            while self.pending:
                self._store_pending(next(iter(self.pending)), None)

    def _spark_table(self, data: Any, name: str) -> Any:
        """``data`` (a Spark or pandas table) as a Spark DataFrame provplug can store as table ``name``."""
        from provplug_spark.session import SparkCaptureSession

        session = self._session()
        frame = data if _is_spark_frame(data) else session.spark.createDataFrame(_as_table(data))
        SparkCaptureSession._checked_columns(frame.columns, name)
        return frame

    def _session(self) -> Any:
        from provplug_spark.session import SparkCaptureSession

        session = self.run.session
        if not isinstance(session, SparkCaptureSession):
            raise CaptureError("the Kedro plugin captures into a Spark capture session only")
        return session

    def _uncaptured(self, node: Any, names: Sequence[str], read: frozenset[int], exc: BaseException) -> None:
        for name in names:
            self._uncaptured_dataset(node.name, name, read, exc)

    def _uncaptured_dataset(self, node: str, name: str, read: frozenset[int], exc: BaseException) -> None:
        """Fail open: ``name`` is recorded as an uncaptured write and, like a
        dataset that is not a table, stands for the tables its node read."""
        reason = f"node {node!r}: {type(exc).__name__}: {exc}"
        logger.warning("provplug: dataset %r is not captured (%s)", name, reason, exc_info=exc)
        self.run.record_uncaptured_write(self.table_name(name), reason)
        self.behind[_dataset_key(name)] = read


def _dataset_key(dataset: str) -> str:
    """The dataset a catalog entry is: its name without Kedro's transcoding
    suffix (``x@spark`` and ``x@pandas`` read and write the same data)."""
    return kedro_name(dataset)


def _is_pandas(data: Any) -> bool:
    try:
        import pandas as pd
    except ImportError:
        return False
    return isinstance(data, (pd.DataFrame, pd.Series))


def _is_tabular(data: Any) -> bool:
    """Data provplug stores as a table: a Spark or pandas DataFrame, a pandas Series."""
    return _is_spark_frame(data) or _is_pandas(data)


def _as_table(data: Any) -> Any:
    """A pandas Series as a one-column pandas DataFrame (named after the series); else ``data``."""
    import pandas as pd

    if isinstance(data, pd.Series):
        return data.to_frame(name=str(data.name) if data.name is not None else "value")
    return data


def _kind(data: Any) -> str:
    return f"{type(data).__module__}.{type(data).__qualname__}"


def _coarse_reason(node: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
    """Why ``node`` is a coarse step: the datasets it reads or writes that are not Spark DataFrames."""
    other = [
        f"{n} ({_kind(d)})" for n, d in {**inputs, **outputs}.items() if not is_parameter(n) and not _is_spark_frame(d)
    ]
    if other:
        return f"Kedro node {node.name!r} reads or writes data that is not a Spark DataFrame: {', '.join(other)}"
    return f"Kedro node {node.name!r} reads a dataset whose table does not hold the rows the catalog loaded"


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
    def configured_index(catalog: Any) -> str | None:
        """``provplug: {index: auto|always}`` of the parameters: index the run as it commits."""
        settings = catalog.load(STORE_PARAMETER) if STORE_PARAMETER in catalog else None
        index = settings.get("index") if isinstance(settings, Mapping) else None
        return None if index is None else str(index)  # capture() refuses other values in one line

    @staticmethod
    def configured_strict(catalog: Any) -> bool:
        """``provplug: {strict: true}`` of the parameters: refuse what cannot be traced cell by cell."""
        settings = catalog.load(STORE_PARAMETER) if STORE_PARAMETER in catalog else None
        strict = settings.get("strict") if isinstance(settings, Mapping) else None
        if strict is None:
            return False
        if not isinstance(strict, bool):
            raise CaptureError(f"provplug: strict must be true or false, not {strict!r}")
        return strict

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
        if connect_in_use():  # before the session: under SPARK_REMOTE the builder would make a Connect one
            raise CaptureError(SPARK_CONNECT_REFUSAL)
        if run_params.get("runner") == "ParallelRunner":
            raise CaptureError(
                "provplug cannot capture a ParallelRunner run (its nodes run in other processes); "
                "use the SequentialRunner or the ThreadRunner"
            )
        reduce, reduce_mode = self.configured_reduction(catalog)
        label, tags = self.configured_label(catalog)
        strict = self.configured_strict(catalog)
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
                    strict=strict,
                    index=self.configured_index(catalog),
                )
            )
        except BaseException:
            stack.close()
            raise
        self.current = _KedroRun(run, stack, store, strict, catalog, run_params.get("project_path"))
        if logger.level == logging.NOTSET:  # Kedro's default logging shows INFO for its own loggers only
            logger.setLevel(logging.INFO)
        logger.info("provplug: capturing this run into %s", store)

    @hook_impl
    def before_node_run(
        self, node: Any, catalog: Any, inputs: dict[str, Any], is_async: bool, run_id: str
    ) -> dict[str, Any] | None:
        current = self.current
        if current is None:
            return None
        try:
            return current.inputs(node, inputs)
        except Exception:
            if current.strict:
                raise
            # Fail open: the node reads what the catalog loaded; its step will be coarse.
            logger.exception("provplug: preparing the inputs of node %r failed", node.name)
            return None

    @hook_impl
    def after_node_run(
        self, node: Any, catalog: Any, inputs: dict[str, Any], outputs: dict[str, Any], is_async: bool, run_id: str
    ) -> None:
        current = self.current
        if current is None:
            return
        try:
            current.outputs(node, inputs, outputs)
        except Exception as exc:
            if current.strict:
                raise
            read = current._tables_read(inputs)
            for name in outputs:
                current._uncaptured_dataset(node.name, name, read, exc)

    @hook_impl
    def after_pipeline_run(self, run_params: dict[str, Any], run_result: Any, pipeline: Any, catalog: Any) -> None:
        current, self.current = self.current, None
        if current is None:
            return
        try:
            current.store_pending()
        except Exception as exc:
            _discard(current, exc)
            if current.strict:
                raise  # fails `kedro run`
            logger.exception("provplug: storing the last coarse steps failed; the run is not captured")
            return
        try:
            current.stack.close()  # commits the run (a failure discards it)
        except Exception:
            if current.strict:
                raise
            # Fail open: the run's own outputs are saved; only its capture is lost.
            logger.exception("provplug: committing the capture into %s failed; the run is not captured", current.store)
            return
        logger.info("provplug: committed run %s into %s", current.run.info.run_id, current.store)

    @hook_impl
    def on_pipeline_error(self, error: Exception, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        self._end(error)

    def _end(self, error: BaseException) -> None:
        """Discard the open capture, if any: nothing of it is committed."""
        current, self.current = self.current, None
        if current is not None:
            _discard(current, error)


def _discard(current: _KedroRun, error: BaseException) -> None:
    """Discard the open capture ``current``: nothing of it is committed."""
    try:
        current.stack.__exit__(type(error), error, error.__traceback__)
    except Exception:  # Kedro re-raises the run's own error; this one is only logged
        logger.exception("provplug: discarding the failed run's capture failed")
    else:
        logger.info("provplug: the run failed; nothing was committed to %s", current.store)


hooks = ProvplugHooks()
