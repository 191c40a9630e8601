"""How each Spark plan node propagates provenance: one rule per operation.

A rule is a function ``(node, children, context) -> Node``: it gets an
analyzed Catalyst plan node, its children already rewritten (:class:`.Node`:
the child plan carrying row-number columns) and a :class:`.Context`; it
returns the node rebuilt over the rewritten children, its row-number
columns, and records in ``context.state`` the terms (see :mod:`.state`) of
every attribute the node outputs. The original Catalyst nodes and
expressions are reused as they are, so Spark's own semantics compute the
data. ``rule_for(node)`` picks the rule (docs/capture-semantics.md in Catalyst terms;
``terms(a)`` = the terms of attribute ``a``):

=============================  =====================================================
plan node                      rule
=============================  =====================================================
``LogicalRelation``            ``table_read``: a stored table of the run; one
                               row-number column, ``terms(c) = {(row, id(table,
                               c, 0))}``
``LocalRelation``, ``Range``   ``constant``: built inside the step: literals, no
                               terms
``Filter``, ``Sort``,          ``copy``: kept over the rewritten child; row
``*Limit``, ``Sample``,        numbers pass through
``Repartition*``, hints,
aliases
``Project``                    ``project``: ``terms(e)`` = the union of the terms
                               of ``references(e)``; a ``using`` join's merged
                               key also gets its partner key's terms
``Join``                       ``join``: each side keeps its row numbers
``Generate``                   ``generate``: generator outputs <- the generator's
                               references; other columns copy
``Union``                      ``union``: positional; every branch projected to
                               the same row-number columns (null where a branch
                               has none)
``Aggregate``                  ``aggregate``: the terms of ``references(e)`` over
                               the group's rows (member lists, or a group join:
                               :mod:`.groupjoin`); an aggregate with no
                               references: the grouping keys'
``Deduplicate``,               ``deduplicate`` / ``distinct``: keys as aggregate;
``Distinct``                   other columns from the kept row (``first``, in
                               lock-step)
``Window``                     ``window``: ``collect_list`` of the referenced row
                               numbers over the same window (rank-like: the
                               order-by cells)
``FlatMapGroupsInPandas``,     ``apply_in_pandas`` / ``map_in_pandas``: black
``MapInPandas``                boxes; the function is wrapped (:mod:`.blackbox`)
                               to list the row numbers it received
``LateralJoin``                ``lateral_join``: a Python UDTF called per left
                               row, a black box over its argument rows
                               (:mod:`.lateral`)
=============================  =====================================================

Every plan node kind is one :class:`NodeKind` record of :data:`NODE_KINDS`
(its rule and its facts). Refused black boxes and nodes without a rule raise
:class:`CaptureError` naming the operation: never capture wrongly.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import ArrayType, LongType, StructField, StructType
from pyspark.util import PythonEvalType

from provplug import ids
from provplug.errors import CaptureError
from provplug.rowrules import ColumnRule
from provplug.schema import POSITIONAL_PREFIX, ROW_COLUMN, positional_offset

from . import groupjoin
from ._jvm import GROUP_AGGREGATES, Catalyst, Expression
from .blackbox import Carried, group_function, partition_function, takes_key
from .lateral import lateral_join
from .readback import read_back_paths
from .rowlineage import (
    ONE_ROW_REASON,
    SUBQUERY_EXPRESSIONS,
    Members,
    Slot,
    aggregate_rule,
    collected,
    member_array,
    member_fields,
    product,
)
from .state import ROW_LIST_TYPE, ROWS_TYPE, Context, Node, RewriteState, RowColumn, TableRead
from .terms import Term

Rule = Callable[[Any, list[Node], Context], Node]

RAW_PREFIX = "__pvraw_"  # a window's lists before flattening
OUTER_JOINS = {
    "LeftOuter": (False, True),
    "RightOuter": (True, False),
    "FullOuter": (True, True),
}  # (left, right) padded


@dataclasses.dataclass(frozen=True)
class NodeKind:
    """What capture knows about one kind of Spark plan node (its Catalyst
    class name): one record per kind in :data:`NODE_KINDS`, the only place
    a node's facts are declared."""

    name: str
    rule: Rule | None = None
    """How its provenance is captured; None for a refused black box."""
    refused: str | None = None
    """A black box whose finest exposed granularity is a group or partition
    of whole records (capturing it exactly needs the function's input, which
    the plan does not expose per output row): the operation CaptureError names."""
    table_leaf: bool = False
    """A stored table of the run."""
    opaque: str | None = None
    """Row lineage: after this copy node a deletion may let other rows in
    (row existence is not derivable from deletions); the operation named."""
    wrapped: tuple[str, int] | None = None
    """A group or partition function captured as a black box
    (:mod:`.blackbox`): the operation and the PySpark eval type of the
    function it supports."""
    merging: bool = False
    """Merges rows (or passes only data columns to a function): an aggregate
    below it cannot defer its provenance."""
    unstable: bool = False
    """Its recomputation may yield other rows (or other values of the same
    row): an aggregate above it collects lists."""
    injective: bool = False
    """Every output row comes from a different input row (or from a literal):
    a row number cannot repeat across the rows of a group."""
    aligned: bool = False
    """Keeps its child's rows one for one, in the same tasks (location lineage, :mod:`.aligned`)."""
    fewer_rows: bool = False
    """Has at most as many rows as its (one) child: a bound on the child's rows bounds its own."""


# Expressions Catalyst calls deterministic but fixes once per query: another
# query (a group join's recomputation) sees other values.
PER_QUERY_EXPRESSIONS = {
    "CurrentTimestamp",
    "CurrentDate",
    "Now",
    "LocalTimestamp",
    "CurrentTimeZone",
    "CurrentBatchTimestamp",
    "CurrentTime",
}
# Joins whose output has the left side's columns only.
LEFT_ONLY_JOINS = {"LeftSemi", "LeftAnti"}
# Expressions that carry their one child's value (converted or renamed): the
# analyzer wraps join keys and union columns of different types in them.
VALUE_WRAPPERS = {"Cast", "UpCast", "Alias"}
UDF_EXPRESSIONS = {"PythonUDF", "PythonUDAF", "ScalaUDF", "ScalaAggregator", "PythonUDTF"}
RANK_LIKE = {"Rank", "DenseRank", "PercentRank", "CumeDist", "RowNumber", "NTile"}
UNSUPPORTED_EXPRESSIONS = {
    "PivotFirst": "pivot",
    "ScalarSubquery": "a scalar subquery",
    "LateralSubquery": "a lateral subquery",
}


