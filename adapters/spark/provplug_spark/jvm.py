"""Provenance rewriting of a Spark logical plan: the ONLY module that touches
py4j / Catalyst internals.

Given the DataFrame a step returned, :class:`PlanRewriter` walks its analyzed
logical plan bottom-up and rebuilds it so that its rows carry the **row
numbers** of the step-input rows they were derived from, in a few extra
columns (``__pv_<n>``), while *which* input columns each output column depends
on is worked out statically, in Python (DESIGN §3). The provenance of an
output cell is a set of :class:`~.writer.Term` s: "the ids ``base + r`` for each
row number ``r`` that row-number column ``__pv_<n>`` holds in this row", where
``base`` is the value id of row 0 of one input column. So a step over a
19-column table carries ONE row number per row, not 19 value ids, and an
aggregate collects one list of member row numbers per input table, not one per
column; :mod:`.writer` expands terms into triples with NumPy. This is
Perm/GProM-style provenance rewriting: the original Catalyst nodes and
expressions are reused as they are (wrapped back into Columns), so Spark's own
semantics compute the data, and only row-number columns are added. Nodes
whose rules are not known raise :class:`CaptureError` naming the operation:
never capture wrongly.

Rules per node (children rewritten first; ``terms(a)`` = the terms of attribute ``a``):

* table leaf (a Parquet read of ``rows/<table>/``): one row-number column
  (the stored row number, or for copies of source files the file offset plus
  ``_metadata.row_index``); ``terms(c) = {(row, id(table, c, 0))}``. Other
  leaves built inside the step (``range``, ``createDataFrame`` of pandas
  data: a ``LocalRelation``) are literals: no terms. ``createDataFrame`` of
  rows (an RDD of driver-side rows) is refused: register it with
  ``run.source``.
* Filter / Sort / Limit / Sample / Repartition / hints / aliases: the node is
  kept with the rewritten child; row numbers pass through (copy).
* Project: ``terms(e) = ∪ terms(a) for a in references(e)``; a ``using``
  join's merged key also gets its partner key's terms (keys of different
  types are matched through the cast the analyzer puts on one side).
* Aggregate / Distinct: ``terms(e) = ∪ terms(references(e))`` with each
  row-number column replaced by the list of the group's row numbers
  (``collect_list``, one per input row-number column); an aggregate function
  with no references (``count(*)``) adds the grouping keys' references (no
  keys: every column). Deduplicate: keys as aggregate, other columns from the
  kept row (``first`` of the row numbers, evaluated in lock-step).
* Join: kept with rewritten children; each side keeps its row numbers.
* Union: positional, every branch projected to the same row-number columns
  (null where a branch has none).
* Generate (explode, posexplode, ...): generator outputs <- the generator's
  referenced terms; other columns copy.
* Window: ``collect_list`` of the referenced row numbers over the same window
  spec and frame (rank-like functions: the order-by cells).
* applyInPandas / mapInPandas (black boxes): the user's function is read back
  from the plan and wrapped (:mod:`.blackbox`) so that each output row lists
  the row numbers of the group (or the partition's batches read so far) the
  function received; every output column depends on every column passed.

Group joins (global aggregates). An aggregate without grouping keys puts
every input row in its one group, so a list of its members would have to fit
one row. When (a) no row-merging node (aggregate, distinct, window) lies
above it inside the step, and (b) its input rows are *stable* — recomputing
its rewritten child yields the same rows with the same row numbers (no limit,
sample, nondeterministic expression, window or aggregate below) — and come
from distinct input rows, its provenance is *deferred* instead: it emits a
marker (``__pgm_<n>``, non-null on the rows it produced) that travels to the
step output like data, and the triples of its cells are produced after the
output is materialised by joining the stored output rows back to the
recomputed child rows (:mod:`.triples`). Row ids stay those of the single
materialisation; (b) makes the recomputation deterministic. A column mixing
deferred and per-row provenance (or two aggregates' deferred provenance)
could not be written by one join, so such a step is rewritten again without
group joins.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from py4j.protocol import Py4JError
from pyspark.serializers import CloudPickleSerializer
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import ArrayType, LongType, StructField, StructType

from provplug import ids
from provplug.errors import CaptureError
from provplug.schema import POSITIONAL_PREFIX, ROW_COLUMN

from .blackbox import Carried, group_function, partition_function, takes_key
from .writer import Cell, Term

# Which aggregates defer their provenance to a group join: "global" (those
# without grouping keys) or "always" (every one whose input can be recomputed
# exactly: for groups too large to list in one row).
GROUP_JOINS_CONF = "spark.provplug.groupJoins"
PROV_PREFIX = "__pv_"  # row-number columns
RAW_PREFIX = "__pvraw_"
HIDDEN_PREFIX = "__pg"  # group-join keys (__pgk_<n>_<i>) and markers (__pgm_<n>); never __pv_
ROWS_TYPE = "bigint"
ROW_LIST_TYPE = "array<bigint>"

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
    "FlatMapCoGroupsInPandas": "cogroup().applyInPandas",
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
# Group and partition functions captured as black boxes (:mod:`.blackbox`):
# node -> (operation, PySpark eval type of the function it supports).
WRAPPED_FUNCTION_NODES = {"FlatMapGroupsInPandas": ("applyInPandas", 201), "MapInPandas": ("mapInPandas", 205)}
# Nodes that merge rows (or pass only data columns to a function): an
# aggregate below one cannot defer its provenance.
MERGING_NODES = {"Aggregate", "Distinct", "Deduplicate", "Window", *WRAPPED_FUNCTION_NODES}
# Nodes whose recomputation may yield other rows (or other values of the same
# row): an aggregate above one collects lists.
UNSTABLE_NODES = {"GlobalLimit", "LocalLimit", "Offset", "Tail", "Sample", "Deduplicate", "Window", "Aggregate",
                  *WRAPPED_FUNCTION_NODES}
# Expressions Catalyst calls deterministic but fixes once per query: another
# query (a group join's recomputation) sees other values.
PER_QUERY_EXPRESSIONS = {"CurrentTimestamp", "CurrentDate", "Now", "LocalTimestamp", "CurrentTimeZone",
                         "CurrentBatchTimestamp", "CurrentTime"}
# Nodes under which every row comes from a different input row (or from a
# literal): a row number cannot repeat across the rows of a group.
INJECTIVE_NODES = {"LogicalRelation", "Relation", "Project", "Filter", "Sort", "Repartition",
                   "RepartitionByExpression", "RebalancePartitions", "ResolvedHint", "SubqueryAlias",
                   "View", "Subquery"} | CONSTANT_LEAVES
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


@dataclasses.dataclass(frozen=True)
class TableLeaf:
    """A step input: the stored rows of a table, read back from ``path``."""

    table_id: int
    columns: tuple[str, ...]
    path: str
    positional: bool = False  # copies of source files: row number = file offset + row index (no ROW_COLUMN)


@dataclasses.dataclass(frozen=True)
class RowColumn:
    """What a row-number column of the rewritten plan holds."""

    table_id: int
    scalar: bool  # one row number (or null), not an array of them
    may_repeat: bool  # an array may hold one row number several times


@dataclasses.dataclass(frozen=True)
class GroupJoin:
    """The deferred provenance of one aggregate (see *group joins* above)."""

    marker: str  # hidden output column: non-null on the rows this aggregate produced
    keys: tuple[str, ...]  # hidden output columns holding the grouping values (none: a global aggregate)
    child: DataFrame  # the recomputed input rows: the same ``keys`` columns, then their row-number columns
    cells: tuple[Cell, ...]  # the aggregate's output cells over the child's row-number columns


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


@dataclasses.dataclass(frozen=True)
class _Node:
    """A rewritten plan node and what the rewrite knows about its rows."""

    plan: Any
    rows: tuple[str, ...]  # its row-number columns
    hidden: tuple[str, ...]  # its group-join columns
    stable: bool = True  # recomputation yields the same rows with the same row numbers
    injective: bool = True  # every row comes from distinct input rows


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


class PendingFrame(ClassicDataFrame):
    """A DataFrame whose plan is not known yet: a step output whose rows a
    background Spark job is still writing. Its first use waits for the job
    (and raises its error). PySpark's classic DataFrame reaches the JVM only
    through ``_jdf``, so that is the one attribute made to wait."""

    def __init__(self, spark: SparkSession, ready: Callable[[], DataFrame]) -> None:
        self._ready = ready
        super().__init__(None, spark)  # type: ignore[arg-type]

    @property  # type: ignore[override]
    def _jdf(self) -> Any:
        return self._ready()._jdf

    @_jdf.setter
    def _jdf(self, value: Any) -> None:
        if value is not None:
            raise AttributeError("a pending step output's plan is set by its writer job")

    # PySpark caches these with functools.cached_property, which on Python
    # < 3.12 holds ONE lock for every DataFrame while computing: waiting for
    # the job inside it would block the writer thread's own schema lookups.
    @property  # type: ignore[override]
    def schema(self) -> Any:
        return self._ready().schema

    @property  # type: ignore[override]
    def rdd(self) -> Any:
        return self._ready().rdd


def _norm_path(path: str) -> str:
    """A path without scheme and slashes at the ends, to compare Spark's root paths."""
    return path.removeprefix("file:").split("://", 1)[-1].strip("/")


