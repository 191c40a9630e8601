"""What a step's output may derive from, column by column, when its rows
cannot be traced exactly (a coarse step: docs/capture-semantics.md).

The walk reads the analyzed plan bottom-up and gives every attribute the set
of *stored columns* (table id, column index) its values may come from:

* a leaf that reads a table of the run gives each of its columns itself;
* a Project or an Aggregate output defined by an expression depends on the
  columns the expression reads; an attribute a node passes through keeps its
  child's set;
* every node that decides WHICH rows there are (a filter's condition, join
  keys, grouping keys, sort and partitioning expressions, subqueries) adds
  the columns it reads to every output of that node (OpenLineage calls
  these *indirect* dependencies);
* a node this walk does not know (a Python UDTF, a cogroup, ...) makes each
  of its outputs depend on every column below it;
* a leaf that is not a table of the run hides what it reads: a DataFrame
  built from an RDD of an earlier DataFrame may read ANY table the run has
  stored so far, so its columns depend on all of them.

Every set is a superset of the true dependency: what is certain is that no
other column contributes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from provplug.model import CoarseEdge

from ._jvm import Catalyst
from .readback import read_back_paths
from .sources import Tables

Column = tuple[int, int]  # (table id, column index)
Deps = frozenset[Column]

# Nodes whose output attributes that appear in a child's output hold that
# child's values unchanged (rows may be dropped, reordered or repeated).
PASS_THROUGH = frozenset(
    {
        "Project",
        "Filter",
        "Join",
        "Sort",
        "GlobalLimit",
        "LocalLimit",
        "Limit",
        "Offset",
        "Tail",
        "Distinct",
        "Deduplicate",
        "DeduplicateWithinWatermark",
        "SubqueryAlias",
        "Repartition",
        "RepartitionByExpression",
        "RebalancePartitions",
        "Sample",
        "Aggregate",
        "Window",
        "ResolvedHint",
        "View",
        "WithCTE",
        "CTERelationRef",
        "Intersect",
        "Except",
    }
)
# Expressions over a plan of their own (``expr.plan()``).
SUBQUERIES = frozenset(
    {"ScalarSubquery", "Exists", "ListQuery", "LateralSubquery", "FunctionTableSubqueryArgumentExpression"}
)
# Nodes whose expressions choose rows only: they add indirect dependencies.
NO_INDIRECT = frozenset({"Project", "SubqueryAlias", "View", "ResolvedHint"})


@dataclasses.dataclass(frozen=True)
class CoarseInputs:
    """What each output column of a coarse step may derive from."""

    columns: tuple[Deps, ...]  # per output column
    hidden_inputs: bool  # a leaf hides which of the run's tables it reads (every one is assumed)


class _Walk:
    def __init__(self, jvm: Catalyst, table_of: Callable[[Any], tuple[int, tuple[str, ...]] | None], every: Deps):
        self.jvm = jvm
        self.table_of = table_of
        self.every = every  # every stored column of the run so far: what a hidden read may read
        self.hidden = False

    def attrs(self, node: Any) -> dict[int, Deps]:
        children = self.jvm.items(node.children())
        if not children:
            return self._leaf(node)
        walked = [self.attrs(child) for child in children]  # each child once
        below: dict[int, Deps] = {}
        for child_attrs in walked:
            below.update(child_attrs)
        everything: Deps = frozenset().union(*below.values()) if below else frozenset()
        name = node.nodeName()
        indirect = self._indirect(node, below, everything) if name not in NO_INDIRECT else frozenset()
        if name == "Union":
            return self._union(node, children, walked, indirect)
        defined = self._aliases(node, below, everything) if name in PASS_THROUGH else {}
        out: dict[int, Deps] = {}
        for attr in self.jvm.items(node.output()):
            key = self.jvm.expr_id(attr)
            if name in PASS_THROUGH and key in below:
                out[key] = below[key] | indirect
            elif key in defined:
                out[key] = defined[key] | indirect
            else:  # a node this walk cannot see through
                out[key] = everything | indirect
        return out

    def _leaf(self, leaf: Any) -> dict[int, Deps]:
        attrs = self.jvm.items(leaf.output())
        found = self.table_of(leaf)
        if found is None:
            if leaf.nodeName() in ("LocalRelation", "OneRowRelation", "Range"):  # literal rows: no input
                return {self.jvm.expr_id(a): frozenset() for a in attrs}
            self.hidden = True
            return {self.jvm.expr_id(a): self.every for a in attrs}
        table_id, columns = found
        index = {c: i for i, c in enumerate(columns)}
        return {
            self.jvm.expr_id(a): frozenset({(table_id, index[a.name()])}) if a.name() in index else frozenset()
            for a in attrs
        }

    def _aliases(self, node: Any, below: Mapping[int, Deps], everything: Deps) -> dict[int, Deps]:
        """The attributes an Alias in the node's expressions defines, with
        the columns its expression reads."""
        defined: dict[int, Deps] = {}
        for top in self.jvm.items(node.expressions()):
            for expr in self.jvm.walk_expressions(top):
                if expr.nodeName() == "Alias":
                    defined[self.jvm.expr_id(expr)] = self._read_by(expr, below, everything)
        return defined

    def _indirect(self, node: Any, below: Mapping[int, Deps], everything: Deps) -> Deps:
        """The columns a node's row-choosing expressions read."""
        if node.nodeName() == "Aggregate":
            expressions = self.jvm.items(node.groupingExpressions())
        else:
            expressions = self.jvm.items(node.expressions())
        read: set[Column] = set()
        for expr in expressions:
            read |= self._read_by(expr, below, everything)
        return frozenset(read)

    def _read_by(self, expr: Any, below: Mapping[int, Deps], everything: Deps) -> Deps:
        read: set[Column] = set()
        for attr in self.jvm.references(expr):
            read |= below.get(self.jvm.expr_id(attr), everything)  # an outer reference: anything below
        for sub in self.jvm.walk_expressions(expr):
            if _is_subquery(sub):
                for deps in self.attrs(sub.plan()).values():
                    read |= deps
        return frozenset(read)

    def _union(self, node: Any, children: list[Any], walked: list[dict[int, Deps]], indirect: Deps) -> dict[int, Deps]:
        """A union's column i holds column i of every child (``walked``: each child's attributes)."""
        per_child = [
            [deps[self.jvm.expr_id(a)] for a in self.jvm.items(c.output())]
            for c, deps in zip(children, walked, strict=True)
        ]
        out: dict[int, Deps] = {}
        for i, attr in enumerate(self.jvm.items(node.output())):
            out[self.jvm.expr_id(attr)] = frozenset().union(*(cols[i] for cols in per_child)) | indirect
        return out