# Copies whose output is their child's output, put back over their rewritten
# child without analysing the plan anew (the analysis of the next node that
# needs one covers them): a plan analysis costs milliseconds, growing with the plan.
UNANALYZED_COPIES = {
    "Filter",
    "Sort",
    "GlobalLimit",
    "LocalLimit",
    "Repartition",
    "RepartitionByExpression",
    "SubqueryAlias",
    "View",
}


def check_expressions(names: frozenset[str], node_name: str = "") -> None:
    """Refuse a node whose expressions have no provenance rule (a
    LateralJoin's subquery is checked by its rule: a Python UDTF call is one)."""
    for expr_name, operation in UNSUPPORTED_EXPRESSIONS.items():
        if expr_name == "LateralSubquery" and node_name == "LateralJoin":
            continue
        if expr_name == "ScalarSubquery" and node_name == "Filter":
            continue  # part of a predicate: it decides which rows pass, as IN and EXISTS do (``copy``)
        if expr_name in names:
            raise CaptureError(f"cannot capture {operation} (expression {expr_name}) exactly")


def is_table_read(node: Any, jvm: Catalyst) -> bool:
    """A table leaf, or the column selection provplug put on it: not user operations."""
    name = jvm.node_name(node)
    if is_table_leaf(name):
        return True
    # Only attributes: the project list equals its output (an Alias's output
    # is its attribute, not itself); three round trips, not two a column.
    return (
        name == "Project"
        and is_table_leaf(jvm.node_name(node.child()))
        and bool(node.projectList().equals(node.output()))
    )


# -- leaves --------------------------------------------------------------------------
def table_read(node: Any, children: list[Node], ctx: Context) -> Node:
    """A stored table of the run (a Parquet read of ``rows/<table>/``).

    docs/capture-semantics.md: "A value with no parents (source cells, literals) has no
    incoming triple": a step input cell is the parent the step's triples
    point to, so ``terms(c) = {(row, id(table, c, 0))}`` with one row-number
    column: the stored row number, or for copies of source files the file
    offset plus ``_metadata.row_index``.
    """
    state = ctx.state
    read = _read_of(node, ctx)
    leaf = read.leaf
    state.inputs.add(leaf.table_id)
    state.rows[read.rows] = RowColumn(leaf.table_id, scalar=True, may_repeat=False)
    state.attributes[read.rows] = read.row_attribute
    state.facts.columns[leaf.table_id] = leaf.columns
    for name, expr_id in read.attrs:
        if name != ROW_COLUMN:  # a source cell: its own id
            state.terms[expr_id] = frozenset(
                {Term(read.rows, True, ids.value_id(leaf.table_id, leaf.columns.index(name), 0))}
            )
            state.facts.values[expr_id] = ColumnRule("copy", leaf.table_id, name)
    members = Members((Slot(read.rows, leaf.table_id, False),)) if state.row_lineage else None
    return Node(read.plan, (read.rows,), (), members, max_rows=leaf.rows)


def _read_of(node: Any, ctx: Context) -> TableRead:
    """The rewritten read of table leaf ``node``: the one an earlier rewrite
    of the run made of the same leaf when there is one (a table a step reads
    again, through the same stand-in: :mod:`.scripts`), else a new one.
    Making one takes an analysis of the ``_metadata`` column, the costliest
    part of a small step's rewrite."""
    jvm, state = ctx.jvm, ctx.state
    key = str(node.output().toString())  # expression ids are unique in the JVM: the leaf's identity
    known = state.reads.get(key, node)
    if known is not None and known.rows not in state.rows:  # (not twice in one rewrite)
        paths = known.paths
    else:
        known, paths = None, tuple(_leaf_paths(node))
    leaf = state.tables.read_by(paths)
    if known is not None and known.leaf == leaf:
        return known
    attrs = tuple((str(a.name()), jvm.expr_id(a)) for a in jvm.items(node.output()))
    if ROW_COLUMN in {n for n, _ in attrs}:  # a positional copy read back by readback.StoreRowsSource too
        row = f"CAST(`{ROW_COLUMN}` AS BIGINT)"
    elif leaf.positional:
        row = _positional_row(leaf.files)
    else:
        raise CaptureError(f"input {leaf.path} has no {ROW_COLUMN} column")
    rows = state.new_name()
    plan = jvm.plan(jvm.frame(node).selectExpr("*", f"{row} AS `{rows}`"))
    read = TableRead(paths, leaf, attrs, rows, plan, plan.output().last())
    state.reads.put(key, node, read)
    return read


def _leaf_paths(node: Any) -> list[str]:
    try:
        return read_back_paths(node) or [str(p) for p in Catalyst.items(node.relation().location().rootPaths())]
    except Exception as exc:  # py4j: not a file relation
        raise CaptureError(
            f"cannot capture a read of {node.toString().strip()}: register inputs with run.source()"
        ) from exc


# Up to this many copies, a copy's first row is looked up by its name.
FIRST_ROWS_BY_NAME = 256


def _positional_row(files: Sequence[str]) -> str:
    """The SQL of a positional copy's row number: its first row plus
    ``_metadata.row_index``. A table of one copy reads no file name: asking
    for it makes Spark build the metadata struct with the name, row by row,
    and compare it (about 40 ms more on a full scan of TPC-H SF 0.1's
    lineitem, against 20 ms for the row index alone)."""
    only = positional_offset(files[0]) if len(files) == 1 else None
    if only is not None:
        return f"{only} + _metadata.row_index"
    return f"{_first_row(files)} + _metadata.row_index"


def _first_row(files: Sequence[str]) -> str:
    """The SQL of a positional copy's first row number, which its name holds
    (provplug.schema.positional_name). With the copies' names known, a CASE on
    the file name: the name is a constant per file, so that costs about
    nothing, where parsing it costs more than reading the row (the substring
    and the cast run per row: a filtered read of TPC-H's lineitem took 0.44 s
    against 0.18 s). The
    parse stays for a copy not in the list (it never is) or too many copies."""
    start = len(POSITIONAL_PREFIX) + 1
    parsed = f"CAST(substring(_metadata.file_name, {start}, 12) AS BIGINT)"
    if not files or len(files) > FIRST_ROWS_BY_NAME:
        return parsed
    cases = " ".join(f"WHEN '{name}' THEN {positional_offset(name)}" for name in files)
    return f"(CASE _metadata.file_name {cases} ELSE {parsed} END)"


