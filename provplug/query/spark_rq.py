"""Recursive querying on Spark (the paper's ``RQ_on_Spark``): semi-naive
recursion with DataFrames. Each round joins only the values found in the
previous round (the delta) with the triples, one Spark job per round; the
round's triples come back to the driver (they are part of the answer) and the
next delta is what they reach that was not seen before.

PySpark is imported here only, and this module is imported only when a query
takes the Spark path, so the driver path never starts a JVM.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from provplug import schema
from provplug.index import layout
from provplug.plugin.query_results import Direction, Edges, Walk
from provplug.progress import Progress
from provplug.sparksession import spark_ddl

# Deltas up to this many values are pushed into the scan as an IN-set filter;
# larger ones are broadcast-joined (a plan with a huge literal list is slow).
ISIN_LIMIT = 20_000


def _ids_frame(spark: Any, values: np.ndarray) -> Any:
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("id", T.LongType(), False)])
    return spark.createDataFrame([(int(v),) for v in values.tolist()], schema)


def _to_arrow(frame: Any) -> pa.Table:
    if hasattr(frame, "toArrow"):  # PySpark >= 4.0
        return frame.toArrow()
    return pa.Table.from_pandas(frame.toPandas(), preserve_index=False)


def walk_spark(
    spark: Any,
    triples: Any,
    seeds: np.ndarray,
    direction: Direction,
    cached: bool = False,
    progress: Progress | None = None,
) -> Walk:
    """Semi-naive recursion over ``triples`` (a DataFrame with src, dst, op);
    ``cached``: the caller keeps ``triples`` cached (else it is cached here
    for the rounds of this query only). Each round (one Spark job) is
    reported to ``progress`` (by default a progress bar or lines on stderr:
    a query on Spark can take minutes)."""
    from pyspark.sql import functions as F

    progress = Progress() if progress is None else progress
    stage = f"lineage on Spark ({'ancestors' if direction == 'up' else 'descendants'})"

    seeds = np.unique(np.asarray(seeds, dtype=np.int64))
    edges = triples if cached else triples.select("src", "dst", "op").cache()  # scanned once per round
    frm, to = ("dst", "src") if direction == "up" else ("src", "dst")
    found: list[pa.Table] = []
    visited = seeds
    frontier = seeds
    rounds = 0
    try:
        while len(frontier):
            if len(frontier) <= ISIN_LIMIT:  # a literal set: one scan stage, no exchange
                matched = edges.where(F.col(frm).isin(frontier.tolist()))
            else:
                delta = _ids_frame(spark, frontier)
                matched = edges.join(F.broadcast(delta), edges[frm] == delta["id"]).select("src", "dst", "op")
            step = _to_arrow(matched)
            found.append(step)
            reached = np.unique(step.column(to).to_numpy().astype(np.int64))
            frontier = np.setdiff1d(reached, visited, assume_unique=True)
            visited = np.union1d(visited, frontier)
            rounds += 1
            progress.update(stage, len(visited) - len(seeds), f"values reached in {rounds} round(s)")
        progress.done(stage, len(visited) - len(seeds), f"values reached in {rounds} round(s)")
    finally:
        if not cached:
            edges.unpersist()
    arrays = [
        np.concatenate([t.column(c).to_numpy().astype(np.int64) for t in found]) if found else np.empty(0, np.int64)
        for c in ("src", "dst", "op")
    ]
    # Seeds reached from other seeds are query values, not lineage.
    return Walk(np.setdiff1d(visited, seeds), Edges(*arrays).sorted())


# The Parquet files' schemas, as Spark is told them.
TRIPLE_COLUMNS_DDL = spark_ddl(schema.TRIPLES)
INDEXED_TRIPLES_DDL = spark_ddl(layout.INDEXED_TRIPLES)


def read_parquet(spark: Any, files: list[str], schema_ddl: str) -> Any:
    """A DataFrame over Parquet ``files`` with a known schema: Spark then needs
    no partition discovery and no footer reads to plan the scan."""
    if not files:
        return spark.createDataFrame([], schema_ddl)
    return spark.read.schema(schema_ddl).parquet(*files)
