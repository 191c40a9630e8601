"""The built-in lineage query methods, registered as a plugin.

``rq``      recursive querying over the whole triple table (paper §2.1).
``ccprov``  the component of the queried values, then RQ on its triples (Algorithm 1).
``csprov``  the connected sets of the queried values and their set-lineage over
            the set dependencies, then RQ on the triples whose dst lies in
            those sets (Algorithm 2).
``auto``    CSProv with the cheapest execution for the size (the default).

Every method decides the execution path by the threshold ``tau``: when the
triples it must recurse over number fewer than ``tau`` the recursion runs on
the driver over arrays read with pyarrow (no JVM is started); otherwise it
runs on Spark as semi-naive DataFrame recursion. The triple count is known
before reading any triple (per-set sizes in ``sets.parquet``).

A plugin adds a method by implementing ``provplug_register_query_methods``
and registering an object with ``name``, ``description`` and
``run(context, seeds, direction) -> MethodResult``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .. import schema, storefiles
from ..index.generation import check_covers
from ..markers import hookimpl
from ..protocols import Store
from .driver import walk
from .index_reader import IndexReader
from .model import Direction, Edges, MethodResult

DEFAULT_TAU = 2_000_000


@dataclass
class QueryContext:
    """What a method may use: the store, its index, tau and (lazily) Spark."""

    store: Store
    tau: int = DEFAULT_TAU
    spark: Any = None
    _index: IndexReader | None = field(default=None, repr=False)

    def index(self) -> IndexReader:
        if self._index is None:
            reader = IndexReader.current(self.store)
            _check_fresh(self.store, reader)
            self._index = reader
        return self._index

    def session(self) -> Any:
        """The SparkSession for the Spark path (started only when first needed)."""
        if self.spark is None:
            from ..sparksession import local_spark

            self.spark = local_spark("provplug-lineage")
        return self.spark


def _check_fresh(store: Store, reader: IndexReader) -> None:
    indexed = reader.indexed_runs()
    if indexed is None:
        return
    check_covers(store, indexed, store.runs())  # runs added or deleted since the build


class QueryMethod(Protocol):
    name: str
    description: str

    def run(self, context: QueryContext, seeds: np.ndarray, direction: Direction) -> MethodResult: ...


# -- RQ over the whole triple table ---------------------------------------------

_whole_lock = threading.Lock()
_whole_tables: dict[tuple[str, tuple[str, ...]], Edges] = {}
_whole_frames: dict[tuple[int, str, tuple[str, ...]], Any] = {}


def _whole_table(store: Store) -> Edges:
    """Every committed triple as arrays, kept per process (warm RQ on the driver)."""
    key = (store.root, tuple(m["run_id"] for m in store.runs()))
    with _whole_lock:
        hit = _whole_tables.get(key)
    if hit is None:
        table = storefiles.scan(
            store.fs, store.triple_files(), f"triples of {store.uri}", schema.TRIPLES, columns=["src", "dst", "op"]
        )
        hit = Edges(*(table.column(c).to_numpy().astype(np.int64) for c in ("src", "dst", "op")))
        with _whole_lock:
            _whole_tables.clear()  # one store's table at a time: it can be large
            _whole_tables[key] = hit
    return hit


class RecursiveQuery:
    name = "rq"
    description = "semi-naive recursion over the whole triple table (no index needed)"

    def run(self, context: QueryContext, seeds: np.ndarray, direction: Direction) -> MethodResult:
        total = int(sum(int(m["counts"].get("triples", 0)) for m in context.store.runs()))
        if total < context.tau:
            return MethodResult(walk(_whole_table(context.store), seeds, direction), "driver", 0, total)
        from .spark_rq import TRIPLE_COLUMNS_DDL, read_parquet, walk_spark

        spark = context.session()
        key = (id(spark), context.store.root, tuple(m["run_id"] for m in context.store.runs()))
        with _whole_lock:
            triples = _whole_frames.get(key)
        if triples is None:
            # The paper's provRDD: the whole table, cached once for every RQ query.
            files = [context.store.to_spark_path(p) for p in context.store.triple_files()]
            triples = read_parquet(spark, files, TRIPLE_COLUMNS_DDL).select("src", "dst", "op").cache()
            with _whole_lock:
                for old in _whole_frames.values():
                    old.unpersist()
                _whole_frames.clear()
                _whole_frames[key] = triples
        return MethodResult(walk_spark(spark, triples, seeds, direction, cached=True), "spark", 0, total)


# -- CCProv / CSProv over the index -----------------------------------------------


def _recurse_over_sets(
    context: QueryContext, csids: np.ndarray, seeds: np.ndarray, direction: Direction
) -> MethodResult:
    """RQ over the triples whose dst lies in ``csids``, on the driver or on Spark."""
    index = context.index()
    count = index.triples_in_sets(csids)
    if count < context.tau:
        triples = index.triples_of_sets(csids)
        return MethodResult(walk(triples, seeds, direction), "driver", len(csids), len(triples))
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from .spark_rq import INDEXED_TRIPLES_DDL, ISIN_LIMIT, read_parquet, walk_spark

    spark = context.session()
    files = [context.store.to_spark_path(f) for f in index.triple_bucket_files(csids.tolist())]
    frame = read_parquet(spark, files, INDEXED_TRIPLES_DDL)
    if len(csids) <= ISIN_LIMIT:
        triples = frame.where(F.col("dst_csid").isin(csids.tolist()))
    else:
        sets = spark.createDataFrame(
            [(int(c),) for c in csids.tolist()], T.StructType([T.StructField("csid", T.LongType(), False)])
        )
        triples = frame.join(F.broadcast(sets), frame["dst_csid"] == sets["csid"])
    return MethodResult(walk_spark(spark, triples, seeds, direction), "spark", len(csids), count)


class ComponentQuery:
    name = "ccprov"
    description = "the queried values' components, then RQ on their triples (Algorithm 1)"

    def run(self, context: QueryContext, seeds: np.ndarray, direction: Direction) -> MethodResult:
        index = context.index()
        ccid, _ = index.sets_of(seeds)
        csids = index.component_sets(ccid[ccid >= 0])
        return _recurse_over_sets(context, csids, seeds, direction)


class ConnectedSetQuery:
    name = "csprov"
    description = "connected sets and their set-lineage, then RQ on those sets' triples (Algorithm 2)"

    def run(self, context: QueryContext, seeds: np.ndarray, direction: Direction) -> MethodResult:
        index = context.index()
        _, csid = index.sets_of(seeds)
        closure = index.set_closure(csid[csid >= 0], direction)
        return _recurse_over_sets(context, closure, seeds, direction)


class AutoQuery(ConnectedSetQuery):
    """CSProv never reads more than CCProv (its sets are a subset of the
    component's), so it is the default; tau then picks driver or Spark."""

    name = "auto"
    description = "CSProv, on the driver below tau triples and on Spark above (default)"


BUILTIN_METHODS: tuple[QueryMethod, ...] = (RecursiveQuery(), ComponentQuery(), ConnectedSetQuery(), AutoQuery())


@hookimpl
def provplug_register_query_methods(register: Callable[[Any], None]) -> None:
    for method in BUILTIN_METHODS:
        register(method)
