"""Provenance rewriting of a step output's logical plan: the traversal.

Given the DataFrame a step returned, :class:`PlanRewriter` walks its analyzed
logical plan bottom-up and rebuilds it so that its rows carry the **row
numbers** of the step-input rows they were derived from, in a few extra
columns (``__pv_<n>``), while *which* input columns each output column
depends on is worked out statically, in Python (docs/capture-semantics.md), node by node by
the rules of :mod:`.rules`. The provenance of an output cell is a set of
:class:`~.writer.Term` s: "the ids ``base + r`` for each row number ``r``
that row-number column ``__pv_<n>`` holds in this row", where ``base`` is the
value id of row 0 of one input column. So a step over a 19-column table
carries ONE row number per row, not 19 value ids, and an aggregate collects
one list of member row numbers per input table, not one per column;
:mod:`.writer` expands terms into triples with NumPy. This is
Perm/GProM-style provenance rewriting: the original Catalyst nodes and
expressions are reused as they are (wrapped back into Columns), so Spark's
own semantics compute the data, and only row-number columns are added.

Each rewrite has its own :class:`~.state.RewriteState`; what the traversal
learns about a node on the way (whether a row-merging node lies above it,
whether its rows are stable and come from distinct input rows) goes to the
rule in a :class:`~.state.Context` or on the returned :class:`~.state.Node`.
Aggregates may defer their provenance to a group join (:mod:`.groupjoin`);
a step whose output column would mix deferred and per-row provenance is
rewritten again without them.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from provplug.errors import CaptureError
from provplug.rowrules import OpRowRules

from . import groupjoin, rules
from ._jvm import Catalyst, Expression, PlanTree, kinds_of
from .rowlineage import MemberLayout, Members, enabled
from .sources import TableLeaf, Tables
from .state import HIDDEN_PREFIX, PROV_PREFIX, Context, GroupJoin, Node, NodeMemo, RewriteState, TableRead
from .terms import Term
from .writer import Cell


@dataclasses.dataclass
class Rewritten:
    """The row-number-carrying DataFrame of a step output and what it used."""

    frame: DataFrame  # the output's columns, the row-number columns ``cells`` use, then the hidden columns
    cells: list[Cell]  # per-row provenance of the output columns (columns without any are left out)
    groups: list[GroupJoin]  # deferred provenance: the output's cells that each group join fills in
    hidden: list[str]
    inputs: set[int]
    operations: list[str]
    uses_udf: bool
    members: MemberLayout | None = None  # how the frame's rows hold their members (None: unknown)
    row_rules: OpRowRules | None = None  # the op's row rules, op and table ids still 0

    def rules_for(self, op_id: int, table_id: int) -> OpRowRules | None:
        """The op's row rules for this output (None: row lineage is off)."""
        return dataclasses.replace(self.row_rules, op=op_id, out_table=table_id) if self.row_rules else None