def constant(node: Any, children: list[Node], ctx: Context) -> Node:
    """A leaf built inside the step (``range``; ``createDataFrame`` of pandas
    data: a LocalRelation).

    docs/capture-semantics.md: "A value with no parents (source cells, literals) has no
    incoming triple": its cells are literals, with no terms.
    """
    for attr in ctx.jvm.items(node.output()):
        ctx.state.terms[ctx.jvm.expr_id(attr)] = frozenset()
    # Its rows need no input row.
    return Node(node, (), (), Members(empty=True) if ctx.state.row_lineage else None)


# -- row-wise ----------------------------------------------------------------------------
def copy(node: Any, children: list[Node], ctx: Context) -> Node:
    """Filter, Sort, limits, Sample, Repartition, hints and aliases: the node
    kept over its rewritten child; row numbers pass through.

    docs/capture-semantics.md, filter / where: "the same column of the same input row (copy).
    Predicate columns are not parents"; orderBy / sort / limit / sample /
    repartition / coalesce / cache: "copy, as filter".

    Row lineage: a row needs its one input row; a filter's predicate
    columns decide existence; after a limit or sample a deletion may let
    other rows in (opaque).
    """
    name, facts = ctx.jvm.node_name(node), ctx.state.facts
    if name == "Filter":
        ctx.state.decide_ids(_reads(_condition(ctx, node.condition), ctx.jvm), "a filter")
        if not node.condition().deterministic():
            facts.opaque("a nondeterministic filter")
        if ctx.expressions & (SUBQUERY_EXPRESSIONS | {"ScalarSubquery"}):
            facts.opaque("a filter with a subquery")
    elif (opaque := NODE_KINDS[name].opaque) is not None:
        facts.opaque(opaque)
    child = children[0]
    plans = [c.plan for c in children]
    if name in UNANALYZED_COPIES and not ctx.expressions & (SUBQUERY_EXPRESSIONS | {"ScalarSubquery"}):
        # Its output is its child's, its expressions are resolved by expression id: no
        # analysis (the costliest part of a rewrite) until the next node needs one.
        return Node(ctx.jvm.over(node, plans), child.rows, child.hidden, child.members)
    return Node(ctx.jvm.with_children(node, plans), child.rows, child.hidden, child.members)


def project(node: Any, children: list[Node], ctx: Context) -> Node:
    """A Project: ``terms(e)`` = the union of ``terms(a)`` for ``a`` in ``references(e)``; a
    ``using`` join's merged key also gets its partner key's terms.

    docs/capture-semantics.md, select / withColumn / selectExpr / cast / rename / drop: "the
    cells of r's input row in the columns that c's expression references (a
    literal-only column has no parent)"; join: "A merged ``using`` key
    column: the key cells of both matched rows".
    """
    jvm, state = ctx.jvm, ctx.state
    values = state.facts.values
    partners = _using_join_partners(node, jvm)
    for tree in ctx.trees:  # the projectList, as its trees read (Catalyst.read_tree)
        kind, expr_id, refs, renamed_id = _projected(tree, jvm)
        if kind == "AttributeReference":
            # A column kept as it is keeps its terms (same expression id).
            if expr_id in partners:  # the merged key: both sides' key cells
                kept = values.get(expr_id)  # (its value is this side's)
                state.facts.value_terms[expr_id] = state.terms.get(expr_id, frozenset())
                state.derive_ids(expr_id, [expr_id, partners[expr_id]])
                if kept is not None:
                    values[expr_id] = kept
            continue
        if partners:
            refs = [*refs, *(partners[i] for i in refs if i in partners)]
        state.derive_ids(expr_id, refs)  # an Alias's id is its attribute's
        if renamed_id in values:  # a rename: still a copy of the input cell
            values[expr_id] = values[renamed_id]
    child = children[0]
    plan = jvm.project(node.projectList(), _carried(child), child.plan, state.attributes)
    return Node(plan, child.rows, child.hidden, child.members)


def _projected(tree: Expression, jvm: Catalyst) -> tuple[str, int, list[int], int | None]:
    """(kind, expression id, ids of the attributes it reads, id of the
    attribute it only renames or None) of one projected expression, from its
    tree's nodes when they could be read."""
    facts = tree.facts
    if facts is not None and facts.expr_id is not None:
        return facts.top, facts.expr_id, list(facts.references), facts.renames
    expr = tree.jvm
    renamed = _carried_name(expr, jvm)
    return (
        jvm.node_name(expr),
        jvm.expr_id(expr),
        _reads(tree, jvm),
        None if renamed is None else jvm.expr_id(renamed),
    )


def _reads(tree: Expression, jvm: Catalyst) -> list[int]:
    """The ids of the attributes an expression reads: from its tree's nodes, else
    asked of the JVM (a round trip per attribute; the conditions of
    TPC-H-like filters and joins read dozens)."""
    if tree.facts is not None:
        return list(tree.facts.references)
    return [jvm.expr_id(a) for a in jvm.references(tree.jvm)]


def _condition(ctx: Context, condition: Callable[[], Any]) -> Expression:
    """A Filter's or Join's condition, its only expression: as the context
    read it, else ``condition()`` with no tree read."""
    return ctx.trees[0] if ctx.trees else Expression(condition(), frozenset(), None)


def _aggregate_reads_nothing(tree: Expression, jvm: Catalyst) -> bool:
    """Whether an aggregate function of the tree reads no attribute (``count(*)``)."""
    if tree.facts is not None:
        return tree.facts.aggregate_reads_nothing
    return any(
        jvm.node_name(e) in GROUP_AGGREGATES and e.references().isEmpty() for e in jvm.walk_expressions(tree.jvm)
    )


def _carried(node: Node) -> tuple[str, ...]:
    """The columns a node's parent must keep for provenance: row numbers,
    group-join columns and member columns."""
    members = node.members.columns if node.members is not None else ()
    return tuple(dict.fromkeys((*node.rows, *node.hidden, *members)))


def _carried_name(expr: Any, jvm: Catalyst) -> Any | None:
    """The attribute an Alias only renames (aliases of aliases seen through)."""
    while jvm.node_name(expr) == "Alias":
        expr = expr.child()
    return expr if jvm.node_name(expr) == "AttributeReference" else None


