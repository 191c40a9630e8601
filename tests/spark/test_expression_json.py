"""What the rewrite reads of an expression tree (provplug_spark._jvm: by its
compiled tree reader, else the tree's JSON) against what Catalyst itself
says of the same tree: the attributes it reads and whether an aggregate
function in it reads none (``count(*)``). The rules of filters, joins and
aggregates take both from it. And the plan trees the reader reads against
the same trees asked of the JVM node by node."""

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


# Trees of every kind the rules read: subqueries (their plans are fields, not
# children), lambdas, windows, Python UDFs, structs, casts, literals.
READER_QUERIES = [
    QUERY,
    "select * from t where v > 2 and (w < 0 or k = 1)",
    "select * from t a join t b on a.k = b.k and a.v < b.w",
    "select k, v from t where v > (select avg(v) from t s where s.k = t.k)",
    "select k from t where exists (select 1 from t s where s.w = t.v) or k in (select w from t)",
    "select k from t where exists (select 1 from t s where s.w = t.v)",  # a subquery as the top expression
    "select k, transform(array(v, w), x -> x + k) as xs, named_struct('a', v, 'b', w).a as a from t",
    "select k, sum(v) over (partition by k order by w rows between 1 preceding and current row) as s from t",
    "select k, plus_one(v) as p, cast(v as string) as c, 1.5 as d, 'x' as e, null as f from t",
]


def _plan_nodes(plan: Any) -> list[Any]:
    nodes = [plan]
    for i in range(plan.children().size()):
        nodes += _plan_nodes(plan.children().apply(i))
    return nodes


def test_the_compiled_tree_reader_reads_what_the_json_says(spark: Any) -> None:
    from pyspark.sql.functions import udf

    jvm = _catalyst(spark)
    assert jvm._tree_reader is not None  # compiled on this Spark: the rewrite reads no JSON
    spark.udf.register("plus_one", udf(lambda x: x + 1, "int"))
    compared = 0
    for sql in READER_QUERIES:
        for node in _plan_nodes(jvm.plan(spark.sql(sql))):
            for i in range(node.expressions().size()):
                expr = node.expressions().apply(i)
                read, json_read = jvm.read_tree(expr), jvm.read_tree_json(expr)
                assert (read.kinds, read.facts) == (json_read.kinds, json_read.facts), str(expr.toString())
                compared += 1
    assert compared > 40


def _shape(jvm: Any, tree: Any) -> tuple[Any, ...]:
    """A plan tree's node names and expressions' text, children in order."""
    node = tree.node
    return (
        jvm.node_name(node),
        str(node.nodeName()),
        str(node.expressions().toString()),
        tuple(_shape(jvm, c) for c in tree.children),
    )


def test_the_compiled_tree_reader_reads_plans_as_asking_node_by_node(spark: Any) -> None:
    jvm = _catalyst(spark)
    for sql in [
        *READER_QUERIES[:-1],
        "select a.k, b.v from t a join (select k, v from t union all select w, v from t) b on a.k = b.k",
    ]:
        plan = jvm.inlined(jvm.plan(spark.sql(sql)))
        read = _shape(jvm, jvm.tree(plan))
        assert read == _shape(jvm, jvm._tree_by_calls(plan)), sql
        assert read[0] == read[1]  # the name the reader gave is the node's own


def test_a_reader_that_cannot_be_compiled_leaves_the_json_to_read(
    spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from provplug_spark import _jvm

    monkeypatch.setattr(_jvm, "_TREE_READER_SOURCE", "public class ProvplugTreeReader { not java }")
    with caplog.at_level("INFO", logger=_jvm.__name__):
        assert _jvm._compiled_tree_reader(spark._jvm) is None
    assert "reading expression trees as JSON" in caplog.text
    jvm = _catalyst(spark)
    monkeypatch.setattr(jvm, "_tree_reader", None)
    plan = jvm.plan(spark.sql(READER_QUERIES[1]))
    node = plan.child() if plan.nodeName() == "Project" else plan
    (tree,) = jvm.expressions(node)  # the Filter's condition, as JSON
    assert tree.facts is not None
    assert sorted(tree.facts.references) == sorted(jvm.expr_id(a) for a in jvm.references(tree.jvm))
    assert jvm.node_name(jvm.tree(plan).children[0].node) == "Filter"


def test_a_large_filters_tree_is_read_in_a_reply_under_py4js_8_kb(spark: Any) -> None:
    """TPC-H q19's shape: three conjunctions of IN lists and ranges, ORed.
    The reader names each node by its class without the package: a reply of
    more than 8 KB reaches Python about 40 ms late (py4j, Nagle's algorithm
    and delayed ACK). Its kinds still say which expressions the tree holds."""
    jvm = _catalyst(spark)
    branch = "(k in ({0}) and v between {1} and {1} + 10 and w in ({0}) and k + v > {1})"
    condition = " or ".join(branch.format(", ".join(str(i) for i in range(n, n + 8)), n) for n in (1, 20, 40, 60, 80))
    plan = jvm.plan(spark.sql(f"select * from t where {condition}")).child()  # the Filter below the Project
    [tree] = jvm.expressions(plan)
    text = str(jvm._tree_reader.nodes(tree.jvm))
    assert len(text.splitlines()) > 200 and len(text) < 8192  # in full class names: about 11 KB
    assert {"Or", "And", "In", "AttributeReference"} <= tree.kinds