def _null(name: str, scalar: bool) -> Column:
    return F.lit(None).cast(ROWS_TYPE if scalar else ROW_LIST_TYPE).alias(name)


class PlanRewriter:
    """Rewrites step outputs over the tables of one capture run."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.jvm = spark._jvm
        self.jss = spark._jsparkSession
        self.leaves: dict[str, TableLeaf] = {}
        self._terms: dict[int, frozenset[Term]] = {}  # expression id -> per-row provenance
        self._deferred: dict[int, frozenset[tuple[int, Term]]] = {}  # expression id -> {(group, child term)}
        self._rows: dict[str, RowColumn] = {}
        self._names: Iterator[int] = itertools.count()
        self._groups: list[GroupJoin] = []
        self._allow_groups = True
        self.group_joins = spark.conf.get(GROUP_JOINS_CONF, "global") or "global"
        if self.group_joins not in ("global", "always"):
            raise CaptureError(f"{GROUP_JOINS_CONF} must be 'global' or 'always', not {self.group_joins!r}")
        self._merging_above = False  # for the node being handled: a merging node lies above it
        self._node_expressions: set[str] = set()  # for the node being handled: its expressions' node names
        # JVM classes looked up once: each package step of a lookup is a py4j round trip.
        classic = self.jvm.org.apache.spark.sql.classic
        catalyst = self.jvm.org.apache.spark.sql.catalyst
        self._expr_utils = classic.ExpressionUtils
        self._dataset = classic.Dataset
        self._to_expression = getattr(getattr(classic, "ColumnNodeToExpressionConverter$"), "MODULE$")
        self._hidden_tag = catalyst.plans.logical.Project.hiddenOutputTag()
        self._aggregate_node = catalyst.plans.logical.Aggregate
        self._alias = catalyst.expressions.Alias
        self._window_expression = catalyst.expressions.WindowExpression
        self._array_list = self.jvm.java.util.ArrayList
        self._to_seq = self.jvm.org.apache.spark.api.python.PythonUtils.toSeq
        self._none = self.jvm.scala.Option.apply(None)
        self._byte_tag = self.jvm.scala.reflect.ClassTag.Byte()

    def register(self, leaf: TableLeaf) -> None:
        self.leaves[_norm_path(leaf.path)] = leaf

    # -- py4j plumbing -------------------------------------------------------
    def _seq(self, items: Sequence[Any]) -> Any:
        jlist = self._array_list()
        for item in items:
            jlist.add(item)
        return self._to_seq(jlist)

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
        jdf = self._dataset.ofRows(self.jss, plan)
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

    def _references(self, expr: Any) -> list[Any]:
        return self._attrs(expr.references())

    # -- terms -----------------------------------------------------------------
    def _new_rows(self, kind: RowColumn) -> str:
        name = f"{PROV_PREFIX}{next(self._names)}"
        self._rows[name] = kind
        return name

    def _terms_of(self, attrs: Iterable[Any]) -> frozenset[Term]:
        return frozenset().union(*[self._terms.get(self._expr_id(a), frozenset()) for a in attrs])

    def _deferred_of(self, attrs: Iterable[Any]) -> frozenset[tuple[int, Term]]:
        return frozenset().union(*[self._deferred.get(self._expr_id(a), frozenset()) for a in attrs])

    def _derive(self, expr_id: int, refs: Sequence[Any]) -> None:
        """The attribute ``expr_id`` := a function of ``refs`` in the same row."""
        self._terms[expr_id] = self._terms_of(refs)
        self._deferred[expr_id] = self._deferred_of(refs)

    def _check_not_deferred(self, refs: Sequence[Any]) -> None:
        if self._deferred_of(refs):  # excluded by the merging-above rule
            raise CaptureError("internal: row-merging operation over deferred aggregate provenance")

    def _relisted(self, terms: Iterable[Term], lists: dict[str, str], injective: bool) -> frozenset[Term]:
        """``terms`` with each row-number column replaced by a list of the row
        numbers it holds over a group or window (``lists``: row column ->
        list column, added to for row columns not listed yet)."""
        out = set()
        for term in terms:
            if term.rows not in lists:
                source = self._rows[term.rows]
                # A list of one number per member repeats one only when members
                # can share an input row, or when it joins lists.
                lists[term.rows] = self._new_rows(RowColumn(source.table_id, False, not injective or not source.scalar))
            out.add(Term(lists[term.rows], False, term.base))
        return frozenset(out)

    def _cell(self, column: int, terms: frozenset[Term]) -> Cell:
        ordered = tuple(sorted(terms, key=lambda t: (t.rows, t.base)))
        tables = [self._rows[r].table_id for r in {t.rows for t in ordered}]
        dedupe = any(self._rows[t.rows].may_repeat for t in ordered) or len(tables) != len(set(tables))
        return Cell(column, ordered, dedupe)

    @staticmethod
    def _list_of(name: str, scalar: bool) -> Column:
        return F.collect_list(name) if scalar else F.flatten(F.collect_list(name))

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
        self._terms, self._deferred, self._rows, self._groups = {}, {}, {}, []
        self._allow_groups = allow_groups
        node = self._rewrite(plan, state, merging_above=False)
        cells, deferred = [], {}
        for j, attr in enumerate(out_attrs):
            expr_id = self._expr_id(attr)
            terms, parts = self._terms.get(expr_id, frozenset()), self._deferred.get(expr_id, frozenset())
            groups = {g for g, _ in parts}
            if len(groups) > 1 or (groups and terms):
                return None
            if terms:
                cells.append(self._cell(j, terms))
            if groups:
                deferred.setdefault(groups.pop(), []).append(self._cell(j, frozenset(t for _, t in parts)))
        used = sorted({t.rows for c in cells for t in c.terms})
        result = self._frame(node.plan).select(
            *[self._column(a) for a in out_attrs], *[F.col(r) for r in used], *[F.col(h) for h in node.hidden]
        )
        groups = [dataclasses.replace(g, cells=tuple(deferred.get(n, ()))) for n, g in enumerate(self._groups)]
        return Rewritten(result, cells, groups, list(node.hidden), state.inputs, state.operations, state.uses_udf)

    def _rewrite(self, node: Any, state: _Walk, merging_above: bool) -> _Node:
        name = node.nodeName()
        below_merging = merging_above or name in MERGING_NODES
        children = [self._rewrite(c, state, below_merging) for c in self._items(node.children())]
        table_read = self._is_table_read(node)
        # A table read (or provplug's column selection on it) has only attributes:
        # skip the expression walks, each a series of py4j round trips.
        deterministic = table_read or all(e.deterministic() for e in self._items(node.expressions()))
        injective = name in INJECTIVE_NODES and all(c.injective for c in children)
        self._merging_above = merging_above
        self._node_expressions = set() if table_read else self._expression_names(node)
        state.note(name, self._node_expressions, table_read)
        stable = (deterministic and name not in UNSTABLE_NODES and not self._node_expressions & PER_QUERY_EXPRESSIONS
                  and all(c.stable for c in children))
        if name == "LogicalRDD" and self._built_in_driver(node):
            raise CaptureError("cannot capture a DataFrame built in the driver (createDataFrame / parallelize, plan "
                               "node LogicalRDD) that is not a registered source: pass it through run.source(df, name)")
        if name in BLACK_BOX_NODES:
            raise CaptureError(f"cannot capture {BLACK_BOX_NODES[name]} (plan node {name}) exactly; "
                               "express the step with DataFrame operations or UDFs")
        handler: Callable[[Any, list[_Node], _Walk], _Node] | None = getattr(self, f"_node_{name}", None)
        if handler is not None:
            new = handler(node, children, state)
        elif name in COPY_NODES:
            new = _Node(self._with_children(node, children), children[0].rows, children[0].hidden)
        elif name in CONSTANT_LEAVES:
            for attr in self._items(node.output()):
                self._terms[self._expr_id(attr)] = frozenset()
            new = _Node(node, (), ())
        else:
            raise CaptureError(f"cannot capture the Spark operation {name}: no provenance rule for it")
        return dataclasses.replace(new, stable=stable, injective=injective)

    def _built_in_driver(self, node: Any, limit: int = 200) -> bool:
        """Whether a LogicalRDD's rows come from the driver (createDataFrame of
        local data, parallelize): every root of its RDD lineage is a
        ParallelCollectionRDD, and no DataFrame's rows (a SQLExecutionRDD, as
        in ``df.rdd.map(...).toDF()``) lie on the way."""
        pending, seen = [node.rdd()], 0
        while pending and seen < limit:
            rdd = pending.pop()
            seen += 1
            kind = rdd.getClass().getSimpleName()
            if kind == "SQLExecutionRDD":
                return False
            deps = self._items(rdd.dependencies())
            if not deps and kind != "ParallelCollectionRDD":
                return False
            pending += [d.rdd() for d in deps]
        return not pending

    def _with_children(self, node: Any, children: Sequence[_Node]) -> Any:
        return self._plan(self._frame(node.withNewChildren(self._seq([c.plan for c in children]))))

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
    def _node_Relation(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        return self._node_LogicalRelation(node, children, state)

    def _node_LogicalRelation(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        leaf = self._table_leaf(node)
        state.inputs.add(leaf.table_id)
        attrs = [(a.name(), self._expr_id(a)) for a in self._items(node.output())]
        if leaf.positional:
            # The copy's name holds its first row number (provplug.schema.positional_name).
            start = len(POSITIONAL_PREFIX) + 1
            row = f"CAST(substring(_metadata.file_name, {start}, 12) AS BIGINT) + _metadata.row_index"
        elif ROW_COLUMN in {n for n, _ in attrs}:
            row = f"CAST(`{ROW_COLUMN}` AS BIGINT)"
        else:
            raise CaptureError(f"input {leaf.path} has no {ROW_COLUMN} column")
        rows = self._new_rows(RowColumn(leaf.table_id, scalar=True, may_repeat=False))
        for name, expr_id in attrs:
            if name != ROW_COLUMN:  # a source cell: its own id
                self._terms[expr_id] = frozenset({Term(rows, True, ids.value_id(leaf.table_id, leaf.columns.index(name), 0))})
        return _Node(self._plan(self._frame(node).selectExpr("*", f"{row} AS `{rows}`")), (rows,), ())

    def _table_leaf(self, node: Any) -> TableLeaf:
        try:
            paths = [str(p) for p in self._items(node.relation().location().rootPaths())]
        except Exception as exc:  # py4j: not a file relation
            raise CaptureError(f"cannot capture a read of {node.toString().strip()}: register inputs with run.source()") from exc
        found = [self.leaves.get(_norm_path(p)) for p in paths]
        if len(found) != 1 or found[0] is None:
            raise CaptureError(f"step reads {paths}, which is not a table of this run: register it with run.source()")
        return found[0]

    # row-wise ------------------------------------------------------------------
    def _node_Project(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        partners = self._using_join_partners(node)
        projections = self._items(node.projectList())
        for expr in projections:
            if expr.nodeName() == "AttributeReference":
                expr_id = self._expr_id(expr)
                if expr_id in partners:  # the merged key: both sides' key cells
                    self._derive(expr_id, [expr, partners[expr_id]])
                continue  # a column kept as it is keeps its terms (same expression id)
            refs = self._references(expr)
            refs += [partners[self._expr_id(a)] for a in refs if self._expr_id(a) in partners]
            self._derive(self._expr_id(expr.toAttribute()), refs)
        child = children[0]
        plan = self._plan(self._frame(child.plan).select(
            *[self._column(e) for e in projections], *[F.col(c) for c in (*child.rows, *child.hidden)]
        ))
        return _Node(plan, child.rows, child.hidden)

    def _using_join_partners(self, project: Any) -> dict[int, Any]:
        """For the Project a ``join(..., on="k")`` adds: merged key -> the other side's key.

        Spark keeps one side's key attribute and hides the other (tagged
        ``hiddenOutputTag``); DESIGN §3 makes the merged key depend on both.
        Keys of different types are compared through a cast of one side (or
        both): ``k#1L = cast(k#2 AS bigint)``.
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
            left, right = self._carried_attribute(eq.left()), self._carried_attribute(eq.right())
            if left is None or right is None:
                continue
            lid, rid = self._expr_id(left), self._expr_id(right)
            if rid in hidden_ids:
                partners[lid] = right
            if lid in hidden_ids:
                partners[rid] = left
        return partners

    @staticmethod
    def _carried_attribute(expr: Any) -> Any | None:
        """The attribute whose value ``expr`` is, seen through the casts and
        aliases the analyzer adds (to compare or union columns of different
        types); None for any other expression."""
        while expr.nodeName() in VALUE_WRAPPERS:
            expr = expr.child()
        return expr if expr.nodeName() == "AttributeReference" else None

    def _conjuncts(self, cond: Any) -> Iterator[Any]:
        if cond.nodeName() == "And":
            yield from self._conjuncts(cond.left())
            yield from self._conjuncts(cond.right())
        else:
            yield cond

    def _node_Join(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        left, right = children
        if node.joinType().toString() in LEFT_ONLY_JOINS:
            return _Node(self._with_children(node, children), left.rows, left.hidden)
        return _Node(self._with_children(node, children), left.rows + right.rows, left.hidden + right.hidden)

    def _node_Generate(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        refs = self._references(node.generator())
        for attr in self._items(node.generatorOutput()):
            self._derive(self._expr_id(attr), refs)
        return _Node(self._with_children(node, children), children[0].rows, children[0].hidden)

    # set-wise ----------------------------------------------------------------
    def _node_Union(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        originals = [self._items(o.output()) for o in self._items(node.children())]
        for pos, attr in enumerate(originals[0]):  # the union's output keeps the first branch's ids
            self._derive(self._expr_id(attr), [branch[pos] for branch in originals])
        rows = tuple(dict.fromkeys(r for c in children for r in c.rows))
        hidden = tuple(dict.fromkeys(h for c in children for h in c.hidden))
        types = {f.name: f.dataType for c in children if c.hidden for f in self._frame(c.plan).schema.fields if f.name in hidden}
        aligned = []
        for attrs, child in zip(originals, children):
            aligned.append(self._plan(self._frame(child.plan).select(
                *[self._column(a) for a in attrs],
                *[F.col(r) if r in child.rows else _null(r, self._rows[r].scalar) for r in rows],
                # a group's columns are null on the rows of the other branches
                *[F.col(h) if h in child.hidden else F.lit(None).cast(types[h]).alias(h) for h in hidden],
            )))
        plan = self._plan(self._frame(node.withNewChildren(self._seq(aligned))))
        return _Node(plan, rows, hidden)

    def _aggregate(self, grouping: list[Any], outputs: list[Any], grouped: list[tuple[int, list[Any]]],
                   child: _Node, kept: Sequence[Any] = ()) -> _Node:
        """An Aggregate of ``outputs`` over ``child``. The attribute ``expr_id``
        of each ``grouped`` entry depends on its references in every row of
        the group (a group join when allowed, else lists of row numbers);
        ``kept`` attributes come from one kept row of the group."""
        for _, refs in grouped:
            self._check_not_deferred(refs)
        extra: list[Column] = []
        rows: tuple[str, ...] = ()
        hidden: tuple[str, ...] = ()
        # Spark plans a pandas aggregate UDF only beside other pandas aggregate
        # UDFs: no list can be collected in the same aggregate.
        pandas_aggregate = "PythonUDAF" in self._node_expressions
        if self._can_group_join(grouping, child, keyed=pandas_aggregate):
            hidden, extra = self._group_join(grouping, grouped, child)
        elif pandas_aggregate:
            raise CaptureError("cannot capture a pandas aggregate UDF here: its input rows cannot be recomputed exactly "
                               "(a limit, sample, window or aggregate below it, or a row-merging operation above it "
                               "in the step); move it to a step of its own")
        else:
            lists: dict[str, str] = {}
            # Terms are set after relisting every entry: a grouping key keeps its input's id.
            new = {expr_id: self._relisted(self._terms_of(refs), lists, child.injective) for expr_id, refs in grouped}
            self._terms.update(new)
            self._deferred.update({expr_id: frozenset() for expr_id in new})
            extra += [self._list_of(r, self._rows[r].scalar).alias(name) for r, name in lists.items()]
            rows = tuple(lists.values())
        rows += self._kept_rows(kept, extra)
        named = [*outputs, *[self._expression(c) for c in extra]]
        agg = self._aggregate_node(self._seq(grouping), self._seq(named), child.plan, self._none
        )
        return _Node(self._plan(self._frame(agg)), rows, hidden)

    def _kept_rows(self, kept: Sequence[Any], columns: list[Column]) -> tuple[str, ...]:
        """Row numbers of the row a Deduplicate keeps: ``first`` of each, which
        advances in lock-step with ``first`` of the values in one aggregate."""
        firsts: dict[str, str] = {}
        for attr in kept:
            expr_id, terms = self._expr_id(attr), set()
            for term in self._terms.get(expr_id, frozenset()):
                if term.rows not in firsts:
                    firsts[term.rows] = self._new_rows(self._rows[term.rows])
                    columns.append(F.first(F.col(term.rows)).alias(firsts[term.rows]))
                terms.add(Term(firsts[term.rows], term.scalar, term.base))
            self._terms[expr_id] = frozenset(terms)
        return tuple(firsts.values())

    def _can_group_join(self, grouping: list[Any], child: _Node, keyed: bool = False) -> bool:
        """Whether this aggregate may defer its provenance to a group join
        (``keyed``: even with grouping keys, whatever the setting)."""
        return (self._allow_groups and (not grouping or keyed or self.group_joins == "always") and not self._merging_above
                and child.stable and child.injective and not child.hidden and all(g.deterministic() for g in grouping))

    def _group_join(self, grouping: list[Any], grouped: list[tuple[int, list[Any]]],
                    child: _Node) -> tuple[tuple[str, ...], list[Column]]:
        """Defer the provenance of ``grouped`` to a join of the output rows with
        ``child``'s rows on the grouping values (see *group joins* above);
        return the hidden columns the aggregate adds and their expressions."""
        n = len(self._groups)
        keys = tuple(f"{HIDDEN_PREFIX}k_{n}_{i}" for i in range(len(grouping)))
        marker = f"{HIDDEN_PREFIX}m_{n}"
        values = [self._column(self._unaliased(g)).alias(k) for g, k in zip(grouping, keys)]
        self._groups.append(GroupJoin(marker, keys, self._frame(child.plan).select(*values, *child.rows), ()))
        # Computed before any is set: a grouping key keeps its input's id.
        deferred = {expr_id: frozenset((n, t) for t in self._terms_of(refs)) for expr_id, refs in grouped}
        self._deferred.update(deferred)
        self._terms.update({expr_id: frozenset() for expr_id in deferred})
        return (*keys, marker), [*values, F.lit(True).alias(marker)]

    @staticmethod
    def _unaliased(expr: Any) -> Any:
        return expr.child() if expr.nodeName() == "Alias" else expr

    def _node_Aggregate(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
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
            grouped.append((self._expr_id(expr.toAttribute()), refs))
        return self._aggregate(grouping, outputs, grouped, children[0])

    def _has_reference_free_aggregate(self, expr: Any) -> bool:
        return any(
            e.nodeName() in ("AggregateExpression", "PythonUDAF") and e.references().isEmpty()
            for e in self._walk_expressions(expr)
        )

    def _node_Distinct(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        attrs = self._items(node.child().output())
        return self._aggregate(attrs, attrs, [(self._expr_id(a), [a]) for a in attrs], children[0])

    def _node_Deduplicate(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        keys = self._items(node.keys())
        key_ids = {self._expr_id(k) for k in keys}
        outputs, grouped, kept = [], [], []
        for attr in self._items(node.child().output()):
            if self._expr_id(attr) in key_ids:
                outputs.append(attr)
                grouped.append((self._expr_id(attr), [attr]))
            else:
                first = self._expression(F.first(self._column(attr)))
                outputs.append(self._alias(
                    first, attr.name(), attr.exprId(), attr.qualifier(),
                    self._none, self._seq([]),
                ))
                kept.append(attr)
        return self._aggregate(keys, outputs, grouped, children[0], kept)

    # black boxes ------------------------------------------------------------------
    def _node_FlatMapGroupsInPandas(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        def rebuilt(function: Any, output: Any, child: Any) -> Any:
            return node.copy(node.groupingAttributes(), function, output, child)

        return self._black_box(node, children[0], rebuilt,
                               lambda f, carried: functools.partial(group_function, f, takes_key(f), carried))

    def _node_MapInPandas(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        def rebuilt(function: Any, output: Any, child: Any) -> Any:
            return node.copy(function, output, child, node.isBarrier(), node.profile())

        return self._black_box(node, children[0], rebuilt, lambda f, carried: functools.partial(partition_function, f, carried))

    def _black_box(self, node: Any, child: _Node, rebuilt: Callable[[Any, Any, Any], Any],
                   wrap: Callable[[Callable[..., Any], Carried], Callable[..., Any]]) -> _Node:
        """A group/partition function node whose function is wrapped to carry
        the row numbers it receives (:mod:`.blackbox`): each output cell
        depends on every cell the function received."""
        operation, eval_type = WRAPPED_FUNCTION_NODES[node.nodeName()]
        udf = node.functionExpr()
        if udf.evalType() != eval_type:
            raise CaptureError(f"cannot capture {operation} with this kind of function (PySpark eval type "
                               f"{udf.evalType()}); pass a function of pandas DataFrames")
        func, schema = self._python_function(udf, operation)
        args = self._references(udf)
        self._check_not_deferred(args)
        lists: dict[str, str] = {}
        terms = self._relisted(self._terms_of(args), lists, child.injective)
        carried = Carried(tuple(lists), tuple(self._rows[r].scalar for r in lists), tuple(lists.values()),
                          tuple(schema.fieldNames()))
        returned = StructType([*schema.fields, *[StructField(name, ArrayType(LongType())) for name in lists.values()]])
        wrapped = pandas_udf(wrap(func, carried), returnType=returned, functionType=eval_type)  # type: ignore[call-overload]
        function = self._expression(wrapped(*[self._column(a) for a in args], *[F.col(r) for r in lists]))
        outputs = self._items(node.output())
        for attr in outputs:
            self._terms[self._expr_id(attr)] = terms
        # Fresh attributes for the lists: a projection's outputs, typed as the wrapper returns them.
        extra = self._items(self._plan(self._frame(child.plan).select(
            *[F.lit(None).cast(ROW_LIST_TYPE).alias(name) for name in lists.values()])).output())
        plan = self._plan(self._frame(rebuilt(function, self._seq([*outputs, *extra]), child.plan)))
        return _Node(plan, tuple(lists.values()), ())

    def _python_function(self, udf: Any, operation: str) -> tuple[Callable[..., Any], StructType]:
        """The user's function and output schema a PythonUDF was made from
        (PySpark pickles them as ``(func, returnType)``)."""
        try:
            command = bytes(udf.func().command().toArray(self._byte_tag))
            func, schema = CloudPickleSerializer().loads(command)
        except Exception as exc:  # a broadcast command (> 1 MB pickled) or another PySpark layout
            raise CaptureError(f"cannot capture {operation}: its function could not be read back from the plan") from exc
        return func, schema

    def _node_Window(self, node: Any, children: list[_Node], state: _Walk) -> _Node:
        child = children[0]
        window_exprs = self._items(node.windowExpressions())
        raw: list[Any] = []
        lists: list[tuple[str, str, bool]] = []  # (raw window column, list column, collects arrays)
        for alias in window_exprs:
            wexpr = alias.child()
            if wexpr.nodeName() != "WindowExpression":
                raise CaptureError(f"cannot capture window expression {alias.toString()}")
            func, spec = wexpr.windowFunction(), wexpr.windowSpec()
            refs = ([a for o in self._items(spec.orderSpec()) for a in self._references(o)]
                    if func.nodeName() in RANK_LIKE else self._references(func))
            self._check_not_deferred(refs)
            mine: dict[str, str] = {}
            self._terms[self._expr_id(alias.toAttribute())] = self._relisted(self._terms_of(refs), mine, child.injective)
            for source, name in mine.items():
                windowed = self._window_expression(
                    self._expression(F.collect_list(source)), spec)
                raw.append(self._expression(self._column(windowed).alias(f"{RAW_PREFIX}{name}")))
                lists.append((f"{RAW_PREFIX}{name}", name, not self._rows[source].scalar))
        # The lists in a Window of their own below the user's (same partitioning,
        # ordering and frames, so no extra shuffle): Spark does not mix pandas
        # window UDFs with other window functions in one node.
        below = node.copy(self._seq(raw), node.partitionSpec(), node.orderSpec(), child.plan, node.hint()) if raw else child.plan
        window = node.copy(self._seq(window_exprs), node.partitionSpec(), node.orderSpec(), below, node.hint())
        windowed = self._plan(self._frame(window))
        kept = [a for a in self._items(windowed.output()) if not a.name().startswith(RAW_PREFIX)]
        finals = [(F.flatten(F.col(r)) if arrays else F.col(r)).alias(name) for r, name, arrays in lists]
        plan = self._plan(self._frame(windowed).select(*[self._column(a) for a in kept], *finals))
        return _Node(plan, child.rows + tuple(name for _, name, _ in lists), child.hidden)


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