def _using_join_partners(project: Any, jvm: Catalyst) -> dict[int, int]:
    """For the Project a ``join(..., on="k")`` adds: merged key -> the other
    side's key (expression ids).

    Spark keeps one side's key attribute and hides the other (tagged
    ``hiddenOutputTag``). Keys of different types are compared through a
    cast of one side (or both): ``k#1L = cast(k#2 AS bigint)``.
    """
    hidden = jvm.hidden_output(project)
    child = project.child()
    if not hidden or child.nodeName() != "Join" or child.condition().isEmpty():
        return {}
    hidden_ids = {jvm.expr_id(a) for a in hidden}
    partners: dict[int, int] = {}
    for eq in _conjuncts(child.condition().get()):
        if eq.nodeName() not in ("EqualTo", "EqualNullSafe"):
            continue
        left, right = _carried_attribute(eq.left()), _carried_attribute(eq.right())
        if left is None or right is None:
            continue
        lid, rid = jvm.expr_id(left), jvm.expr_id(right)
        if rid in hidden_ids:
            partners[lid] = rid
        if lid in hidden_ids:
            partners[rid] = lid
    return partners


def _carried_attribute(expr: Any) -> Any | None:
    """The attribute whose value ``expr`` is, seen through the casts and
    aliases the analyzer adds (to compare or union columns of different
    types); None for any other expression."""
    while expr.nodeName() in VALUE_WRAPPERS:
        expr = expr.child()
    return expr if expr.nodeName() == "AttributeReference" else None


def _conjuncts(cond: Any) -> Iterator[Any]:
    if cond.nodeName() == "And":
        yield from _conjuncts(cond.left())
        yield from _conjuncts(cond.right())
    else:
        yield cond


def join(node: Any, children: list[Node], ctx: Context) -> Node:
    """A Join of the rewritten sides: each side keeps its row numbers (a
    semi or anti join only the left side's: the right's are not parents).

    docs/capture-semantics.md, join (all types): "a column coming from one side: that side's
    matched row's cell" (the merged ``using`` key: :func:`project`).
    """
    left, right = children
    jvm, state = ctx.jvm, ctx.state
    join_type = node.joinType().toString()
    if not node.condition().isEmpty():
        state.decide_ids(_reads(_condition(ctx, lambda: node.condition().get()), jvm), "a join condition")
        if not node.condition().get().deterministic():
            state.facts.opaque("a nondeterministic join condition")
    if ctx.expressions & (SUBQUERY_EXPRESSIONS | {"ScalarSubquery"}):
        plan = jvm.with_children(node, [left.plan, right.plan])
    else:  # as a copy's (UNANALYZED_COPIES): its output is its sides', its condition resolved by expression id
        plan = jvm.over(node, [left.plan, right.plan])
    state.facts.merged_one_row([left.members, right.members], "a join")
    if join_type in LEFT_ONLY_JOINS:
        if join_type == "LeftAnti":
            state.facts.opaque("anti join")
        elif right.members is None:
            state.facts.opaque("semi join over a black box")
        else:  # the left row exists while one match does: which one is not recorded
            state.facts.opaque_inputs.update(right.members.tables)
        return Node(plan, left.rows, left.hidden, left.members)
    rows, hidden = left.rows + right.rows, left.hidden + right.hidden
    if left.members is None or right.members is None:
        return Node(plan, rows, hidden, None)
    plan, members = _joined_members(ctx, plan, OUTER_JOINS.get(join_type, (False, False)), left, right)
    return Node(plan, rows, hidden, members)


def _joined_members(ctx: Context, plan: Any, padded: tuple[bool, bool], left: Node, right: Node) -> tuple[Any, Members]:
    """The members of a join's rows: one input row of each side's member
    (two grouped sides: every pair, as a new group column); the
    null-padded side of an outer join optional."""
    sides = []
    for side, pad in zip((left, right), padded, strict=True):
        assert side.members is not None
        members = side.members
        if pad:
            members = members.padded()
            ctx.state.facts.optional.update((*side.rows, *members.columns))
        sides.append(members)
    lm, rm = sides
    group, grouped = lm.group or rm.group, lm.grouped or rm.grouped
    if lm.group and rm.group:
        jvm = ctx.jvm
        group, grouped = ctx.state.new_name(), (*lm.grouped, *rm.grouped)
        plan = jvm.plan(
            jvm.frame(plan).select(*[jvm.column(a) for a in jvm.items(plan.output())], product(lm, rm, group))
        )
    return plan, Members((*lm.flat, *rm.flat), group, grouped, (*lm.deferred, *rm.deferred), lm.empty and rm.empty)


def generate(node: Any, children: list[Node], ctx: Context) -> Node:
    """Generate (explode, posexplode, ...): generator outputs <- the
    generator's referenced terms; other columns copy.

    docs/capture-semantics.md, explode / posexplode: "the exploded array cell of r's input
    row; other columns copy".
    """
    jvm = ctx.jvm
    refs = jvm.references(node.generator())
    if node.generator().nodeName() == "PythonUDTF" and refs:  # Spark plans these as a LateralJoin
        raise CaptureError("cannot capture a Python UDTF over input columns outside a lateral join")
    ctx.state.decide(refs, "explode")  # the array decides how many rows
    for attr in jvm.items(node.generatorOutput()):
        ctx.state.derive(jvm.expr_id(attr), refs)
    child = children[0]
    return Node(jvm.with_children(node, [c.plan for c in children]), child.rows, child.hidden, child.members)


