"""Semi-naive recursion on Spark (``walk_spark``) against the driver's walk,
on a chain twelve rounds deep, both directions, with and without a
caller-cached table."""

from __future__ import annotations

from typing import Any

import numpy as np


def chain_with_branches() -> list[tuple[int, int, int]]:
    """0 -> 1 -> ... -> 12 (twelve rounds deep), a side branch at each even
    value, and a separate pair the queries never reach."""
    triples = [(i, i + 1, 100 + i) for i in range(12)]
    triples += [(i, 1_000 + i, 200 + i) for i in range(0, 12, 2)]
    triples += [(5_000, 5_001, 300)]
    return triples


def test_walk_spark_equals_the_driver_walk(spark: Any) -> None:
    from provplug.plugin.query_results import Edges
    from provplug.progress import Progress
    from provplug.query import spark_rq
    from provplug.query.driver import walk

    rows = chain_with_branches()
    frame = spark.createDataFrame(rows, "src long, dst long, op long")
    arrays = Edges(*(np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)))
    for seeds, direction in (([0], "down"), ([12], "up"), ([6, 1_004], "up"), ([5_001], "up")):
        expected = walk(arrays, np.array(seeds), direction)
        got = spark_rq.walk_spark(spark, frame, np.array(seeds), direction, progress=Progress(enabled=False))
        assert got.lineage.tolist() == expected.lineage.tolist(), (seeds, direction)
        assert [getattr(got.edges, c).tolist() for c in ["src", "dst", "op"]] == [
            getattr(expected.edges, c).tolist() for c in ["src", "dst", "op"]
        ]
    assert len(walk(arrays, np.array([0]), "down").lineage) == 12 + 6  # the recursion was deep
    assert frame.storageLevel.useMemory is False  # the query's own cache is gone


def test_walk_spark_on_a_table_the_caller_cached(spark: Any) -> None:
    from provplug.progress import Progress
    from provplug.query import spark_rq

    frame = spark.createDataFrame(chain_with_branches(), "src long, dst long, op long").cache()
    try:
        got = spark_rq.walk_spark(spark, frame, np.array([12]), "up", cached=True, progress=Progress(enabled=False))
        assert got.lineage.tolist() == list(range(12))
        assert frame.storageLevel.useMemory  # left to the caller
    finally:
        frame.unpersist()
