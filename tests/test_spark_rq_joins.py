"""How the Spark recursion joins a list of ids with a table: an IN filter for
few, a broadcast join for more, a sort-merge join (never a broadcast) above
``BROADCAST_LIMIT`` — a broadcast of a largest component's frontier at the
paper's 9x ran the driver out of memory."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


def _final_plan(frame: Any) -> str:
    """The physical plan Spark ran (after the action: adaptive execution's final plan)."""
    return str(frame._jdf.queryExecution().executedPlan().toString())


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from provplug.query import spark_rq

    monkeypatch.setattr(spark_rq, "ISIN_LIMIT", 2)
    monkeypatch.setattr(spark_rq, "BROADCAST_LIMIT", 4)


def test_ids_above_the_broadcast_limit_are_sort_merge_joined(spark: Any, small_limits: None) -> None:
    from provplug.query import spark_rq

    frame = spark.createDataFrame([(i, i + 100, 7) for i in range(50)], "src long, dst long, op long")
    for ids, join in ((np.arange(3), "BroadcastHashJoin"), (np.arange(0, 40, 4), "SortMergeJoin")):
        matched = spark_rq.rows_with(spark, frame, "src", ids)
        rows = sorted(tuple(r) for r in matched.collect())
        assert rows == [(int(i), int(i) + 100, 7) for i in ids]  # the ids' rows, the table's columns only
        plan = _final_plan(matched)
        assert join in plan, plan
    assert "Broadcast" not in plan, plan  # the many ids: nothing broadcast


def test_walk_spark_over_a_wide_frontier_equals_the_driver_walk(spark: Any, small_limits: None) -> None:
    """A fan-out of 30 from one value, then a chain from each: the frontiers
    pass both limits, and the answer is the driver walk's."""
    from provplug.plugin.query_results import Direction, Edges
    from provplug.progress import Progress
    from provplug.query import spark_rq
    from provplug.query.driver import walk

    rows = [(0, 10 + k, 1) for k in range(30)] + [(10 + k, 100 + k, 2) for k in range(30)] + [(500, 501, 3)]
    frame = spark.createDataFrame(rows, "src long, dst long, op long")
    arrays = Edges(*(np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)))
    cases: list[tuple[list[int], Direction]] = [([0], "down"), (list(range(100, 130)), "up")]
    for seeds, direction in cases:
        expected = walk(arrays, np.array(seeds), direction)
        got = spark_rq.walk_spark(spark, frame, np.array(seeds), direction, progress=Progress(enabled=False))
        assert got.lineage.tolist() == expected.lineage.tolist()
        assert got.edges.src.tolist() == expected.edges.src.tolist()
        assert got.edges.dst.tolist() == expected.edges.dst.tolist()
    assert len(walk(arrays, np.array([0]), "down").lineage) == 60