def union(node: Any, children: list[Node], ctx: Context) -> Node:
    """Union, positional: every branch projected to the same row-number
    columns (null where a branch has none) and group-join columns.

    docs/capture-semantics.md, union / unionByName: "the corresponding cell of the row it
    came from" (unionByName and the analyzer's widening casts are Projects
    below the Union).
    """
    jvm, state = ctx.jvm, ctx.state
    values = state.facts.values
    originals = [jvm.items(o.output()) for o in jvm.items(node.children())]
    state.facts.merged_one_row([c.members for c in children], "a union")
    for pos, attr in enumerate(originals[0]):  # the union's output keeps the first branch's ids
        branch_attrs = [branch[pos] for branch in originals]
        copied = _union_copy(state, branch_attrs, children)
        state.derive(jvm.expr_id(attr), branch_attrs)
        if copied is not None:
            values[jvm.expr_id(attr)] = copied
    rows = tuple(dict.fromkeys(r for c in children for r in c.rows))
    hidden = tuple(dict.fromkeys(h for c in children for h in c.hidden))
    types = {
        f.name: f.dataType for c in children if c.hidden for f in jvm.frame(c.plan).schema.fields if f.name in hidden
    }
    members, member_columns = _union_members(ctx, children, rows)
    aligned = []
    for attrs, child in zip(originals, children, strict=True):
        aligned.append(
            jvm.plan(
                jvm.frame(child.plan).select(
                    *[jvm.column(a) for a in attrs],
                    *[jvm.col(r) if r in child.rows else _null(r, state.rows[r].scalar) for r in rows],
                    # a group's columns are null on the rows of the other branches
                    *[jvm.col(h) if h in child.hidden else F.lit(None).cast(types[h]).alias(h) for h in hidden],
                    *[column(child) for column in member_columns],
                )
            )
        )
    # The union's output keeps the first branch's attributes: a row column
    # the first branch lacks is its null column above, not the read's.
    for r in rows:
        if r not in children[0].rows:
            state.attributes.pop(r, None)
    return Node(jvm.with_children(node, aligned), rows, hidden, members)


def _union_copy(state: RewriteState, attrs: list[Any], children: list[Node]) -> ColumnRule | None:
    """A union column copied in every branch (or a literal in some): from
    the one input column all copy, or per input table when each branch's
    rows hold only its own source table of them; None: computed."""
    jvm, values = state.jvm, state.facts.values
    sources: dict[int, str] = {}
    own: list[int | None] = []
    for attr in attrs:
        expr_id = jvm.expr_id(attr)
        rule = values.get(expr_id)
        if rule is None and not state.terms.get(expr_id) and not state.deferred.get(expr_id):
            own.append(None)  # a literal: no input cell
            continue
        if (
            rule is None
            or rule.kind != "copy"
            or rule.table is None
            or rule.column is None
            or sources.setdefault(rule.table, rule.column) != rule.column
        ):
            return None
        own.append(rule.table)
    if len(sources) == 1 and None not in own:
        ((table, column),) = sources.items()
        return ColumnRule("copy", table, column)
    for branch_table, child in zip(own, children, strict=True):
        if child.members is None or (child.members.tables & set(sources)) - {branch_table}:
            return None  # a member could hold two of the source tables: which one it copies is unknown
    return ColumnRule("copy", references=tuple(sorted(sources.items()))) if sources else None


def _union_members(
    ctx: Context, children: list[Node], rows: tuple[str, ...]
) -> tuple[Members | None, list[Callable[[Node], Column]]]:
    """The members of a union's rows (its branch row's) and, per member
    column the branches must add, how a branch makes it. Branches whose
    members are all flat keep their slots (null on the other branches' rows);
    otherwise every branch lists its members in one new group column."""
    branches = [c.members for c in children]
    if any(m is None for m in branches):
        return None, []
    known = [m for m in branches if m is not None]
    deferred = tuple(dict.fromkeys(d for m in known for d in m.deferred))
    empty = any(m.empty for m in known)
    flat = tuple(dict.fromkeys(s for m in known for s in m.flat))
    if all(m.group is None for m in known):
        extra = [s.column for s in flat if s.column not in rows]

        def slot_column(name: str) -> Callable[[Node], Column]:
            def make(child: Node) -> Column:
                own = child.members is not None and any(s.column == name for s in child.members.flat)
                return ctx.jvm.col(name) if own else F.lit(None).cast("bigint").alias(name)

            return make

        return Members(flat, None, (), deferred, empty), [slot_column(c) for c in extra]
    slots = tuple(dict.fromkeys(s for m in known for s in (*m.grouped, *m.flat)))
    name = ctx.state.new_name()

    def group_column(child: Node) -> Column:
        assert child.members is not None
        return member_array(child.members, slots).alias(name)

    return Members((), name, slots, deferred, empty), [group_column]


def _null(name: str, scalar: bool) -> Column:
    return F.lit(None).cast(ROWS_TYPE if scalar else ROW_LIST_TYPE).alias(name)


# -- row-merging ------------------------------------------------------------------------
def aggregate(node: Any, children: list[Node], ctx: Context) -> Node:
    """Aggregate: ``terms(e)`` = the union of ``terms(references(e))`` over every row of the
    group; an aggregate function with no references adds the grouping keys'
    references (no keys: every column).

    docs/capture-semantics.md, groupBy(keys).agg: "key column: that key column's cells of
    every row in the group. Aggregate ``f(expr)``: the cells of expr's
    referenced columns of every row in the group. An aggregate that
    references no column (``count(*)``): the group's key cells; with no
    keys, every cell of every row".
    """
    jvm = ctx.jvm
    # Its expressions (grouping, then aggregate) as their trees read: ids, not a round trip an attribute.
    trees = ctx.trees or tuple(jvm.expressions(node))
    split = int(node.groupingExpressions().size())
    grouping, outputs = [t.jvm for t in trees[:split]], trees[split:]
    keys = [i for tree in trees[:split] for i in _reads(tree, jvm)]
    ctx.state.decide_ids(keys, "a grouping")
    if not grouping:
        keys = [jvm.expr_id(a) for a in jvm.items(node.child().output())]
        # Its one row exists even when every input row is deleted (count 0, sums null).
        ctx.state.facts.one_row = True
        ctx.state.facts.opaque(ONE_ROW_REASON)
    grouped, values = [], []
    for tree in outputs:
        kind, expr_id, refs, renamed = _projected(tree, jvm)
        if _aggregate_reads_nothing(tree, jvm):
            refs = refs + keys
        grouped.append((expr_id, refs))
        values.append((expr_id, tree.jvm, refs, bool(tree.kinds & GROUP_AGGREGATES), kind, renamed))
    result = _aggregate(ctx, grouping, [t.jvm for t in outputs], grouped, children[0])
    for value in values:
        _aggregate_value(ctx, *value)
    if not grouping and result.members is not None:
        result = dataclasses.replace(result, members=dataclasses.replace(result.members, one_row=True))
    return result


