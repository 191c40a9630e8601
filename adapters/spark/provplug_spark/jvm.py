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
  Where it is safe (see *group joins* below) this union is not built at all.
* Join: kept with rewritten children; each side keeps its own arrays.
* Union: positional, the rewritten children projected in the same order.
* Generate (explode, posexplode, ...): generator outputs <- the generator's
  referenced cells of the row; other columns copy.
* Window: ``collect_list`` of the referenced cells over the same window spec
  and frame (rank-like functions: the order-by cells).

Group joins (the fast path for aggregates). Building ``collect_list`` arrays
of every group member's ids and exploding them again is the dominant cost of
capturing an aggregate. When (a) no row-merging node (aggregate, distinct,
window) lies above the aggregate inside the step, and (b) its input rows are
*stable* — recomputing its rewritten child yields the same rows with the same
grouping values and provenance ids (no limit, sample, nondeterministic
expression, window or aggregate below) — the aggregate instead emits its
grouping values as hidden columns (``__pgk_<n>_<i>``, plus a marker
``__pgm_<n>`` that is non-null on rows it produced) that travel to the step
output like data. Its provenance is *deferred*: the triples of the output
cells are produced after the output is materialised, by joining the stored
output rows (row number + hidden keys) back to the recomputed child rows on
the grouping values (null-safe equality) — a plain equi-join that yields
(src, dst) pairs directly. Row ids stay those of the single materialisation;
the child is recomputed only to enumerate group members, which (b) makes
deterministic. A column mixing deferred and per-row provenance (or two
aggregates' deferred provenance) could yield duplicate triples, so such a
step is rewritten again without group joins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from provplug import ids
from provplug.errors import CaptureError
from provplug.schema import POSITIONAL_PREFIX, ROW_COLUMN

PROV_PREFIX = "__pv_"
RAW_PREFIX = "__pvraw_"
HIDDEN_PREFIX = "__pg"  # group-join keys (__pgk_<n>_<i>) and markers (__pgm_<n>); never __pv_
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
# Nodes that merge rows: an aggregate below one cannot defer its provenance.
MERGING_NODES = {"Aggregate", "Distinct", "Deduplicate", "Window"}
# Nodes whose recomputation may yield other rows (or other values of the same
# row): an aggregate above one keeps the array path.
UNSTABLE_NODES = {"GlobalLimit", "LocalLimit", "Offset", "Tail", "Sample", "Deduplicate", "Window", "Aggregate"}
# Nodes under which every row comes from a different input row (or from a
# literal): source ids cannot repeat across the rows of a group.
INJECTIVE_NODES = {"LogicalRelation", "Relation", "Project", "Filter", "Sort", "Repartition",
                   "RepartitionByExpression", "RebalancePartitions", "ResolvedHint", "SubqueryAlias",
                   "View", "Subquery"} | CONSTANT_LEAVES
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
    positional: bool = False  # copies of source files: row number = file offset + row index (no ROW_COLUMN)


@dataclasses.dataclass(frozen=True)
class GroupJoin:
    """The deferred provenance of one aggregate (see *group joins* above)."""

    marker: str  # hidden output column: non-null on the rows this aggregate produced
    keys: tuple[str, ...]  # hidden output columns holding the grouping values
    child: DataFrame  # the recomputed input rows: the same ``keys`` columns, then provenance columns
    scalar: dict[str, bool]  # child provenance column -> one id (or null) rather than an array
    distinct: bool  # a source id may repeat across a group's rows: deduplicate the triples


@dataclasses.dataclass
class Rewritten:
    """The provenance-carrying DataFrame of a step output and what it used."""

    frame: DataFrame  # the output's columns, one ``__pv_N`` per column, then the hidden group-join columns
    prov_columns: list[str]
    prov_scalar: list[bool]  # per column: a bigint id (or null) rather than an array
    prov_none: list[bool]  # per column: no per-row provenance (the column is null)
    deferred: list[tuple[int, tuple[str, ...]] | None]  # per column: (group, child provenance columns)
    groups: list[GroupJoin]
    hidden: list[str]
    inputs: set[int]
    operations: list[str]
    uses_udf: bool


def parquet_files(frame: DataFrame) -> list[str] | None:
    """The files of ``frame`` when it is a bare read of Parquet files (no
    partition columns, no operation on top), else None."""
    plan = frame._jdf.queryExecution().analyzed()
    if plan.nodeName() != "LogicalRelation":
        return None
    try:
        relation = plan.relation()
        if relation.fileFormat().shortName() != "parquet" or relation.partitionSchema().length() != 0:
            return None
    except Py4JError:  # not a file relation (JDBC, in-memory, ...)
        return None
    return sorted(frame.inputFiles())


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
        self._none: set[str] = set()  # provenance columns known to be null (no per-row parent)
        self._deferred: dict[str, frozenset[tuple[int, str]]] = {}  # column -> {(group, child provenance)}
        self._groups: list[GroupJoin] = []
        self._allow_groups = True
        self._merging_above = False  # for the node being handled: a merging node lies above it
        self._child_flags: list[tuple[bool, bool]] = []  # its children: (stable, injective)
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
        names = [n for n in names if n not in self._none]
        scalars = [F.col(n) for n in names if self._scalar[n]]
        parts = [F.array_compact(F.array(*scalars))] if scalars else []
        parts += [F.coalesce(F.col(n), self._empty()) for n in names if not self._scalar[n]]
        if not parts:
            return self._empty()
        return parts[0] if len(parts) == 1 and len(names) == 1 else F.array_distinct(F.concat(*parts))

    def _names(self, attrs: Sequence[Any]) -> list[str]:
        return sorted({prov_name(self._expr_id(a)) for a in attrs})

    def _union(self, attrs: Sequence[Any]) -> tuple[Column, bool]:
        """Per row: the union of the per-row provenance of ``attrs``, and whether
        it is a scalar (exactly one source id, or null for none)."""
        names = [n for n in self._names(attrs) if n not in self._none]
        if not names:
            return F.lit(None).cast("bigint"), True
        if len(names) == 1:
            return F.col(names[0]), self._scalar[names[0]]
        return self._as_array(names), False

    def _set_kind(self, name: str, scalar: bool, none: bool, deferred: frozenset[tuple[int, str]] = frozenset()) -> None:
        self._scalar[name] = scalar
        if none:
            self._none.add(name)
        else:
            self._none.discard(name)
        self._deferred[name] = deferred

    def _deferred_of(self, attrs: Sequence[Any]) -> frozenset[tuple[int, str]]:
        return frozenset().union(*[self._deferred.get(n, frozenset()) for n in self._names(attrs)])

    def _prov(self, attrs: Sequence[Any], name: str) -> Column:
        """``name`` := the per-row union of ``attrs``' provenance (deferred parts carried along)."""
        column, scalar = self._union(attrs)
        none = all(n in self._none for n in self._names(attrs))
        self._set_kind(name, scalar, none, self._deferred_of(attrs))
        return column.alias(name)

    def _hidden(self, plan: Any) -> list[Column]:
        """The group-join columns ``plan`` carries, to keep them through a projection."""
        return [self._column(a) for a in self._items(plan.output()) if a.name().startswith(HIDDEN_PREFIX)]

    def _check_not_deferred(self, names: Sequence[str]) -> None:
        if any(self._deferred.get(n) for n in names):  # excluded by the merging-above rule
            raise CaptureError("internal: row-merging operation over deferred aggregate provenance")

    def _group_union(self, attrs: Sequence[Any], name: str) -> Column:
        """``name`` := over a group, the union of ``attrs``' provenance of every row
        (an array; :meth:`_aggregate` records that once every output is built,
        because a grouping key keeps its input's name)."""
        names = [n for n in self._names(attrs) if n not in self._none]
        self._check_not_deferred(names)
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
        out_attrs = self._items(plan.output())
        names = [a.name() for a in out_attrs]
        if len(set(names)) != len(names):
            raise CaptureError(f"a step output has duplicate column names {names}: rename them before returning")
        if any(n.startswith((PROV_PREFIX, HIDDEN_PREFIX)) for n in names):
            raise CaptureError(f"a step output has a column named {PROV_PREFIX}* or {HIDDEN_PREFIX}*, which provplug reserves")
        result = self._rewrite_output(plan, out_attrs, allow_groups=True)
        if result is None:  # a column would mix group-join and per-row provenance
            result = self._rewrite_output(plan, out_attrs, allow_groups=False)
        assert result is not None
        return result

    def _rewrite_output(self, plan: Any, out_attrs: list[Any], allow_groups: bool) -> Rewritten | None:
        state = _Walk()
        self._scalar, self._none, self._deferred, self._groups = {}, set(), {}, []
        self._allow_groups = allow_groups
        new_plan, _, _ = self._rewrite(plan, state, merging_above=False)
        provs = [prov_name(self._expr_id(a)) for a in out_attrs]
        deferred: list[tuple[int, tuple[str, ...]] | None] = []
        for p in provs:
            parts = self._deferred.get(p, frozenset())
            groups = {g for g, _ in parts}
            if len(groups) > 1 or (groups and p not in self._none):
                return None
            deferred.append((groups.pop(), tuple(sorted(c for _, c in parts))) if groups else None)
        result = self._frame(new_plan).select(
            *[self._column(a) for a in out_attrs], *[F.col(p) for p in provs], *self._hidden(new_plan)
        )
        return Rewritten(
            result, provs, [self._scalar[p] for p in provs], [p in self._none for p in provs], deferred,
            list(self._groups), [n for n in result.columns if n.startswith(HIDDEN_PREFIX)],
            state.inputs, state.operations, state.uses_udf,
        )

    def _rewrite(self, node: Any, state: _Walk, merging_above: bool) -> tuple[Any, bool, bool]:
        """Rewrite ``node``; return the new plan and whether its rows are stable
        under recomputation and come from distinct input rows (injective)."""
        name = node.nodeName()
        below_merging = merging_above or name in MERGING_NODES
        flags = [self._rewrite(c, state, below_merging) for c in self._items(node.children())]
        children = [plan for plan, _, _ in flags]
        table_read = self._is_table_read(node)
        # A table read (or provplug's column selection on it) has only attributes:
        # skip the expression walks, each a series of py4j round trips.
        deterministic = table_read or all(e.deterministic() for e in self._items(node.expressions()))
        stable = deterministic and name not in UNSTABLE_NODES and all(s for _, s, _ in flags)
        injective = name in INJECTIVE_NODES and all(i for _, _, i in flags)
        self._merging_above, self._child_flags = merging_above, [(s, i) for _, s, i in flags]
        state.note(name, set() if table_read else self._expression_names(node), table_read)
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
        return new, stable, injective

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
        if leaf.positional:
            # The copy's name holds its first row number (provplug.schema.positional_name).
            start = len(POSITIONAL_PREFIX) + 1
            row = f"(CAST(substring(_metadata.file_name, {start}, 12) AS BIGINT) + _metadata.row_index)"
        elif ROW_COLUMN in {a.name() for a in attrs}:
            row = f"CAST(`{ROW_COLUMN}` AS BIGINT)"
        else:
            raise CaptureError(f"input {leaf.path} has no {ROW_COLUMN} column")
        provs = []
        for attr in attrs:
            if attr.name() == ROW_COLUMN:
                continue
            base = ids.value_id(leaf.table_id, leaf.columns.index(attr.name()), 0)
            name = prov_name(self._expr_id(attr))
            self._set_kind(name, scalar=True, none=False)  # a source cell: its own id
            # SQL text, not Column calls: one py4j round trip per column instead of several.
            provs.append(f"CAST({base} AS BIGINT) + {row} AS `{name}`")
        return self._plan(self._frame(node).selectExpr("*", *provs))

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
            name = prov_name(expr_id)
            if expr_id not in partners and name in self._scalar and expr.nodeName() == "AttributeReference":
                provs.append(F.col(name))  # a column kept as it is: its provenance too (same expression id)
                continue
            refs = self._references(expr)
            refs += [partners[self._expr_id(a)] for a in refs if self._expr_id(a) in partners]
            provs.append(self._prov(refs, name))
        return self._plan(self._frame(children[0]).select(
            *[self._column(e) for e in projections], *provs, *self._hidden(children[0])
        ))

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
        first = [prov_name(self._expr_id(a)) for a in self._items(originals[0].output())]
        branches = [[prov_name(self._expr_id(a)) for a in self._items(o.output())] for o in originals]
        kinds = []
        for pos, out in enumerate(first):
            names = [b[pos] for b in branches]
            live = [n for n in names if n not in self._none]
            deferred = frozenset().union(*[self._deferred.get(n, frozenset()) for n in names])
            kinds.append((out, all(self._scalar[n] for n in live), not live, deferred))
        frames = [self._frame(new) for new in children]
        hidden = {f.name: f.dataType for fr in frames for f in fr.schema.fields if f.name.startswith(HIDDEN_PREFIX)}
        aligned = []
        for original, frame, names in zip(originals, frames, branches):
            attrs = self._items(original.output())
            provs = []
            for n, (out, scalar, _, _) in zip(names, kinds):
                if scalar:  # one id per row in every branch: stays a scalar
                    provs.append((F.lit(None).cast("bigint") if n in self._none else F.col(n)).alias(out))
                else:
                    provs.append(self._as_array([n]).alias(out))
            # Each branch's group-join columns, null in the other branches.
            extra = [F.col(h) if h in frame.columns else F.lit(None).cast(t).alias(h) for h, t in hidden.items()]
            aligned.append(self._plan(frame.select(*[self._column(a) for a in attrs], *provs, *extra)))
        for out, scalar, none, deferred in kinds:
            self._set_kind(out, scalar, none, deferred)
        return self._plan(self._frame(node.withNewChildren(self._seq(aligned))))

    def _aggregate(self, grouping: list[Any], outputs: list[Any], grouped: list[tuple[str, list[Any]]], child: Any,
                   kept: Sequence[Column] = ()) -> Any:
        """An Aggregate of ``outputs``. The provenance column ``name`` of each
        ``grouped`` entry is the union over the group of its attributes'
        provenance (a group join when safe, else an array); ``kept`` are
        provenance columns taken from one kept row (their kind is unchanged)."""
        if self._can_group_join(grouping):
            provs = self._group_join(grouping, grouped, child)
        else:
            provs = [self._group_union(refs, name) for name, refs in grouped]
            # Set after building every column: a grouping key keeps its input's name.
            for name, _ in grouped:
                self._set_kind(name, scalar=False, none=False)
        named = [*outputs, *[self._expression(p) for p in [*provs, *kept]]]
        agg = self.jvm.org.apache.spark.sql.catalyst.plans.logical.Aggregate(
            self._seq(grouping), self._seq(named), child, self.jvm.scala.Option.apply(None)
        )
        return self._plan(self._frame(agg))

    def _can_group_join(self, grouping: list[Any]) -> bool:
        stable, _ = self._child_flags[0]
        return self._allow_groups and not self._merging_above and stable and all(g.deterministic() for g in grouping)

    def _group_join(self, grouping: list[Any], grouped: list[tuple[str, list[Any]]], child: Any) -> list[Column]:
        """Defer the group provenance of ``grouped`` to a join of the output rows
        with ``child``'s rows on the grouping values; return the aggregate's
        extra outputs (null provenance columns, hidden keys, marker)."""
        n = len(self._groups)
        keys = tuple(f"{HIDDEN_PREFIX}k_{n}_{i}" for i in range(len(grouping)))
        marker = f"{HIDDEN_PREFIX}m_{n}"
        parts = {name: [p for p in self._names(refs) if p not in self._none] for name, refs in grouped}
        needed = sorted({p for ps in parts.values() for p in ps})
        self._check_not_deferred(needed)
        values = [self._column(self._unaliased(g)) for g in grouping]
        members = self._frame(child).select(*[v.alias(k) for v, k in zip(values, keys)], *[F.col(p) for p in needed])
        _, injective = self._child_flags[0]
        self._groups.append(GroupJoin(marker, keys, members, {p: self._scalar[p] for p in needed}, not injective))
        for name, ps in parts.items():
            self._set_kind(name, scalar=True, none=True, deferred=frozenset((n, p) for p in ps))
        return [
            *[F.lit(None).cast("bigint").alias(name) for name in parts],
            *[v.alias(k) for v, k in zip(values, keys)],
            F.lit(True).alias(marker),
        ]

    @staticmethod
    def _unaliased(expr: Any) -> Any:
        return expr.child() if expr.nodeName() == "Alias" else expr

    def _node_Aggregate(self, node: Any, children: list[Any], state: _Walk) -> Any:
        grouping = self._items(node.groupingExpressions())
        keys = [a for g in grouping for a in self._references(g)]
        if not grouping:
            keys = self._items(node.child().output())
        outputs = self._items(node.aggregateExpressions())
        grouped = []
        for expr in outputs:
            refs = self._references(expr)
            if self._has_reference_free_aggregate(expr):
                refs = refs + keys
            grouped.append((prov_name(self._expr_id(expr.toAttribute())), refs))
        return self._aggregate(grouping, outputs, grouped, children[0])

    def _has_reference_free_aggregate(self, expr: Any) -> bool:
        return any(
            e.nodeName() in ("AggregateExpression", "PythonUDAF") and e.references().isEmpty()
            for e in self._walk_expressions(expr)
        )

    def _node_Distinct(self, node: Any, children: list[Any], state: _Walk) -> Any:
        attrs = self._items(node.child().output())
        return self._aggregate(attrs, attrs, [(prov_name(self._expr_id(a)), [a]) for a in attrs], children[0])

    def _node_Deduplicate(self, node: Any, children: list[Any], state: _Walk) -> Any:
        keys = self._items(node.keys())
        key_ids = {self._expr_id(k) for k in keys}
        outputs, grouped, kept = [], [], []
        for attr in self._items(node.child().output()):
            pname = prov_name(self._expr_id(attr))
            if self._expr_id(attr) in key_ids:
                outputs.append(attr)
                grouped.append((pname, [attr]))
            else:
                # first() of the value and of its provenance advance in lock-step
                # within one aggregate, so both come from the same kept row.
                first = self._expression(F.first(self._column(attr)))
                outputs.append(self.jvm.org.apache.spark.sql.catalyst.expressions.Alias(
                    first, attr.name(), attr.exprId(), attr.qualifier(),
                    self.jvm.scala.Option.apply(None), self._seq([]),
                ))
                kept.append(F.first(F.col(pname)).alias(pname))
        return self._aggregate(keys, outputs, grouped, children[0], kept)

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
            self._check_not_deferred(self._names(refs))
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
            self._set_kind(prov_name(expr_id), scalar=False, none=False)
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