class PlanRewriter:
    """Rewrites step outputs over the tables of one capture run."""

    def __init__(self, spark: SparkSession) -> None:
        self.jvm = Catalyst(spark)
        self.tables = Tables()
        self.group_joins = groupjoin.mode(spark)
        self.list_bytes = groupjoin.list_bytes(spark)
        self.row_lineage = enabled(spark)
        self._names: Iterator[int] = itertools.count()  # row-number column numbers, unique in the run
        self._reads = NodeMemo[TableRead]()  # table leaves rewritten so far (rules.table_read)
        self._over_leaves = NodeMemo[tuple[bool, list[Expression]]]()  # see _over_leaves

    def register(self, leaf: TableLeaf) -> None:
        """A table of the run that later steps may read."""
        self.tables.register(leaf)

    def rewrite(self, frame: DataFrame) -> Rewritten:
        plan = self.jvm.inlined(self.jvm.plan(frame))
        out_attrs = self.jvm.items(plan.output())
        names = [a.name() for a in out_attrs]
        if len(set(names)) != len(names):
            raise CaptureError(f"a step output has duplicate column names {names}: rename them before returning")
        if any(n.startswith((PROV_PREFIX, HIDDEN_PREFIX)) for n in names):
            raise CaptureError(
                f"a step output has a column named {PROV_PREFIX}* or {HIDDEN_PREFIX}*, which provplug reserves"
            )
        tree = self.jvm.tree(plan)
        result = self._rewrite_output(tree, out_attrs, allow_groups=True)
        if result is None:  # a column (or a row's members) would mix group-join and per-row provenance
            result = self._rewrite_output(tree, out_attrs, allow_groups=False)
        assert result is not None
        return result

    def _rewrite_output(self, tree: PlanTree, out_attrs: list[Any], allow_groups: bool) -> Rewritten | None:
        """One rewrite of the plan ``tree``; None when an output column would mix
        group-join and per-row provenance (or two group joins')."""
        jvm = self.jvm
        state = RewriteState(
            jvm,
            self.tables,
            self.group_joins,
            allow_groups,
            self._names,
            self.row_lineage,
            self._reads,
            self._over_leaves,
            self.list_bytes,
        )
        node = _walk(state, tree, merging_above=False)
        cells: list[Cell] = []
        deferred: dict[int, list[Cell]] = {}
        for j, attr in enumerate(out_attrs):
            expr_id = jvm.expr_id(attr)
            terms, parts = state.terms.get(expr_id, frozenset()), state.deferred.get(expr_id, frozenset())
            groups = {g for g, _ in parts}
            if len(groups) > 1 or (groups and terms):
                return None
            if terms:
                cells.append(state.cell(j, terms))
            if groups:
                deferred.setdefault(groups.pop(), []).append(state.cell(j, frozenset(t for _, t in parts)))
        members = node.members
        if members is not None and members.deferred and (members.group or len({d.group for d in members.deferred}) > 1):
            return None  # a row's members from a group join and a list (or two group joins)
        if members is not None and members.group is not None:
            cells = [_read_from_members(c, members.group, state) for c in cells]
        used = sorted({t.rows for c in cells for t in c.terms})
        carried = [c for c in dict.fromkeys((*node.hidden, *(members.columns if members else ()))) if c not in used]
        # One Project and one analysis of the whole rewritten plan (a select
        # over a DataFrame of it would analyse it twice).
        result = jvm.selection(out_attrs, [*used, *carried], node.plan)
        joined = {d.group: d.optional for d in members.deferred} if members else {}
        group_joins = [
            dataclasses.replace(
                g,
                cells=tuple(deferred.get(n, ())),
                member=(
                    dataclasses.replace(g.member, optional=joined[n]) if g.member is not None and n in joined else None
                ),
            )
            for n, g in enumerate(state.groups)
        ]
        layout = _member_layout(members, state)
        return Rewritten(
            result,
            cells,
            group_joins,
            list(node.hidden),
            state.inputs,
            state.operations,
            state.uses_udf,
            layout,
            _row_rules(state, out_attrs) if self.row_lineage else None,
        )


def _read_from_members(cell: Cell, group: str, state: RewriteState) -> Cell:
    """``cell`` with each list that is a field of the output's member list
    ``group`` read from there (rowlineage.MemberField): the lists are then
    not selected, and Spark prunes them from the aggregates."""
    terms, dedupe = [], cell.dedupe
    for term in cell.terms:
        found = state.member_fields.get(term.rows)
        if found is None or found.group != group:
            terms.append(term)
            continue
        terms.append(Term(group, False, term.base, found.field))
        dedupe = dedupe or not found.exact
    unique = tuple(dict.fromkeys(terms))
    return Cell(cell.column, unique, dedupe or len(unique) != len(terms))