def _aggregate_value(
    ctx: Context, expr_id: int, expr: Any, refs: list[int], aggregated: bool, kind: str, renamed: int | None
) -> None:
    """The value rule of an Aggregate's output ``expr`` (of ``kind``, reading
    ``refs``, only renaming attribute ``renamed``): a grouping key keeps its
    copy; one aggregate function over an input column is an aggregate
    what-if recomputes; anything else is computed."""
    jvm, facts = ctx.jvm, ctx.state.facts
    if kind == "AttributeReference":
        return  # a grouping key (same expression id): a copy stays one
    if not aggregated:  # a grouping expression, aliased
        facts.propagate(expr_id, refs)
        if renamed is not None and renamed in facts.values:
            facts.values[expr_id] = facts.values[renamed]
        return
    rule = aggregate_rule(expr, facts, jvm.expr_id)
    facts.propagate(expr_id, [])
    facts.row_dependent.add(expr_id)  # its value follows the members that are left
    if rule is not None:
        facts.values[expr_id] = rule


def distinct(node: Any, children: list[Node], ctx: Context) -> Node:
    """Distinct: every column is a key.

    docs/capture-semantics.md, distinct: "the same column's cells of all input rows merged
    into r".
    """
    jvm = ctx.jvm
    attrs = jvm.items(node.child().output())
    attr_ids = [jvm.expr_id(a) for a in attrs]  # once: each is a py4j round trip
    ctx.state.decide_ids(attr_ids, "distinct")
    return _aggregate(ctx, attrs, attrs, [(i, [i]) for i in attr_ids], children[0])


def deduplicate(node: Any, children: list[Node], ctx: Context) -> Node:
    """Deduplicate (``distinct``, ``dropDuplicates(subset)``): keys as an
    aggregate; other columns from the kept row (``first`` of the row
    numbers, evaluated in lock-step with ``first`` of the values).

    docs/capture-semantics.md, distinct / dropDuplicates(subset): "the same column's cells of
    all input rows merged into r (for columns outside ``subset``: the kept
    row's cell)".
    """
    jvm = ctx.jvm
    keys = jvm.items(node.keys())
    key_ids = [jvm.expr_id(k) for k in keys]  # once: each is a py4j round trip
    ctx.state.decide_ids(key_ids, "distinct")
    outputs, grouped, kept = [], [], []
    for attr in jvm.items(node.child().output()):
        attr_id = jvm.expr_id(attr)
        if attr_id in key_ids:
            outputs.append(attr)
            grouped.append((attr_id, [attr_id]))
        else:
            outputs.append(jvm.alias_as(jvm.expression(F.first(jvm.column(attr))), attr))
            kept.append(attr)
    result = _aggregate(ctx, keys, outputs, grouped, children[0], kept)
    for attr in kept:  # the kept row's value: another member's when that row goes
        expr_id = jvm.expr_id(attr)
        ctx.state.facts.propagate(expr_id, [])
        ctx.state.facts.row_dependent.add(expr_id)
    return result


def _aggregate(
    ctx: Context,
    grouping: list[Any],
    outputs: list[Any],
    grouped: list[tuple[int, list[int]]],
    child: Node,
    kept: Sequence[Any] = (),
) -> Node:
    """An Aggregate of ``outputs`` over ``child``. The attribute ``expr_id``
    of each ``grouped`` entry depends on its references (ids) in every row of
    the group (a group join when allowed, else lists of row numbers);
    ``kept`` attributes come from one kept row of the group."""
    jvm, state = ctx.jvm, ctx.state
    for _, refs in grouped:
        state.check_not_deferred_ids(refs)
    state.facts.merged_one_row([child.members], "a grouping")
    if child.members is not None and child.members.empty:
        state.facts.opaque("rows built inside the step (range, createDataFrame) merged with input rows")
    extra: list[Column] = []
    rows: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    members: Members | None = None
    # Spark plans a pandas aggregate UDF only beside other pandas aggregate
    # UDFs: no list can be collected in the same aggregate.
    pandas_aggregate = "PythonUDAF" in ctx.expressions
    if groupjoin.may_defer(ctx, grouping, child, keyed=pandas_aggregate):
        hidden, extra, members = groupjoin.defer(ctx, grouping, grouped, child)
    elif pandas_aggregate:
        raise CaptureError(
            "cannot capture a pandas aggregate UDF here: its input rows cannot be recomputed exactly "
            "(a limit, sample, window or aggregate below it, or a row-merging operation above it "
            "in the step); move it to a step of its own"
        )
    else:
        lists: dict[str, str] = {}
        # Terms are set after relisting every entry: a grouping key keeps its input's id.
        new = {expr_id: state.relisted(state.terms_of_ids(refs), lists, child.injective) for expr_id, refs in grouped}
        state.terms.update(new)
        state.deferred.update({expr_id: frozenset() for expr_id in new})
        extra += [jvm.collect_list(r, not state.rows[r].scalar).alias(name) for r, name in lists.items()]
        rows = tuple(lists.values())
        if child.members is not None:
            members, column = collected(child.members, lists, state.new_name(), jvm)
            extra += [column] if column is not None else []
            state.member_fields.update(member_fields(child.members, members, lists, state.member_fields))
    rows += _kept_rows(ctx, kept, extra)
    named = [*outputs, *[jvm.expression(c) for c in extra]]
    return Node(jvm.plan(jvm.frame(jvm.aggregate(grouping, named, child.plan))), rows, hidden, members)


def _kept_rows(ctx: Context, kept: Sequence[Any], columns: list[Column]) -> tuple[str, ...]:
    """Row numbers of the row a Deduplicate keeps: ``first`` of each, which
    advances in lock-step with ``first`` of the values in one aggregate."""
    state = ctx.state
    firsts: dict[str, str] = {}
    for attr in kept:
        expr_id, terms = ctx.jvm.expr_id(attr), set()
        for term in state.terms.get(expr_id, frozenset()):
            if term.rows not in firsts:
                firsts[term.rows] = state.new_rows(state.rows[term.rows])
                if term.rows in state.facts.optional:
                    state.facts.optional.add(firsts[term.rows])
                columns.append(F.first(ctx.jvm.col(term.rows)).alias(firsts[term.rows]))
            terms.add(Term(firsts[term.rows], term.scalar, term.base))
        state.terms[expr_id] = frozenset(terms)
    return tuple(firsts.values())


