"""Provenance rewriting of a Spark logical plan: the ONLY module that touches
py4j / Catalyst internals.

Given the DataFrame a step returned, :class:`PlanRewriter` walks its analyzed
logical plan bottom-up and rebuilds it so that, beside every output column
``c`` (attribute with expression id ``N``), a column ``__pv_N`` of type
``array<bigint>`` holds the value ids of the step-input cells ``c``'s cell was
derived from (DESIGN §3). This is Perm/GProM-style provenance rewriting: the
original Catalyst nodes and expressions are reused as they are (wrapped back
into Columns), so Spark's own semantics compute the data, and only the
provenance columns are added. A provenance column that can only ever hold one
id (a source cell, or a copy/rename of one) is kept as a plain ``bigint``
(null = no parent) instead of a one-element array, which makes the common
case (filters, projections, ``collect_list`` in aggregates) much cheaper. Nodes whose rules are not known raise
:class:`CaptureError` naming the operation: never capture wrongly.

Rules per node (children rewritten first; ``prov(a)`` = the array of ``a``):

* table leaf (a Parquet read of ``rows/<table>/``): ``prov(c) = id(table, c, row)``;
  other leaves built inside the step (``createDataFrame``, ``range``) are
  literals: empty arrays.
* Filter / Sort / Limit / Sample / Repartition / hints / aliases: the node is
  kept with the rewritten child; provenance columns pass through (copy).
* Project: ``prov(e) = ∪ prov(a) for a in references(e)``; a ``using`` join's
  merged key also gets its partner key's provenance.
* Aggregate / Distinct: ``prov(e) = ∪ over the group of ∪ prov(references(e))``;
  an aggregate function with no references (``count(*)``) adds the grouping
  keys' references (no keys: every column). Deduplicate: keys as aggregate,
  other columns from the kept row (``first``, evaluated in lock-step).
* Join: kept with rewritten children; each side keeps its own arrays.
* Union: positional, the rewritten children projected in the same order.
* Generate (explode, posexplode, ...): generator outputs <- the generator's
  referenced cells of the row; other columns copy.
* Window: ``collect_list`` of the referenced cells over the same window spec
  and frame (rank-like functions: the order-by cells).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from provplug import ids
from provplug.errors import CaptureError
from provplug.schema import ROW_COLUMN

PROV_PREFIX = "__pv_"
RAW_PREFIX = "__pvraw_"
EMPTY_PROV = "array<bigint>"

# Nodes whose output is their child's output, row for row or a subset/reordering.
COPY_NODES = {
    "Filter", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Tail", "Sample",
    "Repartition", "RepartitionByExpression", "RebalancePartitions", "ResolvedHint",
    "SubqueryAlias", "View", "Subquery",
}
CONSTANT_LEAVES = {"LocalRelation", "Range", "OneRowRelation"}
# Black boxes whose finest exposed granularity is a group or partition of
# whole records; capturing them exactly needs the function's input, which the
# plan does not expose per output row.
BLACK_BOX_NODES = {
    "FlatMapGroupsInPandas": "applyInPandas",
    "FlatMapCoGroupsInPandas": "cogroup().applyInPandas",
    "MapInPandas": "mapInPandas",
    "MapInArrow": "mapInArrow",
    "FlatMapGroupsInArrow": "applyInArrow",
    "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
    "LogicalRDD": "an RDD (rdd.map / toDF / checkpoint)",
    "ExternalRDD": "an RDD (rdd.map / toDF)",
    "MapPartitions": "mapPartitions",
    "MapElements": "map",
    "SerializeFromObject": "an RDD/Dataset lambda",
    "DeserializeToObject": "an RDD/Dataset lambda",
    "Expand": "rollup/cube/grouping sets",
}
UDF_EXPRESSIONS = {"PythonUDF", "PythonUDAF", "ScalaUDF", "ScalaAggregator", "PythonUDTF"}
RANK_LIKE = {"Rank", "DenseRank", "PercentRank", "CumeDist", "RowNumber", "NTile"}
UNSUPPORTED_EXPRESSIONS = {
    "PivotFirst": "pivot",
    "ScalarSubquery": "a scalar subquery",
    "LateralSubquery": "a lateral subquery",
}


@dataclasses.dataclass(frozen=True)
class TableLeaf:
    """A step input: the stored rows of a table, read back from ``path``."""

    table_id: int
    columns: tuple[str, ...]
    path: str


@dataclasses.dataclass
class Rewritten:
    """The provenance-carrying DataFrame of a step output and what it used."""

    frame: DataFrame  # the output's columns, then one ``__pv_N`` per column, in order
    prov_columns: list[str]
    prov_scalar: list[bool]  # per column: a bigint id (or null) rather than an array
    inputs: set[int]
    operations: list[str]
    uses_udf: bool


def prov_name(expr_id: int) -> str:
    return f"{PROV_PREFIX}{expr_id}"


def _norm_path(path: str) -> str:
    """A path without scheme and slashes at the ends, to compare Spark's root paths."""
    return path.removeprefix("file:").split("://", 1)[-1].strip("/")


