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

from provplug import schema, sortedints
from provplug.index import layout
from provplug.plugin.query_results import Direction, Edges, Walk
from provplug.progress import Progress
from provplug.sparksession import spark_ddl

# Id lists up to this many values are pushed into the scan as an IN-set filter;
# larger ones are joined (a plan with a huge literal list is slow).
ISIN_LIMIT = 20_000
# Up to this many ids the join broadcasts them; above, it is a sort-merge join
# (both sides shuffled, spilling as needed). A broadcast builds the whole id
# table in the driver's memory: a largest component's frontier at the paper's
# 9x (millions of values) made Spark give up ("Not enough memory to build and
# broadcast the table").
BROADCAST_LIMIT = 1_000_000
_ID = "_provplug_id"  # the joined ids' column (a name no store or index table uses)


def _ids_frame(spark: Any, values: np.ndarray) -> Any:
    """``values`` as a one-column DataFrame, sent as Arrow (not as millions of Python tuples)."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(_ID, T.LongType(), False)])
    return spark.createDataFrame(pa.table({_ID: pa.array(np.asarray(values, np.int64))}), schema)


def rows_with(spark: Any, frame: Any, column: str, ids: np.ndarray) -> Any:
    """The rows of ``frame`` whose ``column`` is one of ``ids``: an IN filter
    pushed into the scan for few ids, a broadcast join up to
    :data:`BROADCAST_LIMIT`, a sort-merge join above (no broadcast at all)."""
    from pyspark.sql import functions as F

    if len(ids) <= ISIN_LIMIT:
        return frame.where(F.col(column).isin(np.asarray(ids).tolist()))
    wanted = _ids_frame(spark, ids)
    wanted = F.broadcast(wanted) if len(ids) <= BROADCAST_LIMIT else wanted.hint("merge")
    return frame.join(wanted, frame[column] == wanted[_ID]).drop(_ID)


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
    progress = Progress() if progress is None else progress
    stage = f"lineage on Spark ({'ancestors' if direction == 'up' else 'descendants'})"

    seeds = sortedints.unique(np.asarray(seeds, dtype=np.int64))
    edges = triples if cached else triples.select("src", "dst", "op").cache()  # scanned once per round
    frm, to = ("dst", "src") if direction == "up" else ("src", "dst")
    found: list[pa.Table] = []
    visited = seeds
    frontier = seeds
    rounds = 0
    try:
        while len(frontier):
            step = _to_arrow(rows_with(spark, edges, frm, frontier).select("src", "dst", "op"))
            found.append(step)
            reached = sortedints.unique(step.column(to).to_numpy().astype(np.int64))
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
