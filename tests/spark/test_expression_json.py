"""What the rewrite reads of an expression tree's JSON (provplug_spark._jvm)
against what Catalyst itself says of the same tree: the attributes it reads
and whether an aggregate function in it reads none (``count(*)``). The
rules of filters, joins and aggregates take both from the JSON."""

from __future__ import annotations

from typing import Any

import pytest

QUERY = """
select k,
       count(*) as n,
       count(v) as nv,
       sum(v * 2) as s,
       max(k) + 1 as m,
       count(*) + sum(v) as mixed,
       sum(v) filter (where w > 0) as filtered,
       k + 1 as k1
from t group by k
"""


def _catalyst(spark: Any) -> Any:
    from provplug_spark._jvm import Catalyst

    spark.createDataFrame([(1, 2, 3), (1, 4, -1), (2, 5, 0)], "k int, v int, w int").createOrReplaceTempView("t")
    return Catalyst(spark)


def _reads_nothing_by_catalyst(jvm: Any, expr: Any) -> bool:
    return any(
        e.nodeName() in ("AggregateExpression", "PythonUDAF") and e.references().isEmpty()
        for e in jvm.walk_expressions(expr)
    )


def test_an_aggregates_json_facts_are_what_catalyst_says(spark: Any) -> None:
    jvm = _catalyst(spark)
    plan = jvm.plan(spark.sql(QUERY))
    assert plan.nodeName() == "Aggregate"
    trees = jvm.expressions(plan)
    assert len(trees) == plan.groupingExpressions().size() + plan.aggregateExpressions().size()
    reads_nothing = {}
    for tree in trees:
        assert tree.facts is not None
        assert sorted(tree.facts.references) == sorted(jvm.expr_id(a) for a in jvm.references(tree.jvm))
        assert tree.facts.aggregate_reads_nothing == _reads_nothing_by_catalyst(jvm, tree.jvm)
        reads_nothing[str(tree.jvm.toString()).split(" AS ")[-1].split("#")[0]] = tree.facts.aggregate_reads_nothing
    # By hand: count(*) reads no column, alone or beside sum(v); the others read one.
    assert {n for n, r in reads_nothing.items() if r} == {"n", "mixed"}


@pytest.mark.parametrize(
    "sql",
    [
        "select * from t where v > 2 and (w < 0 or k = 1)",
        "select * from t a join t b on a.k = b.k and a.v < b.w",
    ],
)
def test_a_conditions_json_reads_what_catalyst_says(spark: Any, sql: str) -> None:
    jvm = _catalyst(spark)
    plan = jvm.plan(spark.sql(sql))
    node = plan.child() if plan.nodeName() == "Project" else plan
    (tree,) = jvm.expressions(node)  # a Filter's or Join's one expression: its condition
    assert tree.facts is not None
    assert sorted(tree.facts.references) == sorted(jvm.expr_id(a) for a in jvm.references(tree.jvm))
    assert len(tree.facts.references) >= 3