class PlanRewriter:
    """Rewrites step outputs over the tables of one capture run."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.jvm = spark._jvm
        self.jss = spark._jsparkSession
        self.leaves: dict[str, TableLeaf] = {}
        self._scalar: dict[str, bool] = {}  # provenance column -> holds one id, not an array
        self._expr_utils = self.jvm.org.apache.spark.sql.classic.ExpressionUtils
        classic = self.jvm.org.apache.spark.sql.classic
        self._to_expression = getattr(getattr(classic, "ColumnNodeToExpressionConverter$"), "MODULE$")
        self._hidden_tag = self.jvm.org.apache.spark.sql.catalyst.plans.logical.Project.hiddenOutputTag()

    def register(self, leaf: TableLeaf) -> None:
        self.leaves[_norm_path(leaf.path)] = leaf

    # -- py4j plumbing -------------------------------------------------------
    def _seq(self, items: Sequence[Any]) -> Any:
        jlist = self.jvm.java.util.ArrayList()
        for item in items:
            jlist.add(item)
        return self.jvm.org.apache.spark.api.python.PythonUtils.toSeq(jlist)

    @staticmethod
    def _items(jseq: Any) -> list[Any]:
        return [jseq.apply(i) for i in range(jseq.size())]

    def _attrs(self, jset_or_seq: Any) -> list[Any]:
        return self._items(jset_or_seq.toSeq()) if hasattr(jset_or_seq, "toSeq") else self._items(jset_or_seq)

    def _column(self, expr: Any) -> Column:
        """A Catalyst expression as a PySpark Column (node semantics reused)."""
        return Column(self._expr_utils.column(expr))

    def _expression(self, col: Column) -> Any:
        """A PySpark Column as a (possibly unresolved) Catalyst expression."""
        return self._to_expression.apply(col._jc.node())

    def _frame(self, plan: Any) -> DataFrame:
        jdf = self.jvm.org.apache.spark.sql.classic.Dataset.ofRows(self.jss, plan)
        return DataFrame(jdf, self.spark)

    @staticmethod
    def _plan(frame: DataFrame) -> Any:
        return frame._jdf.queryExecution().analyzed()

    @staticmethod
    def _expr_id(attr: Any) -> int:
        return int(attr.exprId().id())

    def _walk_expressions(self, expr: Any) -> Iterator[Any]:
        yield expr
        for child in self._items(expr.children()):
            yield from self._walk_expressions(child)

    def _expression_names(self, node: Any) -> set[str]:
        return {e.nodeName() for top in self._items(node.expressions()) for e in self._walk_expressions(top)}

    # -- provenance expressions -----------------------------------------------
    @staticmethod
    def _empty() -> Column:
        return F.array().cast(EMPTY_PROV)

    def _as_array(self, names: Sequence[str]) -> Column:
        """The provenance of ``names`` as one array (scalars' nulls dropped)."""
        scalars = [F.col(n) for n in names if self._scalar[n]]
        parts = [F.array_compact(F.array(*scalars))] if scalars else []
        parts += [F.coalesce(F.col(n), self._empty()) for n in names if not self._scalar[n]]
        if not parts:
            return self._empty()
        return parts[0] if len(parts) == 1 and len(names) == 1 else F.array_distinct(F.concat(*parts))

    def _union(self, attrs: Sequence[Any]) -> tuple[Column, bool]:
        """Per row: the union of the provenance of ``attrs``, and whether it is
        a scalar (exactly one source id, or null for none)."""
        names = sorted({prov_name(self._expr_id(a)) for a in attrs})
        if not names:
            return F.lit(None).cast("bigint"), True
        if len(names) == 1:
            return F.col(names[0]), self._scalar[names[0]]
        return self._as_array(names), False

    def _prov(self, attrs: Sequence[Any], name: str) -> Column:
        """``name`` := the per-row union of ``attrs``' provenance."""
        column, scalar = self._union(attrs)
        self._scalar[name] = scalar
        return column.alias(name)

    def _group_union(self, attrs: Sequence[Any], name: str) -> Column:
        """``name`` := over a group, the union of ``attrs``' provenance of every row
        (an array; :meth:`_aggregate` records that once every output is built,
        because a grouping key keeps its input's name)."""
        names = sorted({prov_name(self._expr_id(a)) for a in attrs})
        # collect_list of scalars is far cheaper than of one-element arrays.
        parts = [F.collect_list(n) if self._scalar[n] else F.flatten(F.collect_list(n)) for n in names]
        if not parts:
            return self._empty().alias(name)
        return F.array_distinct(parts[0] if len(parts) == 1 else F.concat(*parts)).alias(name)

    def _references(self, expr: Any) -> list[Any]:
        return self._attrs(expr.references())

    # -- the rewrite ------------------------------------------------------------
    def rewrite(self, frame: DataFrame) -> Rewritten:
        plan = self._plan(frame)
        state = _Walk()
        self._scalar = {}
        new_plan = self._rewrite(plan, state)
        out_attrs = self._items(plan.output())
        names = [a.name() for a in out_attrs]
        if len(set(names)) != len(names):
            raise CaptureError(f"a step output has duplicate column names {names}: rename them before returning")
        provs = [prov_name(self._expr_id(a)) for a in out_attrs]
        result = self._frame(new_plan).select(*[self._column(a) for a in out_attrs], *[F.col(p) for p in provs])
        return Rewritten(result, provs, [self._scalar[p] for p in provs], state.inputs, state.operations, state.uses_udf)

    def _rewrite(self, node: Any, state: _Walk) -> Any:
        name = node.nodeName()
        children = [self._rewrite(c, state) for c in self._items(node.children())]
        state.note(name, self._expression_names(node), self._is_table_read(node))
        if name in BLACK_BOX_NODES:
            raise CaptureError(f"cannot capture {BLACK_BOX_NODES[name]} (plan node {name}) exactly; "
                               "express the step with DataFrame operations or UDFs")
        handler: Callable[[Any, list[Any], _Walk], Any] | None = getattr(self, f"_node_{name}", None)
        if handler is not None:
            new = handler(node, children, state)
        elif name in COPY_NODES:
            new = self._plan(self._frame(node.withNewChildren(self._seq(children))))
        elif name in CONSTANT_LEAVES:
            new = self._constant_leaf(node)
        else:
            raise CaptureError(f"cannot capture the Spark operation {name}: no provenance rule for it")
        return new

    def _is_table_read(self, node: Any) -> bool:
        """A table leaf, or the column selection provplug put on it: not user operations."""
        name = node.nodeName()
        if name in ("LogicalRelation", "Relation"):
            return True
        return (
            name == "Project"
            and node.child().nodeName() in ("LogicalRelation", "Relation")
            and all(e.nodeName() == "AttributeReference" for e in self._items(node.projectList()))
        )

    # leaves ------------------------------------------------------------------
    def _node_Relation(self, node: Any, children: list[Any], state: _Walk) -> Any:
        return self._node_LogicalRelation(node, children, state)

    def _node_LogicalRelation(self, node: Any, children: list[Any], state: _Walk) -> Any:
        leaf = self._table_leaf(node)
        state.inputs.add(leaf.table_id)
        attrs = self._items(node.output())
        by_name = {a.name(): a for a in attrs}
        if ROW_COLUMN not in by_name:
            raise CaptureError(f"input {leaf.path} has no {ROW_COLUMN} column")
        row = self._column(by_name[ROW_COLUMN])
        provs = []
        for attr in attrs:
            if attr.name() == ROW_COLUMN:
                continue
            base = ids.value_id(leaf.table_id, leaf.columns.index(attr.name()), 0)
            name = prov_name(self._expr_id(attr))
            self._scalar[name] = True  # a source cell: its own id
            provs.append((F.lit(base).cast("bigint") + row.cast("bigint")).alias(name))
        return self._plan(self._frame(node).select(*[self._column(a) for a in attrs], *provs))

    def _table_leaf(self, node: Any) -> TableLeaf:
        try:
            paths = [str(p) for p in self._items(node.relation().location().rootPaths())]
        except Exception as exc:  # py4j: not a file relation
            raise CaptureError(f"cannot capture a read of {node.toString().strip()}: register inputs with run.source()") from exc
        found = [self.leaves.get(_norm_path(p)) for p in paths]
        if len(found) != 1 or found[0] is None:
            raise CaptureError(f"step reads {paths}, which is not a table of this run: register it with run.source()")
        return found[0]

    def _constant_leaf(self, node: Any) -> Any:
        attrs = self._items(node.output())
        return self._plan(self._frame(node).select(
            *[self._column(a) for a in attrs], *[self._prov([], prov_name(self._expr_id(a))) for a in attrs]
        ))

    # row-wise ------------------------------------------------------------------
    def _node_Project(self, node: Any, children: list[Any], state: _Walk) -> Any:
        partners = self._using_join_partners(node)
        projections = self._items(node.projectList())
        provs, seen = [], set()
        for expr in projections:
            expr_id = self._expr_id(expr.toAttribute())
            if expr_id in seen:  # Spark may project one attribute twice
                continue
            seen.add(expr_id)
            refs = self._references(expr)
            refs += [partners[self._expr_id(a)] for a in refs if self._expr_id(a) in partners]
            provs.append(self._prov(refs, prov_name(expr_id)))
        return self._plan(self._frame(children[0]).select(*[self._column(e) for e in projections], *provs))

    def _using_join_partners(self, project: Any) -> dict[int, Any]:
        """For the Project a ``join(..., on="k")`` adds: merged key -> the other side's key.

        Spark keeps one side's key attribute and hides the other (tagged
        ``hiddenOutputTag``); DESIGN §3 makes the merged key depend on both.
        """
        hidden = project.getTagValue(self._hidden_tag)
        child = project.child()
        if hidden.isEmpty() or child.nodeName() != "Join" or child.condition().isEmpty():
            return {}
        hidden_ids = {self._expr_id(a) for a in self._items(hidden.get())}
        partners: dict[int, Any] = {}
        for eq in self._conjuncts(child.condition().get()):
            if eq.nodeName() not in ("EqualTo", "EqualNullSafe"):
                continue
            left, right = eq.left(), eq.right()
            if left.nodeName() != "AttributeReference" or right.nodeName() != "AttributeReference":
                continue
            lid, rid = self._expr_id(left), self._expr_id(right)
            if rid in hidden_ids:
                partners[lid] = right
            if lid in hidden_ids:
                partners[rid] = left
        return partners

    def _conjuncts(self, cond: Any) -> Iterator[Any]:
        if cond.nodeName() == "And":
            yield from self._conjuncts(cond.left())
            yield from self._conjuncts(cond.right())
        else:
            yield cond

    def _node_Join(self, node: Any, children: list[Any], state: _Walk) -> Any:
        return self._plan(self._frame(node.withNewChildren(self._seq(children))))

    def _node_Generate(self, node: Any, children: list[Any], state: _Walk) -> Any:
        generated = self._plan(self._frame(node.withNewChildren(self._seq(children))))
        refs = self._references(node.generator())
        out = self._items(generated.output())
        data = [self._column(a) for a in out if not a.name().startswith(PROV_PREFIX)]
        child_provs = [self._column(a) for a in out if a.name().startswith(PROV_PREFIX)]
        gen_provs = [self._prov(refs, prov_name(self._expr_id(a))) for a in self._items(node.generatorOutput())]
        return self._plan(self._frame(generated).select(*data, *child_provs, *gen_provs))

    # set-wise ----------------------------------------------------------------
    def _node_Union(self, node: Any, children: list[Any], state: _Walk) -> Any:
        originals = self._items(node.children())
        first = self._items(originals[0].output())
        aligned = []
        for original, new in zip(originals, children):
            attrs = self._items(original.output())
            # Arrays throughout: children may differ in scalar/array per position.
            provs = [self._as_array([prov_name(self._expr_id(a))]).alias(prov_name(self._expr_id(f))) for a, f in zip(attrs, first)]
            aligned.append(self._plan(self._frame(new).select(*[self._column(a) for a in attrs], *provs)))
        for f in first:
            self._scalar[prov_name(self._expr_id(f))] = False
        return self._plan(self._frame(node.withNewChildren(self._seq(aligned))))

    def _aggregate(self, grouping: list[Any], outputs: list[Any], provs: list[Column], child: Any,
                   kept_rows: frozenset[str] = frozenset()) -> Any:
        """An Aggregate of ``outputs`` and their provenance ``provs``; provenance
        columns in ``kept_rows`` come from one kept row and keep their type."""
        for out in outputs:
            name = prov_name(self._expr_id(out))  # Alias or attribute: both carry the id
            if name not in kept_rows:
                self._scalar[name] = False
        named = [*outputs, *[self._expression(p) for p in provs]]
        agg = self.jvm.org.apache.spark.sql.catalyst.plans.logical.Aggregate(
            self._seq(grouping), self._seq(named), child, self.jvm.scala.Option.apply(None)
        )
        return self._plan(self._frame(agg))

    def _node_Aggregate(self, node: Any, children: list[Any], state: _Walk) -> Any:
        grouping = self._items(node.groupingExpressions())
        keys = [a for g in grouping for a in self._references(g)]
        if not grouping:
            keys = self._items(node.child().output())
        outputs = self._items(node.aggregateExpressions())
        provs = []
        for expr in outputs:
            refs = self._references(expr)
            if self._has_reference_free_aggregate(expr):
                refs = refs + keys
            provs.append(self._group_union(refs, prov_name(self._expr_id(expr.toAttribute()))))
        return self._aggregate(grouping, outputs, provs, children[0])

    def _has_reference_free_aggregate(self, expr: Any) -> bool:
        return any(
            e.nodeName() in ("AggregateExpression", "PythonUDAF") and e.references().isEmpty()
            for e in self._walk_expressions(expr)
        )

    def _node_Distinct(self, node: Any, children: list[Any], state: _Walk) -> Any:
        attrs = self._items(node.child().output())
        provs = [self._group_union([a], prov_name(self._expr_id(a))) for a in attrs]
        return self._aggregate(attrs, attrs, provs, children[0])

    def _node_Deduplicate(self, node: Any, children: list[Any], state: _Walk) -> Any:
        keys = self._items(node.keys())
        key_ids = {self._expr_id(k) for k in keys}
        outputs, provs, kept = [], [], set()
        for attr in self._items(node.child().output()):
            pname = prov_name(self._expr_id(attr))
            if self._expr_id(attr) in key_ids:
                outputs.append(attr)
                provs.append(self._group_union([attr], pname))
            else:
                # first() of the value and of its provenance advance in lock-step
                # within one aggregate, so both come from the same kept row.
                first = self._expression(F.first(self._column(attr)))
                outputs.append(self.jvm.org.apache.spark.sql.catalyst.expressions.Alias(
                    first, attr.name(), attr.exprId(), attr.qualifier(),
                    self.jvm.scala.Option.apply(None), self._seq([]),
                ))
                provs.append(F.first(F.col(pname)).alias(pname))
                kept.add(pname)
        return self._aggregate(keys, outputs, provs, children[0], frozenset(kept))

    def _node_Window(self, node: Any, children: list[Any], state: _Walk) -> Any:
        window_exprs = self._items(node.windowExpressions())
        raw, flat = [], {}
        for alias in window_exprs:
            wexpr = alias.child()
            if wexpr.nodeName() != "WindowExpression":
                raise CaptureError(f"cannot capture window expression {alias.toString()}")
            func, spec = wexpr.windowFunction(), wexpr.windowSpec()
            if func.nodeName() in RANK_LIKE:
                refs = [a for o in self._items(spec.orderSpec()) for a in self._references(o)]
            else:
                refs = self._references(func)
            union, scalar = self._union(refs)
            flat[self._expr_id(alias.toAttribute())] = not scalar
            collect = self._expression(F.collect_list(union))
            windowed = self.jvm.org.apache.spark.sql.catalyst.expressions.WindowExpression(collect, spec)
            raw.append(self._expression(self._column(windowed).alias(f"{RAW_PREFIX}{self._expr_id(alias.toAttribute())}")))
        window = node.copy(
            self._seq([*window_exprs, *raw]), node.partitionSpec(), node.orderSpec(), children[0], node.hint()
        )
        windowed = self._plan(self._frame(window))
        kept = [a for a in self._items(windowed.output()) if not a.name().startswith(RAW_PREFIX)]
        finals = []
        for alias in window_exprs:
            expr_id = self._expr_id(alias.toAttribute())
            collected = F.col(f"{RAW_PREFIX}{expr_id}")
            self._scalar[prov_name(expr_id)] = False
            finals.append(F.array_distinct(F.flatten(collected) if flat[expr_id] else collected).alias(prov_name(expr_id)))
        return self._plan(self._frame(windowed).select(*[self._column(a) for a in kept], *finals))


@dataclasses.dataclass
class _Walk:
    """What one rewrite saw: input tables, operation names, UDF use."""

    inputs: set[int] = dataclasses.field(default_factory=set)
    operations: list[str] = dataclasses.field(default_factory=list)
    uses_udf: bool = False

    def note(self, node_name: str, expression_names: set[str], table_read: bool) -> None:
        for expr_name, operation in UNSUPPORTED_EXPRESSIONS.items():
            if expr_name in expression_names:
                raise CaptureError(f"cannot capture {operation} (expression {expr_name}) exactly")
        if expression_names & UDF_EXPRESSIONS:
            self.uses_udf = True
        if not table_read and node_name not in self.operations:
            self.operations.append(node_name)
