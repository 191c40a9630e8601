"""Weakly connected components on Spark: a partition-local union-find, a
merge by node, and large-star/small-star (Kiveris et al., the algorithm the
paper used through its reference [1]) only for what does not fit one task.

1. **Local**: every partition of the edges is solved in memory by the NumPy
   union-find (:func:`provplug.index.localwcc.wcc_labels`). Each node ``v`` of
   partition ``p`` gets its local root ``r_p(v)``: the smallest node of its
   component among ``p``'s edges.
2. **Merge**: the ``(v, r_p(v))`` rows are shuffled by ``v``. For each node,
   ``m(v) = min_p r_p(v)``, and every other root of ``v`` gets a *link*
   ``(r_p(v), m(v))``. The links join exactly the local components that
   share a node, so two roots are in one component of the link graph ``L``
   iff their local components are in one component of the whole graph.
3. **Links**: ``L`` has at most one edge per (node, extra partition), so it is
   small unless the partitions cut the graph everywhere. Up to
   :data:`TASK_EDGE_LIMIT` links it is solved in one task by the union-find;
   above it by large-star/small-star (guaranteed to converge, in
   ``O(log^2 n)`` rounds), each round's edge set checkpointed.

Labels: a root ``r`` on no link is the smallest node of its component (every
member's roots are all ``r``: any smaller root would have linked it); a root
on a link takes the smallest node of its ``L`` component, which is the
component's smallest node (that node is a root everywhere it occurs, and is
linked to every other root of the component). So the label of every node,
and of every edge (through the root of its partition), is the smallest
node id of its component, as :mod:`.localwcc` gives.

:func:`local_roots`, :func:`node_links` and :func:`link_labels` are the pieces the index
engine uses directly (it labels triples through their partition's root and
never builds a per-node table); :func:`spark_wcc` composes them into
``(node, label)`` for every node, for Algorithm 3's huge components.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from provplug.index.localwcc import wcc_labels

# Link graphs up to this many edges are solved in one task (~1 GB of NumPy
# arrays at the limit); larger ones by large-star/small-star on Spark.
TASK_EDGE_LIMIT = 20_000_000
# Label tables up to this many rows are broadcast to the joins that use them.
BROADCAST_ROWS = 4_000_000
MAX_ROUNDS = 200
# Rows per batch a task yields back to Spark.
OUT_BATCH = 1 << 20

LABELS_DDL = "node long, label long"


# Adaptive execution with skew-join splitting (Spark's defaults, made
# explicit), and Arrow batches large enough that the in-task steps see a few
# hundred batches per partition, not tens of thousands.
TUNED_CONF = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.skewJoin.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
}


@contextlib.contextmanager
def tuned(spark: SparkSession) -> Iterator[None]:
    """:data:`TUNED_CONF` set on ``spark`` while the block runs; the session
    is often the caller's, so its own settings are back afterwards (a key it
    had not set is unset again), whether the block returns or raises."""
    before = {key: spark.conf.get(key, None) for key in TUNED_CONF}
    for key, value in TUNED_CONF.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def concat_batches(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    """All rows a task receives, as one table (None when there are none)."""
    parts = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(parts) if parts else None


def in_batches(columns: dict[str, np.ndarray]) -> Iterator[pa.RecordBatch]:
    """Aligned arrays back to Spark in batches of at most :data:`OUT_BATCH` rows."""
    n = len(next(iter(columns.values())))
    for start in range(0, n, OUT_BATCH):
        yield pa.RecordBatch.from_arrays(
            [pa.array(a[start : start + OUT_BATCH]) for a in columns.values()], names=list(columns)
        )


# -- 1. local ------------------------------------------------------------------
def partition_roots(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One partition's union-find: its sorted ``nodes``, their local
    ``roots``, and the dense indices of each edge's ends (``si``, ``di``)."""
    m = len(src)
    nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    si, di = inverse[:m].astype(np.int64), inverse[m:].astype(np.int64)
    return nodes, nodes[wcc_labels(len(nodes), si, di)], si, di


def _local_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    table = concat_batches(batches)
    if table is None:
        return
    nodes, roots, _, _ = partition_roots(table.column("src").to_numpy(), table.column("dst").to_numpy())
    yield from in_batches({"v": nodes, "r": roots})


def local_roots(edges: DataFrame) -> DataFrame:
    """``(v, r)``: for every partition of ``edges(src, dst)`` and every node
    on it, its root in that partition (one row per node and partition)."""
    return edges.select("src", "dst").mapInArrow(_local_roots, "v long, r long")