def window(node: Any, children: list[Node], ctx: Context) -> Node:
    """Window: ``collect_list`` of the referenced row numbers over the same
    window spec and frame (rank-like functions: the order-by cells).

    docs/capture-semantics.md, window functions: "the referenced columns' cells of the rows
    in r's window frame (rank-like functions: the order-by cells of those
    rows)".
    """
    jvm, state = ctx.jvm, ctx.state
    child = children[0]
    window_exprs = jvm.items(node.windowExpressions())
    # A window value changes when its frame loses a row, which the records do not say.
    if child.members is not None:
        state.facts.opaque_inputs.update(child.members.tables)
    for alias in window_exprs:
        state.facts.propagate(jvm.expr_id(alias.toAttribute()), [])
        state.facts.row_dependent.add(jvm.expr_id(alias.toAttribute()))
    raw: list[Any] = []
    lists: list[tuple[str, str, bool]] = []  # (raw window column, list column, collects arrays)
    for alias in window_exprs:
        wexpr = alias.child()
        if wexpr.nodeName() != "WindowExpression":
            raise CaptureError(f"cannot capture window expression {alias.toString()}")
        func, spec = wexpr.windowFunction(), wexpr.windowSpec()
        refs = (
            [a for o in jvm.items(spec.orderSpec()) for a in jvm.references(o)]
            if func.nodeName() in RANK_LIKE
            else jvm.references(func)
        )
        state.check_not_deferred(refs)
        mine: dict[str, str] = {}
        state.terms[jvm.expr_id(alias.toAttribute())] = state.relisted(state.terms_of(refs), mine, child.injective)
        for source, name in mine.items():
            windowed = jvm.window_expression(jvm.expression(F.collect_list(source)), spec)
            raw.append(jvm.expression(jvm.column(windowed).alias(f"{RAW_PREFIX}{name}")))
            lists.append((f"{RAW_PREFIX}{name}", name, not state.rows[source].scalar))
    # The lists in a Window of their own below the user's (same partitioning,
    # ordering and frames, so no extra shuffle): Spark does not mix pandas
    # window UDFs with other window functions in one node.
    below = (
        node.copy(jvm.seq(raw), node.partitionSpec(), node.orderSpec(), child.plan, node.hint()) if raw else child.plan
    )
    windowed_plan = jvm.plan(
        jvm.frame(node.copy(jvm.seq(window_exprs), node.partitionSpec(), node.orderSpec(), below, node.hint()))
    )
    kept = [a for a in jvm.items(windowed_plan.output()) if not a.name().startswith(RAW_PREFIX)]
    finals = [(F.flatten(jvm.col(r)) if arrays else jvm.col(r)).alias(name) for r, name, arrays in lists]
    plan = jvm.plan(jvm.frame(windowed_plan).select(*[jvm.column(a) for a in kept], *finals))
    return Node(plan, child.rows + tuple(name for _, name, _ in lists), child.hidden, child.members)


# -- black boxes --------------------------------------------------------------------------
def apply_in_pandas(node: Any, children: list[Node], ctx: Context) -> Node:
    """FlatMapGroupsInPandas (``groupBy().applyInPandas``): every output cell
    of a group depends on every cell of the group the function received.

    docs/capture-semantics.md, applyInPandas / mapInPandas / RDD lambdas (black box): "every
    input cell of the group / record the function received, at the finest
    granularity the engine exposes".
    """

    def rebuilt(function: Any, output: Any, child: Any) -> Any:
        return node.copy(node.groupingAttributes(), function, output, child)

    return _black_box(
        node, children[0], ctx, rebuilt, lambda f, carried: functools.partial(group_function, f, takes_key(f), carried)
    )


def map_in_pandas(node: Any, children: list[Node], ctx: Context) -> Node:
    """MapInPandas: every output cell of a batch depends on every cell of the
    partition's batches the function had read.

    docs/capture-semantics.md, applyInPandas / mapInPandas / RDD lambdas (black box): "every
    input cell of the group / record the function received, at the finest
    granularity the engine exposes".
    """

    def rebuilt(function: Any, output: Any, child: Any) -> Any:
        return node.copy(function, output, child, node.isBarrier(), node.profile())

    return _black_box(
        node, children[0], ctx, rebuilt, lambda f, carried: functools.partial(partition_function, f, carried)
    )


def _black_box(
    node: Any,
    child: Node,
    ctx: Context,
    rebuilt: Callable[[Any, Any, Any], Any],
    wrap: Callable[[Callable[..., Any], Carried], Callable[..., Any]],
) -> Node:
    """A group/partition function node whose function is wrapped to carry
    the row numbers it receives (:mod:`.blackbox`): each output cell
    depends on every cell the function received."""
    jvm, state = ctx.jvm, ctx.state
    function_kind = NODE_KINDS[node.nodeName()].wrapped
    if function_kind is None:
        raise CaptureError(f"internal: plan node {node.nodeName()} has no wrapped function")
    operation, eval_type = function_kind
    udf = node.functionExpr()
    if udf.evalType() != eval_type:
        raise CaptureError(
            f"cannot capture {operation} with this kind of function (PySpark eval type "
            f"{udf.evalType()}); pass a function of pandas DataFrames"
        )
    func, schema = jvm.python_function(udf, operation)
    args = jvm.references(udf)
    state.check_not_deferred(args)
    lists: dict[str, str] = {}
    terms = state.relisted(state.terms_of(args), lists, child.injective)
    carried = Carried(
        tuple(lists), tuple(state.rows[r].scalar for r in lists), tuple(lists.values()), tuple(schema.fieldNames())
    )
    returned = StructType([*schema.fields, *[StructField(name, ArrayType(LongType())) for name in lists.values()]])
    wrapped: Callable[..., Column] = pandas_udf(  # type: ignore[call-overload]  # stubs overload on Literal eval types; this one is chosen per node
        wrap(func, carried), returnType=returned, functionType=eval_type
    )
    function = jvm.expression(wrapped(*[jvm.column(a) for a in args], *[jvm.col(r) for r in lists]))
    outputs = jvm.items(node.output())
    state.facts.opaque(operation)  # which rows the function returns is its own business
    for attr in outputs:
        state.terms[jvm.expr_id(attr)] = terms
        state.facts.propagate(jvm.expr_id(attr), [])
        state.facts.row_dependent.add(jvm.expr_id(attr))
    # Fresh attributes for the lists: a projection's outputs, typed as the wrapper returns them.
    extra = jvm.items(
        jvm.plan(
            jvm.frame(child.plan).select(*[F.lit(None).cast(ROW_LIST_TYPE).alias(name) for name in lists.values()])
        ).output()
    )
    plan = jvm.plan(jvm.frame(rebuilt(function, jvm.seq([*outputs, *extra]), child.plan)))
    return Node(plan, tuple(lists.values()), (), None)