def _is_subquery(expr: Any) -> bool:
    """A scalar subquery, IN (subquery), EXISTS, ...: an expression over a plan of its own."""
    return bool(expr.nodeName() in SUBQUERIES)


def coarse_inputs(jvm: Catalyst, tables: Tables, plan: Any, stored: Mapping[int, tuple[str, ...]]) -> CoarseInputs:
    """What each output column of ``plan`` may derive from, among the
    ``stored`` tables of the run (table id -> columns)."""

    def table_of(leaf: Any) -> tuple[int, tuple[str, ...]] | None:
        read_back = read_back_paths(leaf)
        if leaf.nodeName() != "LogicalRelation" and read_back is None:
            return None
        try:
            paths = read_back or [str(p) for p in jvm.items(leaf.relation().location().rootPaths())]
            found = tables.read_by(paths)
        except Exception:  # py4j: not a file relation; CaptureError: not a table of the run
            return None
        return found.table_id, found.columns

    every = frozenset((t, c) for t, columns in stored.items() for c in range(len(columns)))
    walk = _Walk(jvm, table_of, every)
    attrs = walk.attrs(plan)
    return CoarseInputs(tuple(attrs[jvm.expr_id(a)] for a in jvm.items(plan.output())), walk.hidden)


def every_column(tables: Mapping[int, tuple[str, ...]], outputs: int) -> CoarseInputs:
    """Every output column on every column of ``tables`` (table id -> columns)."""
    deps = frozenset((t, c) for t, columns in tables.items() for c in range(len(columns)))
    return CoarseInputs(tuple(deps for _ in range(outputs)), False)


def coarse_edges(op_id: int, dst_table: int, inputs: CoarseInputs, reason: str) -> list[CoarseEdge]:
    """One edge per input table: output column j on the columns of that table it may derive from."""
    by_table: dict[int, dict[int, set[int]]] = {}
    for out, deps in enumerate(inputs.columns):
        for table, column in deps:
            by_table.setdefault(table, {}).setdefault(out, set()).add(column)
    return [
        CoarseEdge(op_id, table, dst_table, reason, _mapping(columns.items()))
        for table, columns in sorted(by_table.items())
    ]


def _mapping(columns: Iterable[tuple[int, set[int]]]) -> tuple[tuple[int, tuple[int, ...]], ...]:
    return tuple((out, tuple(sorted(ins))) for out, ins in sorted(columns))
