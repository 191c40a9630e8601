"""Weakly connected components on Spark: large-star / small-star (Kiveris et
al., "Connected Components in MapReduce and Beyond", the algorithm the paper
used through its reference [1]), with the DataFrame API only.

Edges are kept oriented ``(u, v)`` with ``u > v`` and deduplicated.

* large-star: for every node ``x`` let ``m(x)`` be the smallest of ``x`` and its
  neighbours; every neighbour ``y > x`` is re-attached to ``m(x)``;
* small-star: for every node ``x`` let ``m`` be its smallest neighbour below it;
  ``x`` and those neighbours are attached to ``m``.

Both preserve connectivity and only ever point edges at smaller ids.

Convergence test (exact, cannot stop early): the edge set is a forest of
stars, i.e. no node has two parents and no parent has a parent. Then every
component is one star whose centre is its smallest node, which is the
answer; a change count (which can be zero on a transient state) is not used.

Plan growth: the edge set is written to Parquet and read back every round,
so each round's plan is two shuffles deep whatever the round number.

Hubs and skew: the per-node minimum is an aggregate Spark pre-combines on
the map side, so a hub of any degree costs one row per partition before
the shuffle; the join of a hub's edges with its single ``m`` row is left to
adaptive execution's skew-join splitting (enabled by :func:`tune`).

:func:`grouped_wcc` is the faster path for Algorithm 3's subgraphs, whose
edges never cross the current sets: each set goes whole to one task and is
solved there by the NumPy union-find (one shuffle). A set is skewed by
design there, so the caller only uses it below a size limit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

MAX_ROUNDS = 200


def tune(spark: SparkSession) -> None:
    """Adaptive execution with skew-join splitting (Spark's defaults, made explicit)."""
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    spark.conf.set("spark.sql.adaptive.skewJoin.enabled", "true")


def spark_wcc(
    edges: DataFrame,
    scratch: str,
    on_round: Callable[[int], None] | None = None,
) -> DataFrame:
    """Components of the graph given by ``edges(src, dst)``: a DataFrame
    ``(node, label)`` for every node on an edge, ``label`` = smallest node id
    of its component. ``scratch`` is a directory (Spark path) for the
    per-round edge sets; the caller deletes it."""
    current = _materialise(
        edges.where(F.col("src") != F.col("dst"))
        .select(F.greatest("src", "dst").alias("u"), F.least("src", "dst").alias("v"))
        .distinct(),
        scratch,
    )
    for round_no in range(1, MAX_ROUNDS + 1):
        current = _materialise(_small_star(_large_star(current)), scratch)
        if on_round is not None:
            on_round(round_no)
        if _is_star_forest(current):
            return _labels(current)
    raise RuntimeError(f"connected components did not converge in {MAX_ROUNDS} rounds")  # pragma: no cover


def _materialise(df: DataFrame, scratch: str) -> DataFrame:
    path = f"{scratch}/round-{uuid.uuid4().hex[:10]}"
    df.write.parquet(path)
    return df.sparkSession.read.parquet(path)


def _large_star(e: DataFrame) -> DataFrame:
    # Edges point down (u > v), so the smallest of a node and its neighbours is
    # the node itself or its smallest parent: one pre-combined aggregate over E
    # instead of one over both directions. Every edge (u, v) is a neighbour
    # u > v of v and is re-attached to m(v).
    smallest = e.groupBy("u").agg(F.min("v").alias("m")).withColumnRenamed("u", "v")
    return e.join(smallest, "v", "left").select(
        "u", F.least(F.col("v"), F.coalesce(F.col("m"), F.col("v"))).alias("v")
    )  # duplicates are harmless here: small-star's output is deduplicated


def _small_star(e: DataFrame) -> DataFrame:
    smallest = e.groupBy("u").agg(F.min("v").alias("m"))
    attached = (
        e.join(smallest, "u")
        .where(F.col("v") != F.col("m"))
        .select(F.col("v").alias("u"), F.col("m").alias("v"))
    )
    return attached.unionByName(smallest.select("u", F.col("m").alias("v"))).distinct()


def _is_star_forest(e: DataFrame) -> bool:
    """No node with two parents and no parent with a parent (one Spark job)."""
    two_parents = e.groupBy("u").count().where(F.col("count") > 1).select("u")
    parent_with_parent = e.select(F.col("v").alias("u")).join(e.select("u"), "u", "left_semi")
    return two_parents.unionByName(parent_with_parent).limit(1).count() == 0


def _labels(stars: DataFrame) -> DataFrame:
    centres = stars.select(F.col("v").alias("node"), F.col("v").alias("label")).distinct()
    return stars.select(F.col("u").alias("node"), F.col("v").alias("label")).unionByName(centres)


def grouped_wcc(edges: DataFrame, partitions: int) -> DataFrame:
    """Components of ``edges(src, dst, grp)`` when no edge joins two groups
    (Algorithm 3's subgraphs: both ends of a kept edge lie in one current set).
    Each group is sent whole to one task, which solves it in memory with the
    NumPy union-find; one shuffle, no iteration. The caller bounds group size."""
    return (
        edges.repartition(partitions, "grp")
        .select("src", "dst")
        .mapInArrow(_partition_wcc, "node long, label long")
    )


def _partition_wcc(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import numpy as np

    from .localwcc import wcc_labels

    parts = [b for b in batches if b.num_rows]
    if not parts:
        return
    table = pa.Table.from_batches(parts)
    src = table.column("src").to_numpy()
    dst = table.column("dst").to_numpy()
    nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    labels = wcc_labels(len(nodes), inverse[: len(src)], inverse[len(src) :])
    yield pa.RecordBatch.from_arrays([pa.array(nodes), pa.array(nodes[labels])], names=["node", "label"])


def empty_labels(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], "node long, label long")
