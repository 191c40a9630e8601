"""Python UDTF calls over the rows of a plan: ``LATERAL my_udtf(t.a)``,
``my_udtf(TABLE(t) [PARTITION BY ...])`` and ``df.lateralJoin(my_udtf(...))``.

Spark's analyzed plan holds each as a ``LateralJoin`` of the argument rows
(the left side) with a lateral subquery that is one ``Generate`` of the
``PythonUDTF`` over ``OneRowRelation``, whose arguments are outer references
to the argument row's columns. A UDTF is a black box over its argument rows
(docs/capture-semantics.md): the call is rebuilt so that the UDTF also
receives the argument row's row numbers, and the user's class is wrapped
(:func:`.blackbox.carried_udtf`) to list, beside each output row, the row
numbers the row depends on: the argument row of the call that yielded it and
every argument row received since the instance last held its initial state
(``terminate``'s rows, which Spark pairs with the partition's last row,
included). Every output column of the UDTF depends
on every argument cell of those rows; the left side's columns are copies.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StructField, StructType
from pyspark.util import PythonEvalType

from provplug.errors import CaptureError

from .blackbox import carried_udtf
from .state import ROW_LIST_TYPE, Context, Node

# The UDTFs whose class is called with one argument row at a time (not PyArrow UDTFs, which get batches).
ROW_UDTF_EVAL_TYPES = {PythonEvalType.SQL_TABLE_UDF, PythonEvalType.SQL_ARROW_TABLE_UDF}
LATERAL_JOIN_TYPES = {"Inner", "LeftOuter"}


def lateral_join(node: Any, children: list[Node], ctx: Context) -> Node:
    """A LateralJoin calling a Python UDTF on each left row (see the module)."""
    jvm, state = ctx.jvm, ctx.state
    left = children[0]
    subquery = node.right()
    aliases, generate = _udtf_call(subquery.plan())
    udtf = generate.generator()
    _check_call(node, udtf)
    args = _outer_attributes(ctx, udtf)
    state.check_not_deferred(args)
    outputs = jvm.items(generate.generatorOutput())
    state.facts.opaque("a Python UDTF")  # which rows it returns is its own business
    lists: dict[str, str] = {}
    terms = state.relisted(state.terms_of(args), lists, left.injective)
    for attr in outputs:
        state.terms[jvm.expr_id(attr)] = terms
        state.facts.propagate(jvm.expr_id(attr), [])
        state.facts.row_dependent.add(jvm.expr_id(attr))
    if not lists:  # literal arguments: the outputs hold no input cell
        return Node(jvm.with_children(node, [left.plan]), left.rows, left.hidden, None)
    handler = jvm.udtf_class(udtf)
    left_attrs = {a.name(): a for a in jvm.items(left.plan.output())}
    numbers = [left_attrs[r] for r in lists]
    schema = StructType.fromJson(json.loads(udtf.elementSchema().json()))
    carried = carried_udtf(handler, tuple(state.rows[r].scalar for r in lists))
    called = jvm.copy_with(
        udtf,
        func=jvm.python_function_of(carried),
        elementSchema=jvm.data_type(
            StructType([*schema.fields, *[StructField(n, ArrayType(LongType())) for n in lists.values()]]).json()
        ),
        children=jvm.seq([*jvm.items(udtf.children()), *[jvm.outer_reference(a) for a in numbers]]),
        tableArguments=_with_plain_arguments(ctx, udtf.tableArguments(), len(numbers)),
    )
    # Fresh attributes for the lists: a projection's outputs, typed as the wrapper returns them.
    extra = jvm.items(
        jvm.plan(
            jvm.frame(left.plan).select(*[F.lit(None).cast(ROW_LIST_TYPE).alias(n) for n in lists.values()])
        ).output()
    )
    generated = jvm.copy_with(generate, generator=called, generatorOutput=jvm.seq([*outputs, *extra]))
    for alias in reversed(aliases):
        generated = alias.withNewChildren(jvm.seq([generated]))
    outer = jvm.seq([*jvm.items(subquery.outerAttrs()), *numbers])
    joined = jvm.copy_with(node, left=left.plan, right=jvm.copy_with(subquery, plan=generated, outerAttrs=outer))
    return Node(jvm.plan(jvm.frame(joined)), left.rows + tuple(lists.values()), left.hidden, None)


def _udtf_call(plan: Any) -> tuple[list[Any], Any]:
    """(the SubqueryAliases above it, the Generate) of a lateral subquery that
    is one Python UDTF call; CaptureError for any other lateral subquery."""
    aliases = []
    while plan.nodeName() == "SubqueryAlias":
        aliases.append(plan)
        plan = plan.child()
    if (
        plan.nodeName() != "Generate"
        or plan.child().nodeName() != "OneRowRelation"
        or plan.generator().nodeName() != "PythonUDTF"
    ):
        raise CaptureError(
            "cannot capture a lateral subquery (plan node LateralJoin) exactly: only a lateral call of "
            "a Python UDTF is captured"
        )
    return aliases, plan


def _check_call(node: Any, udtf: Any) -> None:
    name = udtf.name()
    join_type = node.joinType().toString()
    if join_type not in LATERAL_JOIN_TYPES or node.condition().isDefined():
        raise CaptureError(f"cannot capture Python UDTF {name} joined laterally as {join_type} with a condition")
    if udtf.evalType() not in ROW_UDTF_EVAL_TYPES:
        raise CaptureError(
            f"cannot capture PyArrow UDTF {name} exactly: it receives batches of rows, which the plan "
            "does not attribute to its output rows"
        )
    if udtf.pickledAnalyzeResult().isDefined():
        raise CaptureError(
            f"cannot capture Python UDTF {name}: its class has an analyze method, whose result its "
            "instances are made with; declare its returnType instead"
        )


def _with_plain_arguments(ctx: Context, table_arguments: Any, count: int) -> Any:
    """The UDTF's per-argument "is a TABLE argument" flags (when it has them)
    with ``count`` more plain arguments: Spark passes the function one
    argument per flag."""
    if table_arguments.isEmpty():
        return table_arguments
    flags = [*ctx.jvm.items(table_arguments.get()), *[False] * count]
    return ctx.jvm.some(ctx.jvm.seq(flags))


def _outer_attributes(ctx: Context, udtf: Any) -> list[Any]:
    """The argument row's columns the UDTF's arguments reference."""
    jvm = ctx.jvm
    if not udtf.references().isEmpty():
        raise CaptureError(f"internal: Python UDTF {udtf.name()} references columns of its own subquery")
    found: dict[int, Any] = {}
    for arg in jvm.items(udtf.children()):
        for expr in jvm.walk_expressions(arg):
            if expr.nodeName() == "OuterReference":
                found.setdefault(jvm.expr_id(expr.e()), expr.e())
    return list(found.values())