# -- the table --------------------------------------------------------------------------
def _kinds(*kinds: NodeKind) -> dict[str, NodeKind]:
    return {kind.name: kind for kind in kinds}


def _copy(name: str, **facts: Any) -> NodeKind:
    return NodeKind(name, copy, **{"fewer_rows": True, **facts})


def _wrapped(name: str, rule: Rule, operation: str, eval_type: int) -> NodeKind:
    return NodeKind(name, rule, wrapped=(operation, eval_type), merging=True, unstable=True)


def _refused(name: str, operation: str) -> NodeKind:
    return NodeKind(name, refused=operation)


NODE_KINDS: dict[str, NodeKind] = _kinds(
    # Leaves.
    NodeKind("LogicalRelation", table_read, table_leaf=True, injective=True),
    NodeKind("DataSourceV2Relation", table_read, table_leaf=True, injective=True),  # readback.StoreRowsSource
    NodeKind("Relation", table_read, table_leaf=True, injective=True),
    NodeKind("LocalRelation", constant, injective=True),
    NodeKind("Range", constant, injective=True),
    NodeKind("OneRowRelation", constant, injective=True),
    # Copies: the child's output, row for row or a subset / reordering.
    _copy("Filter", injective=True),
    _copy("Sort", injective=True),
    _copy("GlobalLimit", opaque="limit", unstable=True),
    _copy("LocalLimit", opaque="limit", unstable=True),
    _copy("Offset", opaque="offset", unstable=True),
    _copy("Tail", opaque="tail", unstable=True),
    _copy("Sample", opaque="sample", unstable=True, fewer_rows=False),  # with replacement: more rows
    _copy("Repartition", injective=True),
    _copy("RepartitionByExpression", injective=True),
    _copy("RebalancePartitions", injective=True),
    _copy("ResolvedHint", injective=True),
    _copy("SubqueryAlias", injective=True, aligned=True),
    _copy("View", injective=True),
    _copy("Subquery", injective=True),
    # Row-wise and combining nodes.
    NodeKind("Project", project, injective=True, aligned=True, fewer_rows=True),
    NodeKind("Join", join),
    NodeKind("Generate", generate),
    NodeKind("LateralJoin", lateral_join, merging=True, unstable=True),
    NodeKind("Union", union),
    # Nodes that merge rows.
    NodeKind("Aggregate", aggregate, merging=True, unstable=True, fewer_rows=True),
    NodeKind("Distinct", distinct, merging=True, fewer_rows=True),
    NodeKind("Deduplicate", deduplicate, merging=True, unstable=True, fewer_rows=True),
    NodeKind("Window", window, merging=True, unstable=True, fewer_rows=True),
    _wrapped("FlatMapGroupsInPandas", apply_in_pandas, "applyInPandas", PythonEvalType.SQL_GROUPED_MAP_PANDAS_UDF),
    _wrapped("MapInPandas", map_in_pandas, "mapInPandas", PythonEvalType.SQL_MAP_PANDAS_ITER_UDF),
    # Black boxes that cannot be captured exactly.
    _refused("FlatMapCoGroupsInPandas", "cogroup().applyInPandas"),
    _refused("MapInArrow", "mapInArrow"),
    _refused("FlatMapGroupsInArrow", "applyInArrow"),
    _refused("FlatMapGroupsInPandasWithState", "applyInPandasWithState"),
    _refused("LogicalRDD", "an RDD (rdd.map / toDF / checkpoint)"),
    _refused("ExternalRDD", "an RDD (rdd.map / toDF)"),
    _refused("MapPartitions", "mapPartitions"),
    _refused("MapElements", "map"),
    _refused("SerializeFromObject", "an RDD/Dataset lambda"),
    _refused("DeserializeToObject", "an RDD/Dataset lambda"),
    _refused("Expand", "rollup/cube/grouping sets"),
)

# The node sets the rewrite reads (:mod:`.rewrite`), derived from the table.
MERGING_NODES = frozenset(k.name for k in NODE_KINDS.values() if k.merging)
UNSTABLE_NODES = frozenset(k.name for k in NODE_KINDS.values() if k.unstable)
INJECTIVE_NODES = frozenset(k.name for k in NODE_KINDS.values() if k.injective)
FEWER_ROWS_NODES = frozenset(k.name for k in NODE_KINDS.values() if k.fewer_rows)


def is_table_leaf(name: str) -> bool:
    """Plan node ``name`` is a stored table of the run."""
    kind = NODE_KINDS.get(name)
    return kind is not None and kind.table_leaf


def _refuse_rdd(node: Any, jvm: Catalyst) -> None:
    """A LogicalRDD with the reason capture refuses it (driver rows, or a
    DataFrame's rows through Python RDD functions); other LogicalRDDs
    (checkpoints, ...) are refused by their NodeKind."""
    if jvm.built_in_driver(node):
        raise CaptureError(
            "cannot capture a DataFrame built in the driver (createDataFrame / parallelize / "
            "spark.read.json of parallelized strings, plan node LogicalRDD) that is not a registered "
            "source: pass it through run.source(df, name)"
        )
    if jvm.rdd_of_frames(node):
        # An RDD function sees whole rows with no identity: which input row an
        # output element came from is known only inside the user's function.
        raise CaptureError(
            "cannot capture a DataFrame made by Python RDD functions from another DataFrame's rows "
            "(df.rdd.map(...).toDF(), spark.read.json(df.rdd...), plan node LogicalRDD) exactly: "
            "which input row each element came from is not recorded; express the step with DataFrame "
            "operations, a UDF or mapInPandas"
        )


def rule_for(node: Any, jvm: Catalyst) -> Rule:
    """The rule of plan node ``node``; CaptureError for a node whose
    provenance cannot be captured exactly."""
    name = jvm.node_name(node)
    if name == "LogicalRDD":
        _refuse_rdd(node, jvm)
    kind = NODE_KINDS.get(name)
    if kind is not None and kind.refused is not None:
        raise CaptureError(
            f"cannot capture {kind.refused} (plan node {name}) exactly; "
            "express the step with DataFrame operations or UDFs"
        )
    rule = kind.rule if kind is not None else None
    if rule is None:
        raise CaptureError(f"cannot capture the Spark operation {name}: no provenance rule for it")
    return rule