def _member_layout(members: Members | None, state: RewriteState) -> MemberLayout | None:
    if members is None:
        return None
    markers = tuple(state.groups[d.group].marker for d in members.deferred)
    return MemberLayout(members.flat, members.group, members.grouped, markers)


def _row_rules(state: RewriteState, out_attrs: list[Any]) -> OpRowRules:
    """The op's row rules for this output (op and table ids filled in by the session)."""
    facts, jvm = state.facts, state.jvm
    columns = {}
    for attr in out_attrs:
        expr_id = jvm.expr_id(attr)
        terms = set(state.terms.get(expr_id, frozenset())) | {t for _, t in state.deferred.get(expr_id, frozenset())}
        columns[attr.name()] = facts.column_rule(expr_id, terms)
    return OpRowRules(
        0,
        0,
        facts.existence,  # type: ignore[arg-type]
        columns,
        {t: tuple(sorted(cols)) for t, cols in sorted(facts.deciding.items())},
        tuple(sorted(facts.opaque_inputs)),
        facts.reason,
    )


def _walk(state: RewriteState, tree: PlanTree, merging_above: bool) -> Node:
    """Rewrite ``tree``'s node after its children (bottom-up) with its rule."""
    jvm, node = state.jvm, tree.node
    name = jvm.node_name(node)
    below_merging = merging_above or name in rules.MERGING_NODES
    child_nodes = [c.node for c in tree.children]
    children = [_walk(state, c, below_merging) for c in tree.children]
    table_read = rules.is_table_read(node, jvm)
    # A table read (or provplug's column selection on it) has only attributes:
    # skip the expression walks, each a series of py4j round trips. A plan
    # node is deterministic when its expressions and its children are: a
    # nondeterministic child makes the node unstable through the child anyway.
    trees: list[Expression]
    if table_read:
        deterministic, trees = True, []
    elif child_nodes and all(rules.is_table_leaf(jvm.node_name(c)) for c in child_nodes):
        deterministic, trees = _over_leaves(state, node)
    else:
        deterministic, trees = node.deterministic(), jvm.expressions(node)
    injective = name in rules.INJECTIVE_NODES and all(c.injective for c in children)
    expressions = kinds_of(trees)
    rules.check_expressions(expressions, name)
    if expressions & rules.UDF_EXPRESSIONS:
        state.uses_udf = True
    if not table_read and name not in state.operations:
        state.operations.append(name)
    stable = (
        deterministic
        and name not in rules.UNSTABLE_NODES
        and not expressions & rules.PER_QUERY_EXPRESSIONS
        and all(c.stable for c in children)
    )
    rule = rules.rule_for(node, jvm)
    new = rule(node, children, Context(state, merging_above, expressions, tuple(trees)))
    return dataclasses.replace(new, stable=stable, injective=injective, max_rows=_row_bound(name, children, new))


def _row_bound(name: str, children: list[Node], new: Node) -> int | None:
    """At most how many rows the node has, from its children's bounds (a
    table read's is its stored row count); None when unknown."""
    bounds = [c.max_rows for c in children]
    if new.max_rows is not None or not children or None in bounds:
        return new.max_rows
    known = [b for b in bounds if b is not None]  # (all of them)
    if name == "Join":  # matched pairs, or an outer join's unmatched rows
        left, right = known
        return left * right + left + right
    if name == "Union":
        return sum(known)
    return known[0] if name in rules.FEWER_ROWS_NODES else None


def _over_leaves(state: RewriteState, node: Any) -> tuple[bool, list[Expression]]:
    """Whether a node over table leaves is deterministic, and its
    expressions: as an earlier rewrite of the run found them when it met the
    same node (a stand-in for a table a later step reads again, :mod:`.scripts`),
    else asked of the JVM. A stand-in's expressions are one per column."""
    key = str(node.toString())
    known = state.over_leaves.get(key, node)
    if known is None:
        known = bool(node.deterministic()), state.jvm.expressions(node)
        state.over_leaves.put(key, node, known)
    return known