# -- 2. merge --------------------------------------------------------------------
def node_links(v: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Links ``(r, m(v))`` for every row whose root is not its node's
    smallest root (rows of one node must all be present)."""
    order = np.lexsort((r, v))
    v, r = v[order], r[order]
    first = np.ones(len(v), dtype=bool)
    first[1:] = v[1:] != v[:-1]
    m = r[first][np.cumsum(first) - 1]  # rows are sorted by (v, r): a node's first row holds m(v)
    keep = r != m
    return r[keep], m[keep]


def _merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    table = concat_batches(batches)
    if table is None:
        return
    u, v = node_links(table.column("v").to_numpy(), table.column("r").to_numpy())
    yield from in_batches({"u": u, "v": v})


def merge_links(roots: DataFrame, partitions: int) -> DataFrame:
    """The link graph ``(u, v)``, ``u > v``, from :func:`local_roots` rows (may repeat)."""
    return roots.repartition(partitions, "v").mapInArrow(_merge, "u long, v long")


# -- 3. links ----------------------------------------------------------------------
def _task_wcc(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    table = concat_batches(batches)
    if table is None:
        return
    nodes, roots, _, _ = partition_roots(table.column("u").to_numpy(), table.column("v").to_numpy())
    yield from in_batches({"node": nodes, "label": roots})


def link_labels(
    links: DataFrame,
    on_round: Callable[[int], None] | None = None,
    task_limit: int | None = None,
) -> tuple[DataFrame, int]:
    """``(node, label)`` for every node of the link graph ``links(u, v)``
    (``u > v``; a link may repeat: the one-task path does not mind, the
    star path drops repeats first), checkpointed, and its row count. Roots
    on no link are their own label."""
    spark = links.sparkSession
    count = links.count()
    limit = TASK_EDGE_LIMIT if task_limit is None else task_limit
    if count == 0:
        return spark.createDataFrame([], LABELS_DDL), 0
    if count <= limit:
        labels = links.repartition(1).mapInArrow(_task_wcc, LABELS_DDL)
    else:
        labels = star_labels(links.distinct(), on_round)
    labels = labels.localCheckpoint()
    return labels, labels.count()


def attach(frame: DataFrame, key: str, labels: DataFrame, rows: int, out: str) -> DataFrame:
    """``frame`` with column ``out`` = label of ``frame[key]`` (itself when unlabelled)."""
    side = labels.select(F.col("node").alias("_node"), F.col("label").alias("_label"))
    if rows <= BROADCAST_ROWS:
        side = F.broadcast(side)
    joined = frame.join(side, frame[key] == side["_node"], "left")
    return joined.withColumn(out, F.coalesce("_label", key)).drop("_node", "_label")


def spark_wcc(
    edges: DataFrame,
    partitions: int,
    on_round: Callable[[int], None] | None = None,
    task_limit: int | None = None,
) -> DataFrame:
    """Components of ``edges(src, dst)``: ``(node, label)`` for every node
    on an edge, ``label`` = smallest node id of its component."""
    roots = local_roots(edges).localCheckpoint()
    labels, rows = link_labels(merge_links(roots, partitions), on_round, task_limit)
    nodes = roots.groupBy("v").agg(F.min("r").alias("r"))
    return attach(nodes, "r", labels, rows, "label").select(F.col("v").alias("node"), "label")


# -- large-star / small-star ---------------------------------------------------------
def star_labels(links: DataFrame, on_round: Callable[[int], None] | None = None) -> DataFrame:
    """``(node, label)`` of a graph ``(u, v)`` (``u > v``, distinct) by
    large-star/small-star. Both steps preserve connectivity and only point
    edges at smaller ids; it stops when the edge set is a forest of stars (no
    node with two parents, no parent with a parent), whose centres are then
    the components' smallest nodes. Each round is checkpointed, so its plan
    stays two shuffles deep whatever the round number. Hubs: the per-node
    minimum is pre-combined map-side, and skewed joins are split by adaptive
    execution (:func:`tune`)."""
    current = links.select("u", "v").localCheckpoint()
    for round_no in range(1, MAX_ROUNDS + 1):
        current = _small_star(_large_star(current)).localCheckpoint()
        if on_round is not None:
            on_round(round_no)
        if _is_star_forest(current):
            centres = current.select(F.col("v").alias("node"), F.col("v").alias("label")).distinct()
            return current.select(F.col("u").alias("node"), F.col("v").alias("label")).unionByName(centres)
    raise RuntimeError(f"connected components did not converge in {MAX_ROUNDS} rounds")  # pragma: no cover


def _large_star(e: DataFrame) -> DataFrame:
    # Edges point down (u > v), so the smallest of a node and its neighbours is
    # the node itself or its smallest parent; every edge (u, v) is a neighbour
    # u > v of v and is re-attached to m(v).
    smallest = e.groupBy("u").agg(F.min("v").alias("m")).withColumnRenamed("u", "v")
    return e.join(smallest, "v", "left").select(
        "u", F.least(F.col("v"), F.coalesce(F.col("m"), F.col("v"))).alias("v")
    )  # duplicates are harmless here: small-star's output is deduplicated


def _small_star(e: DataFrame) -> DataFrame:
    smallest = e.groupBy("u").agg(F.min("v").alias("m"))
    attached = (
        e.join(smallest, "u").where(F.col("v") != F.col("m")).select(F.col("v").alias("u"), F.col("m").alias("v"))
    )
    return attached.unionByName(smallest.select("u", F.col("m").alias("v"))).distinct()


def _is_star_forest(e: DataFrame) -> bool:
    """No node with two parents and no parent with a parent (one Spark job)."""
    two_parents = e.groupBy("u").count().where(F.col("count") > 1).select("u")
    parent_with_parent = e.select(F.col("v").alias("u")).join(e.select("u"), "u", "left_semi")
    return two_parents.unionByName(parent_with_parent).limit(1).count() == 0
