"""The built-in lineage query methods, registered as a plugin.

``rq``      recursive querying over the whole triple table (paper §2.1).
``ccprov``  the component of the queried values, then RQ on its triples (Algorithm 1).
``csprov``  the connected sets of the queried values and their set-lineage over
            the set dependencies, then RQ on the triples whose dst lies in
            those sets (Algorithm 2).
``auto``    CSProv with the cheapest execution for the size (the default).

Every method decides the execution path before reading any triple, from the
count of triples it must recurse over (the sets' range lengths in the mapped
index files, or the per-set sizes in ``sets.parquet``): by default the
recursion runs on the driver over arrays read with pyarrow (no JVM is
started) whenever it fits the driver's memory budget
(:func:`~provplug.query.driver.fits_driver`), and on Spark as semi-naive
DataFrame recursion only when it would not. A threshold ``tau`` given by the
caller (``--tau``) replaces the budget: fewer than ``tau`` triples on the
driver, the rest on Spark (``tau=0``: always Spark, e.g. for a store on a
cluster filesystem).

A plugin adds a method by implementing ``provplug_register_query_methods``
and registering an object with ``name``, ``description`` and
``run(context, seeds, direction) -> MethodResult``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from provplug.index.generation import check_covers
from provplug.plugin.markers import hookimpl
from provplug.plugin.protocols import MethodContext, QueryMethod, Store
from provplug.plugin.query_results import Direction, Edges, MethodResult
from provplug.query import index_reader
from provplug.query.driver import fits_driver, walk
from provplug.query.index_reader import IndexReader

logger = logging.getLogger(__name__)  # the path each query takes (driver or Spark) and why

# No fixed threshold: the driver's memory budget decides (see the module's description).
DEFAULT_TAU: int | None = None


@dataclass
class QueryContext:
    """What a method may use: the store, its index, tau (None: the driver's
    memory budget decides), the driver budget in bytes (None: from the
    environment and the machine) and (lazily) Spark."""

    store: Store
    tau: int | None = DEFAULT_TAU
    spark: Any = None
    driver_budget: int | None = None
    _index: IndexReader | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        index_reader.begin_query(self.store)  # what this query loads is not evicted while it runs

    def on_driver(self, triples: int) -> bool:
        """Should a recursion over ``triples`` triples run on the driver?"""
        if self.tau is not None:
            driver, why = triples < self.tau, f"tau {self.tau}"
        else:
            driver, why = fits_driver(triples, self.driver_budget), "the driver's memory budget"
        logger.debug("%d triples to recurse over: on %s (%s)", triples, "the driver" if driver else "Spark", why)
        return driver

    def index(self) -> IndexReader:
        if self._index is None:
            reader = IndexReader.current(self.store)
            _check_fresh(self.store, reader)
            self._index = reader
        return self._index

    def session(self) -> Any:
        """The SparkSession for the Spark path (started only when first needed)."""
        if self.spark is None:
            from provplug.sparksession import local_spark

            self.spark = local_spark("provplug-lineage")
        return self.spark


def _check_fresh(store: Store, reader: IndexReader) -> None:
    indexed = reader.indexed_runs()
    if indexed is None:
        return
    check_covers(store, indexed, store.runs())  # runs added or deleted since the build


# -- RQ over the whole triple table ---------------------------------------------


def _whole_table(store: Store) -> Edges:
    """Every committed triple as arrays, kept in the query cache while it fits (warm RQ on the driver)."""

    def load() -> tuple[Edges, int]:
        from provplug.store.triples import triple_table

        table = triple_table(store, ["src", "dst", "op"])  # the stored triples and the location edges'
        edges = Edges(*(table.column(c).to_numpy().astype(np.int64) for c in ("src", "dst", "op")))
        return edges, 3 * edges.src.nbytes

    return index_reader.cached(store, ("whole", tuple(m["run_id"] for m in store.runs())), load)


class RecursiveQuery:
    name = "rq"
    description = "semi-naive recursion over the whole triple table (no index needed)"

    def run(self, context: MethodContext, seeds: np.ndarray, direction: Direction) -> MethodResult:
        from provplug.store.triples import represented_triples

        total = represented_triples(context.store)
        if context.on_driver(total):
            return MethodResult(walk(_whole_table(context.store), seeds, direction), "driver", 0, total)
        from provplug.query.spark_rq import walk_spark
        from provplug.store.triples import triples_frame

        spark = context.session()
        caches = index_reader.caches_of(context.store)
        key = (id(spark), tuple(m["run_id"] for m in context.store.runs()))
        with caches.lock:
            triples = caches.spark_frames.get(key)
        if triples is None:
            # The paper's provRDD: the whole table, cached once for every RQ query on this store.
            triples = triples_frame(spark, context.store, ["src", "dst", "op"]).cache()
            with caches.lock:
                for old in caches.spark_frames.values():
                    old.unpersist()
                caches.spark_frames.clear()
                caches.spark_frames[key] = triples
        return MethodResult(walk_spark(spark, triples, seeds, direction, cached=True), "spark", 0, total)


# -- CCProv / CSProv over the index -----------------------------------------------


def _recurse_over_sets(
    context: MethodContext, csids: np.ndarray, seeds: np.ndarray, direction: Direction
) -> MethodResult:
    """RQ over the triples whose dst lies in ``csids``, on the driver or on Spark."""
    index = context.index()
    count = index.triples_in_sets(csids)
    if context.on_driver(count):
        triples = index.triples_of_sets(csids)
        return MethodResult(walk(triples, seeds, direction), "driver", len(csids), len(triples), index.freshness())
    from provplug.query.spark_rq import INDEXED_TRIPLES_DDL, read_parquet, rows_with, walk_spark

    spark = context.session()
    files = [context.store.to_spark_path(f) for f in index.triple_bucket_files(csids.tolist())]
    frame = read_parquet(spark, files, INDEXED_TRIPLES_DDL)
    # Past BROADCAST_LIMIT sets (a largest component at 9x has 2.5M) a sort-merge join, not a broadcast.
    triples = rows_with(spark, frame, "dst_csid", csids)
    return MethodResult(walk_spark(spark, triples, seeds, direction), "spark", len(csids), count, index.freshness())


class ComponentQuery:
    name = "ccprov"
    description = "the queried values' components, then RQ on their triples (Algorithm 1)"

    def run(self, context: MethodContext, seeds: np.ndarray, direction: Direction) -> MethodResult:
        index = context.index()
        ccid, _ = index.sets_of(seeds)
        csids = index.component_sets(ccid[ccid >= 0])
        return _recurse_over_sets(context, csids, seeds, direction)


class ConnectedSetQuery:
    name = "csprov"
    description = "connected sets and their set-lineage, then RQ on those sets' triples (Algorithm 2)"

    def run(self, context: MethodContext, seeds: np.ndarray, direction: Direction) -> MethodResult:
        index = context.index()
        _, csid = index.sets_of(seeds)
        closure = index.set_closure(csid[csid >= 0], direction)
        return _recurse_over_sets(context, closure, seeds, direction)


class AutoQuery(ConnectedSetQuery):
    """CSProv never reads more than CCProv (its sets are a subset of the
    component's), so it is the default; memory (or tau) then picks driver or Spark."""

    name = "auto"
    description = (
        "CSProv, on the driver when it fits the driver's memory (or below --tau triples), else on Spark (default)"
    )


BUILTIN_METHODS: tuple[QueryMethod, ...] = (RecursiveQuery(), ComponentQuery(), ConnectedSetQuery(), AutoQuery())


@hookimpl
def provplug_register_query_methods(register: Callable[[Any], None]) -> None:
    for method in BUILTIN_METHODS:
        register(method)
