"""Every use of py4j and Spark's private JVM API by the adapter's plumbing, in
one place, and :class:`PendingFrame`.

PySpark has no public API to rewrite a logical plan, so the rewrite
(:mod:`.rewrite`, :mod:`.rules`) works on the *analyzed* Catalyst plan
through py4j. :class:`Catalyst` looks up the JVM classes it needs once (each
package step of a lookup is a py4j round trip) and converts between the two
sides: Scala sequences and Python lists, Catalyst expressions and PySpark
Columns, logical plans and DataFrames. The rules read plan nodes through the
nodes' own methods (``node.projectList()``, ``join.condition()``, ...). A
Spark upgrade that breaks capture should break here or in a rule that names
the node it reads.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.serializers import CloudPickleSerializer
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
from pyspark.sql.types import StructType, _parse_datatype_json_string

from provplug.errors import CaptureError

from . import naming

logger = logging.getLogger(__name__)

_LEADING_DIGITS = re.compile(r"\d+")
_ATTRIBUTE = "AttributeReference"
_ALIAS = "Alias"
# The expressions that aggregate a group's rows (their class names; a pandas UDAF is a PythonUDAF).
GROUP_AGGREGATES = frozenset({"AggregateExpression", "PythonUDAF"})


def _class_name(json_node: dict[str, Any]) -> str:
    """The simple class name of an expression in a tree's JSON."""
    return str(json_node["class"]).rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def _json_id(json_node: dict[str, Any]) -> int | None:
    expr_id = json_node.get("exprId")
    return int(expr_id["id"]) if isinstance(expr_id, dict) and "id" in expr_id else None


@dataclasses.dataclass(frozen=True)
class _TreeFacts:
    """What an expression tree's JSON (its nodes flattened in pre-order, a
    node's non-child fields nested in it) says about the tree."""

    top: str  # the top expression's class name
    expr_id: int | None  # a named top expression's id (an attribute's, an Alias's)
    references: tuple[int, ...]  # the ids of the attributes among the tree's nodes: what it reads
    renames: int | None  # the attribute an Alias (of aliases) only renames; None: not a rename
    aggregate_reads_nothing: bool = False  # an aggregate function of the tree reads no attribute (count(*))

    @classmethod
    def of(cls, nodes: list[dict[str, Any]]) -> _TreeFacts | None:
        classes = [_class_name(n) for n in nodes]
        references = tuple(dict.fromkeys(_json_id(n) for n, c in zip(nodes, classes, strict=True) if c == _ATTRIBUTE))
        if None in references:  # an attribute the JSON gives no id: ask the JVM
            return None
        aliases = len(classes) - 1
        renames = (
            _json_id(nodes[-1])
            if aliases > 0 and classes[-1] == _ATTRIBUTE and all(c == _ALIAS for c in classes[:-1])
            else None
        )
        reads_nothing = any(
            c in GROUP_AGGREGATES and _ATTRIBUTE not in classes[i : _subtree_end(nodes, i)]
            for i, c in enumerate(classes)
        )
        return cls(classes[0], _json_id(nodes[0]), references, renames, reads_nothing)  # type: ignore[arg-type]


def _subtree_end(nodes: list[dict[str, Any]], start: int) -> int:
    """The index after the last node of the subtree at ``start`` (the JSON
    lists a tree's nodes in pre-order, each with its ``num-children``)."""
    open_slots, end = 1, start
    while open_slots:
        open_slots += int(nodes[end]["num-children"]) - 1
        end += 1
    return end


# A small Java class that reads a tree in one call. ``nodes``: an expression
# tree's nodes in pre-order, each as "<class name without its package>
# <expression id or -> <number of children>" (short: py4j 0.10.9.9 answers a
# reply of more than 8 KB about 40 ms late, Nagle's algorithm meeting delayed
# ACK, and TPC-H q19's filter in full class names is 8.2 KB), what the
# rewrite reads of a tree's JSON at about a tenth of its
# cost (TreeNode.toJSON reflects on every node's constructor: 1.7 s of the 22
# TPC-H queries' rewrites, twice each, against 0.2 s). ``planNodes``: a plan's
# nodes in pre-order, after one text of "<node name> <number of children>"
# lines (asked node by node, three round trips or more a node). Compiled in
# the driver's JVM by Janino, Spark's own code generator, so no jar ships
# with provplug. ``standIn``: the Project that stands in for a leaf over
# another plan (:meth:`Catalyst.standing_in`) in one call, where building it
# column by column takes about fourteen round trips a column; null when a
# column is missing, ambiguous or of another type (then built in Python,
# with its cast or its error). ``seq`` and ``append``: a Scala Seq of up to
# eight objects (the first ``size`` arguments) in one call (py4j passes the
# arguments of one call together, where a Java list takes a call an element).
_TREE_READER_CLASS = "ProvplugTreeReader"
_SEQ_FIRST, _SEQ_MORE = 8, 7  # the reader's seq(...) and append(seq, ...) take at most this many items
_TREE_READER_SOURCE = """
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;

public class ProvplugTreeReader {
  public Object[] planNodes(LogicalPlan plan) {
    java.util.ArrayList nodes = new java.util.ArrayList();
    StringBuilder shape = new StringBuilder();
    collect(plan, nodes, shape);
    Object[] out = new Object[nodes.size() + 1];
    out[0] = shape.toString();
    for (int i = 0; i < nodes.size(); i++) {
      out[i + 1] = nodes.get(i);
    }
    return out;
  }

  private static void collect(LogicalPlan plan, java.util.ArrayList nodes, StringBuilder shape) {
    scala.collection.Seq children = plan.children();
    nodes.add(plan);
    shape.append(plan.nodeName()).append(' ').append(children.size()).append('\\n');
    scala.collection.Iterator it = children.iterator();
    while (it.hasNext()) {
      collect((LogicalPlan) it.next(), nodes, shape);
    }
  }

  public scala.collection.immutable.Seq seq(int size, Object a, Object b, Object c, Object d, Object e,
      Object f, Object g, Object h) {
    return listOf(new Object[] {a, b, c, d, e, f, g, h}, size);
  }

  public scala.collection.immutable.Seq append(scala.collection.immutable.Seq start, int size, Object a, Object b,
      Object c, Object d, Object e, Object f, Object g) {
    return (scala.collection.immutable.Seq) start.appendedAll(listOf(new Object[] {a, b, c, d, e, f, g}, size));
  }

  private static scala.collection.immutable.List listOf(Object[] items, int size) {
    return scala.jdk.javaapi.CollectionConverters.asScala(java.util.Arrays.asList(items).subList(0, size)).toList();
  }

  public LogicalPlan standIn(LogicalPlan leaf, LogicalPlan child) {
    java.util.ArrayList columns = new java.util.ArrayList();
    scala.collection.Iterator wanted = leaf.output().iterator();
    while (wanted.hasNext()) {
      Attribute attr = (Attribute) wanted.next();
      Attribute found = null;
      scala.collection.Iterator have = child.output().iterator();
      while (have.hasNext()) {
        Attribute column = (Attribute) have.next();
        if (column.name().equals(attr.name())) {
          if (found != null) {
            return null;
          }
          found = column;
        }
      }
      if (found == null || !found.dataType().equals(attr.dataType())) {
        return null;
      }
      columns.add(new Alias(found, attr.name(), attr.exprId(), attr.qualifier(), scala.Option.empty(),
          scala.collection.immutable.Nil$.MODULE$));
    }
    return new Project(scala.jdk.javaapi.CollectionConverters.asScala(columns).toList(), child);
  }

  public String nodes(Expression top) {
    StringBuilder out = new StringBuilder();
    walk(top, out);
    return out.toString();
  }

  private static void walk(Expression e, StringBuilder out) {
    scala.collection.Seq children = e.children();
    String name = e.getClass().getName();
    out.append(name, name.lastIndexOf('.') + 1, name.length()).append(' ');
    if (e instanceof NamedExpression) {
      out.append(((NamedExpression) e).exprId().id());
    } else if (e instanceof PlanExpression) {
      out.append(((PlanExpression) e).exprId().id());
    } else {
      out.append('-');
    }
    out.append(' ').append(children.size()).append('\\n');
    scala.collection.Iterator it = children.iterator();
    while (it.hasNext()) {
      walk((Expression) it.next(), out);
    }
  }
}
"""
# One reader per SparkContext (the class stays in its JVM): None where it
# could not be compiled, and the trees' JSON is read instead.
_tree_readers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_tree_readers_lock = threading.Lock()


def _tree_reader(spark: SparkSession) -> Any | None:
    context = spark.sparkContext
    with _tree_readers_lock:
        if context not in _tree_readers:
            _tree_readers[context] = _compiled_tree_reader(spark._jvm)
        return _tree_readers[context]


def _compiled_tree_reader(jvm: Any) -> Any | None:
    try:
        compiler = jvm.org.codehaus.janino.SimpleCompiler()
        compiler.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
        compiler.cook(_TREE_READER_SOURCE)
        # Class.newInstance: py4j passes no empty varargs to getDeclaredConstructor().
        return compiler.getClassLoader().loadClass(_TREE_READER_CLASS).newInstance()
    except Py4JError as exc:  # a Spark without Janino: read the trees' JSON
        logger.info("provplug: reading expression trees as JSON (%s)", str(exc).splitlines()[0])
        return None


def _tree_nodes(text: str) -> list[dict[str, Any]]:
    """The reader's lines as the nodes of a tree's JSON (the fields read of them)."""
    nodes: list[dict[str, Any]] = []
    for line in text.splitlines():
        name, expr_id, children = line.split(" ")
        node: dict[str, Any] = {"class": name, "num-children": int(children)}
        if expr_id != "-":
            node["exprId"] = {"id": int(expr_id)}
        nodes.append(node)
    return nodes


@dataclasses.dataclass(frozen=True)
class Expression:
    """A top expression of a plan node and what its tree's nodes say (read
    by the compiled tree reader, or from the tree's JSON).

    ``kinds`` are the simple class names of every expression of the tree: a
    class name is Catalyst's node name except for the few classes that
    override ``nodeName`` (``MonotonicallyIncreasingID``, higher-order
    functions, ...), whose class names capture's checks use alike. ``facts``
    is None for a tree neither could read: ask the JVM.
    Catalyst's ``references`` of a tree are the attributes among its
    children, which the JSON flattens (a subquery's plan and an outer
    reference's attribute are fields, nested, not children)."""

    jvm: Any
    kinds: frozenset[str]
    facts: _TreeFacts | None


def kinds_of(expressions: Sequence[Expression]) -> frozenset[str]:
    """The kinds of every expression of these trees."""
    return frozenset().union(*[e.kinds for e in expressions])


@dataclasses.dataclass(frozen=True)
class PlanTree:
    """A plan node and its children's trees, as read from the JVM once."""

    node: Any
    children: tuple[PlanTree, ...]

    def leaves(self) -> Iterator[Any]:
        """The leaf nodes, left to right."""
        if not self.children:
            yield self.node
        for child in self.children:
            yield from child.leaves()


def threads_pinned() -> bool:
    """Whether each Python thread talks to a JVM thread of its own (PySpark's
    pinned-thread mode, the default; ``PYSPARK_PIN_THREAD=false`` turns it
    off), so that a local property set in one thread reaches only its jobs."""
    from py4j.clientserver import ClientServer
    from pyspark import SparkContext

    return isinstance(SparkContext._gateway, ClientServer)


def _padded(items: list[Any], width: int) -> list[Any]:
    """How many of ``items`` count, then the items padded with None to ``width``
    (the reader's seq and append take a fixed number of arguments)."""
    return [len(items), *items, *[None] * (width - len(items))]


def _backticked(name: str) -> str:
    """A column name quoted for ``col``: any name, dots and backticks included."""
    return "`" + name.replace("`", "``") + "`"


class Catalyst:
    """Catalyst's JVM classes for one SparkSession, and conversions between
    Python and JVM values."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark._jvm
        if jvm is None:
            raise CaptureError("provplug captures with a classic SparkSession (one with a JVM), not Spark Connect")
        self.spark = spark
        self._session = spark._jsparkSession
        classic = jvm.org.apache.spark.sql.classic
        catalyst = jvm.org.apache.spark.sql.catalyst
        # Static methods kept as py4j members: each lookup on a class is a round trip of its own.
        self._column_of = classic.ExpressionUtils.column
        self._of_rows = classic.Dataset.ofRows
        functions = jvm.org.apache.spark.sql.functions
        self._col = functions.col
        self._collect_list = functions.collect_list
        self._flatten = functions.flatten
        self._to_expression = getattr(getattr(classic, "ColumnNodeToExpressionConverter$"), "MODULE$")
        self._hidden_tag = catalyst.plans.logical.Project.hiddenOutputTag()
        self._aggregate = catalyst.plans.logical.Aggregate
        self._project = catalyst.plans.logical.Project
        self._unresolved = catalyst.analysis.UnresolvedAttribute.quoted
        self._alias = catalyst.expressions.Alias
        self._window_expression = catalyst.expressions.WindowExpression
        self._array_list = jvm.java.util.ArrayList
        self._to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
        self.none = jvm.scala.Option.apply(None)
        self._option_of = jvm.scala.Option.apply
        self._byte_tag = jvm.scala.reflect.ClassTag.Byte()
        # InlineCTE(alwaysInline, keepDanglingRelations, isAnalysis): every CTE reference inlined.
        self._inline_cte = catalyst.optimizer.InlineCTE(True, False, False)
        self._tree_reader = _tree_reader(spark)
        self._names: dict[str, str] = {}  # py4j object id -> Catalyst node name (see node_name)
        self._hadoop_path: Any = None  # Hadoop's Path class, looked up on first use
        self._qualified: dict[str, str] = {}  # path -> qualified (see qualified_path)

    # -- Scala collections -------------------------------------------------------
    def seq(self, items: Sequence[Any]) -> Any:
        """A Scala Seq of JVM objects: by the compiled reader in a round trip
        for up to eight items and one more for each seven after (else one an
        item, added to a Java list)."""
        reader = self._tree_reader
        if reader is None:
            jlist = self._array_list()
            for item in items:
                jlist.add(item)
            return self._to_seq(jlist)
        items = list(items)
        made = reader.seq(*_padded(items[:_SEQ_FIRST], _SEQ_FIRST))
        for start in range(_SEQ_FIRST, len(items), _SEQ_MORE):
            made = reader.append(made, *_padded(items[start : start + _SEQ_MORE], _SEQ_MORE))
        return made

    def some(self, value: Any) -> Any:
        """A Scala Option holding ``value``."""
        return self._option_of(value)

    @staticmethod
    def items(jseq: Any) -> list[Any]:
        """The members of a Scala Seq."""
        return [jseq.apply(i) for i in range(jseq.size())]

    def attrs(self, jset_or_seq: Any) -> list[Any]:
        """The attributes of an AttributeSet or a Seq of them."""
        return self.items(jset_or_seq.toSeq()) if hasattr(jset_or_seq, "toSeq") else self.items(jset_or_seq)

    # -- expressions ---------------------------------------------------------------
    def column(self, expr: Any) -> Column:
        """A Catalyst expression as a PySpark Column (its node semantics reused)."""
        return Column(self._column_of(expr))

    def col(self, name: str) -> Column:
        """``F.col(name)`` in one py4j round trip. (PySpark's own records its
        Python call site in the JVM first: about ten round trips a column.)"""
        return Column(self._col(name))

    def collect_list(self, name: str, flatten: bool = False) -> Column:
        """``F.collect_list(name)`` (with ``flatten``: of lists, flattened) in
        one py4j round trip a function, as :meth:`col`; an aggregate collects
        one list per row-number column."""
        listed = self._collect_list(self._col(name))
        return Column(self._flatten(listed) if flatten else listed)

    def expression(self, col: Column) -> Any:
        """A PySpark Column as a (possibly unresolved) Catalyst expression."""
        jc: Any = col._jc  # a classic Column's JVM object (typed as a Column by Column.__getattr__)
        return self._to_expression.apply(jc.node())

    def node_name(self, node: Any) -> str:
        """``node.nodeName()`` of a plan node or expression, asked of the JVM
        once per object: the traversal and several rules look at the same
        node's kind, each time a py4j round trip. (py4j never reuses an
        object id, and Catalyst trees are immutable.)"""
        key = str(node._target_id)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = str(node.nodeName())
        return name

    @staticmethod
    def expr_id(attr: Any) -> int:
        """The expression id of an attribute (or named expression).

        Read from its text, which Catalyst ends with ``#<id>`` (``name#12L``,
        ``expr AS name#12``; a type or watermark suffix may follow): one py4j
        round trip where ``exprId().id()`` takes two, and a step's rewrite asks
        hundreds of times."""
        _, hash_sign, tail = str(attr.toString()).rpartition("#")
        digits = _LEADING_DIGITS.match(tail) if hash_sign else None
        return int(digits.group()) if digits else int(attr.exprId().id())

    def walk_expressions(self, expr: Any) -> Iterator[Any]:
        """``expr`` and every expression below it."""
        yield expr
        for child in self.items(expr.children()):
            yield from self.walk_expressions(child)

    def expressions(self, node: Any) -> list[Expression]:
        """The expressions of plan node ``node`` (``node.expressions()``), each
        with what its tree's nodes say (:meth:`read_tree`)."""
        return [self.read_tree(top) for top in self.items(node.expressions())]

    def read_tree(self, expr: Any) -> Expression:
        """``expr`` with its tree's nodes, read in one py4j round trip (where
        asking its kinds, ids and references of the JVM takes a few per node
        of the tree, and a step's rewrite asks thousands): by the compiled
        reader, else as the tree's JSON."""
        if self._tree_reader is None:
            return self.read_tree_json(expr)
        try:
            nodes = _tree_nodes(str(self._tree_reader.nodes(expr)))
        except Py4JJavaError:  # a node whose children cannot be listed: as the JSON path does
            return self.read_tree_json(expr)
        return Expression(expr, frozenset(_class_name(n) for n in nodes), _TreeFacts.of(nodes))

    def read_tree_json(self, expr: Any) -> Expression:
        """``expr`` with what its tree's JSON says."""
        try:
            nodes = json.loads(expr.toJSON())
        except Py4JJavaError:  # a tree Catalyst cannot render as JSON: walk it
            kinds = frozenset(str(e.getClass().getSimpleName()) for e in self.walk_expressions(expr))
            return Expression(expr, kinds, None)
        return Expression(expr, frozenset(_class_name(n) for n in nodes), _TreeFacts.of(nodes))

    def references(self, expr: Any) -> list[Any]:
        """The attributes ``expr`` reads."""
        return self.attrs(expr.references())

    def alias_as(self, expr: Any, attr: Any) -> Any:
        """``expr AS attr``, keeping the attribute's name and expression id."""
        return self._alias(expr, attr.name(), attr.exprId(), attr.qualifier(), self.none, self.seq([]))

    def window_expression(self, function: Any, spec: Any) -> Any:
        return self._window_expression(function, spec)

    # -- Python functions over Arrow batches -----------------------------------------
    @staticmethod
    def arrow_map(func: Callable[..., Any], schema: StructType) -> Any:
        """The Python UDF ``mapInArrow(func, schema)`` makes, made once to map
        many frames (:meth:`map_in_arrow`)."""
        from pyspark.sql.udf import UserDefinedFunction
        from pyspark.util import PythonEvalType

        return UserDefinedFunction(func, returnType=schema, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)

    def map_in_arrow(self, frame: DataFrame, udf: Any) -> DataFrame:
        """``frame.mapInArrow`` of an :meth:`arrow_map` UDF: its JVM function
        made on first use only, and a round trip a column (PySpark's makes
        both anew each call: about 30 round trips, plus ten a column)."""
        columns = self.seq([self._col(_backticked(name)) for name in frame.columns])
        jdf: Any = frame._jdf
        return DataFrame(jdf.mapInArrow(udf._judf.apply(columns), False, None), self.spark)

    # -- plans -----------------------------------------------------------------------
    def frame(self, plan: Any) -> DataFrame:
        """A logical plan as a DataFrame (analyzed anew)."""
        return DataFrame(self._of_rows(self._session, plan), self.spark)

    @staticmethod
    def plan(frame: DataFrame) -> Any:
        """A DataFrame's analyzed logical plan."""
        return frame._jdf.queryExecution().analyzed()

    def inlined(self, plan: Any) -> Any:
        """``plan`` with every CTE reference (``WITH a AS (...)``) replaced by
        the plan it names, as Spark's optimizer does: a reference then has the
        provenance of its definition (the same plan, new expression ids per
        reference). A plan without CTE comes back as it is."""
        return self._inline_cte.apply(plan)

    def over(self, node: Any, children: Sequence[Any]) -> Any:
        """``node`` over other child plans, not analyzed (see :func:`with_children`)."""
        return node.withNewChildren(self.seq(children))

    def with_children(self, node: Any, children: Sequence[Any]) -> Any:
        """``node`` over other child plans, analyzed."""
        return self.plan(self.frame(self.over(node, children)))

    def project(self, expressions: Any, carried: Sequence[str], child: Any, known: Mapping[str, Any]) -> Any:
        """A Project of the Scala Seq ``expressions`` (resolved, reused as
        they are) and the columns named ``carried`` over ``child``: ``select``
        of them, without a Column made per expression. When ``known`` holds
        the attribute of every carried column, the Project is resolved as
        built and left unanalyzed (the analysis of the next node that needs
        one covers it, and sets the attributes' nullability as the plan below
        gives it); else it is analyzed, which resolves the names."""
        if all(name in known for name in carried):
            return self._project(expressions.appendedAll(self.seq([known[n] for n in carried])), child)
        carried_columns = self.seq([self._unresolved(name) for name in carried])
        return self.plan(self.frame(self._project(expressions.appendedAll(carried_columns), child)))

    def selection(self, attributes: Sequence[Any], names: Sequence[str], child: Any) -> DataFrame:
        """``attributes`` (resolved, as they are) and the columns ``names``
        of ``child``, as a DataFrame: one Project, analysed once."""
        columns = [*attributes, *[self._unresolved(name) for name in names]]
        return self.frame(self._project(self.seq(columns), child))

    def aggregate(self, grouping: Sequence[Any], outputs: Sequence[Any], child: Any) -> Any:
        """A new Aggregate plan node."""
        return self._aggregate(self.seq(grouping), self.seq(outputs), child, self.none)

    def tree(self, plan: Any) -> PlanTree:
        """``plan``'s nodes and children, read once (see :meth:`replace_leaves`),
        with their node names (:meth:`node_name`): by the compiled reader in one
        round trip and one a node, else asked node by node."""
        if self._tree_reader is None:
            return self._tree_by_calls(plan)
        found = self._tree_reader.planNodes(plan)
        shape = [line.rsplit(" ", 1) for line in str(found[0]).splitlines()]
        nodes = [plan] + [found[i + 1] for i in range(1, len(shape))]  # a JavaArray read: no argument conversion
        for node, (name, _) in zip(nodes, shape, strict=True):
            self._names[str(node._target_id)] = name
        counts = iter([int(n) for _, n in shape])
        at = iter(nodes)

        def subtree() -> PlanTree:
            node, count = next(at), next(counts)
            return PlanTree(node, tuple(subtree() for _ in range(count)))

        return subtree()

    def _tree_by_calls(self, plan: Any) -> PlanTree:
        return PlanTree(plan, tuple(self._tree_by_calls(c) for c in self.items(plan.children())))

    def replace_leaves(self, plan: Any | PlanTree, replacement: Callable[[Any], Any | None]) -> Any:
        """``plan`` with every leaf for which ``replacement`` returns a plan
        replaced by it (a subtree without a replaced leaf is kept as it is)."""
        tree = plan if isinstance(plan, PlanTree) else self.tree(plan)
        if not tree.children:
            new = replacement(tree.node)
            return tree.node if new is None else new
        rebuilt = [self.replace_leaves(c, replacement) for c in tree.children]
        if all(n is c.node for n, c in zip(rebuilt, tree.children, strict=True)):
            return tree.node
        return tree.node.withNewChildren(self.seq(rebuilt))

    def standing_in(self, leaf: Any, frame: DataFrame, filler: dict[str, Column] | None = None) -> Any:
        """A plan over ``frame`` with exactly ``leaf``'s output attributes
        (names, types, expression ids), so that it can replace ``leaf`` under
        the plan nodes that reference them. A column is taken from ``frame``
        by name (cast to the leaf's type when they differ), else from
        ``filler``; a leaf column found in neither fails with a CaptureError."""
        if not filler and self._tree_reader is not None:
            made = self._tree_reader.standIn(leaf, self.plan(frame))
            if made is not None:
                return self.plan(self.frame(made))
        available = {f.name: f.dataType for f in frame.schema.fields}
        columns = []
        for attr in self.items(leaf.output()):
            name = attr.name()
            wanted = _parse_datatype_json_string(attr.dataType().json())
            if name in available:
                col = self.col(_backticked(name))
                col = col if available[name] == wanted else col.cast(wanted)
            elif filler is not None and name in filler:
                col = filler[name].cast(wanted)
            else:
                raise CaptureError(
                    f"cannot stand in for {leaf.nodeName()}: column {name!r} is not among {sorted(available)}"
                )
            columns.append(self.column(self.alias_as(self.expression(col), attr)))
        return self.plan(frame.select(*columns))

    @staticmethod
    def relation(leaf: Any) -> tuple[str, str] | None:
        """(key, name) of a leaf that reads files or a catalog table: the key
        ``table:<qualified name>`` or ``path:<root paths>`` identifies what
        it reads; the name is the table's, or the readable alias of its paths
        (:func:`.naming.alias`: a glob Spark expanded names its folder). None
        for any other leaf."""
        if leaf.nodeName() != "LogicalRelation":
            return None
        catalog = leaf.catalogTable()
        if catalog.isDefined():
            identifier = catalog.get().identifier()
            return "table:" + str(identifier.unquotedString()), str(identifier.table())
        try:
            paths = [str(p.toString()) for p in Catalyst.items(leaf.relation().location().rootPaths())]
        except Exception:  # py4j: not a file relation (JDBC, in-memory, ...)
            return None
        if not paths:
            return None
        return path_key(paths), naming.alias(naming.paths_identity(paths))

    def qualified_path(self, path: str) -> str:
        """``path`` as Spark's file relations name it (scheme, absolute).

        Asked of Hadoop once per path: a write's path is qualified to name
        it and again to link later reads to it, and the JVM's working
        directory, against which a relative path is qualified, does not
        change (Python's ``os.chdir`` does not move it)."""
        qualified = self._qualified.get(path)
        if qualified is None:
            if self._hadoop_path is None:  # looked up once: each package step is a round trip
                self._hadoop_path = self.spark._jvm.org.apache.hadoop.fs.Path  # type: ignore[union-attr]
            hadoop_path = self._hadoop_path(path)
            fs = hadoop_path.getFileSystem(self.spark._jsc.hadoopConfiguration())
            qualified = self._qualified[path] = str(fs.makeQualified(hadoop_path).toString())
        return qualified

    def copy_with(self, node: Any, **changed: Any) -> Any:
        """A copy of a Catalyst case class (plan node, expression) with the
        named constructor fields changed."""
        fields = [str(node.productElementName(i)) for i in range(node.productArity())]
        unknown = set(changed) - set(fields)
        if unknown:
            raise CaptureError(f"internal: {node.nodeName()} has no field {sorted(unknown)} (fields {fields})")
        return node.copy(*[changed[f] if f in changed else node.productElement(i) for i, f in enumerate(fields)])

    def outer_reference(self, attr: Any) -> Any:
        """A reference from a subquery to ``attr`` of the plan around it."""
        jvm = self.spark._jvm
        assert jvm is not None
        return jvm.org.apache.spark.sql.catalyst.expressions.OuterReference(attr)

    def python_function_of(self, command: Any) -> Any:
        """A JVM PythonFunction running the picklable ``command`` (a UDTF
        class), as PySpark makes one."""
        from pyspark.sql.udf import _wrap_function

        return _wrap_function(self.spark.sparkContext, command)

    def data_type(self, json: str) -> Any:
        """A JVM DataType from its JSON form."""
        jvm = self.spark._jvm
        assert jvm is not None
        return jvm.org.apache.spark.sql.types.DataType.fromJson(json)

    def udtf_class(self, udtf: Any) -> type:
        """The user's class a PythonUDTF runs (PySpark pickles the class itself)."""
        try:
            handler = CloudPickleSerializer().loads(bytes(udtf.func().command().toArray(self._byte_tag)))
        except Exception as exc:  # a broadcast command (> 1 MB pickled) or another PySpark layout
            raise CaptureError(
                f"cannot capture Python UDTF {udtf.name()}: its class could not be read back from the plan"
            ) from exc
        if not isinstance(handler, type):
            raise CaptureError(f"cannot capture Python UDTF {udtf.name()}: its handler is not a class")
        return handler

    def hidden_output(self, project: Any) -> list[Any]:
        """The attributes a Project hides but lets its parents resolve (the
        other side's key of a ``using`` join); none for other Projects."""
        hidden = project.getTagValue(self._hidden_tag)
        return [] if hidden.isEmpty() else self.items(hidden.get())

    def python_function(self, udf: Any, operation: str) -> tuple[Callable[..., Any], StructType]:
        """The user's function and output schema a PythonUDF was made from
        (PySpark pickles them as ``(func, returnType)``)."""
        try:
            command = bytes(udf.func().command().toArray(self._byte_tag))
            func, schema = CloudPickleSerializer().loads(command)
        except Exception as exc:  # a broadcast command (> 1 MB pickled) or another PySpark layout
            raise CaptureError(
                f"cannot capture {operation}: its function could not be read back from the plan"
            ) from exc
        return func, schema

    def built_in_driver(self, logical_rdd: Any) -> bool:
        """Whether a LogicalRDD's rows come from the driver (createDataFrame of
        local rows, parallelize, ``spark.read.json`` of parallelized strings):
        every root of its RDD lineage is a ParallelCollectionRDD, and no Python
        function reads a DataFrame's rows on the way (see
        :meth:`rdd_of_frames`). A DataFrame computed inside the lineage from
        driver rows alone (the JSON parse of ``read.json``) is rows built in
        the driver too."""
        steps = list(_rdd_lineage(logical_rdd))
        return bool(steps) and all(
            not (kind == "SQLExecutionRDD" and python_above) and (has_deps or kind == "ParallelCollectionRDD")
            for kind, has_deps, python_above in steps
        )

    @staticmethod
    def rdd_of_frames(logical_rdd: Any) -> bool:
        """Whether Python RDD functions computed a LogicalRDD's rows from a
        DataFrame's rows (``df.rdd.map(...).toDF()``): a PythonRDD lies above
        a SQLExecutionRDD (the rows of a DataFrame) in its RDD lineage."""
        return any(kind == "SQLExecutionRDD" and above for kind, _, above in _rdd_lineage(logical_rdd))


RDD_LINEAGE_LIMIT = 200  # RDDs looked at in a LogicalRDD's lineage; longer lineages are not built in the driver


def _rdd_lineage(logical_rdd: Any) -> Iterator[tuple[str, bool, bool]]:
    """(class name, has dependencies, a Python function lies above it) of
    each RDD in a LogicalRDD's lineage; a lineage longer than
    RDD_LINEAGE_LIMIT ends with ("", False, False) (an unknown root)."""
    pending: list[tuple[Any, bool]] = [(logical_rdd.rdd(), False)]
    for _ in range(RDD_LINEAGE_LIMIT):
        if not pending:
            return
        rdd, python_above = pending.pop()
        kind = rdd.getClass().getSimpleName()
        deps = Catalyst.items(rdd.dependencies())
        yield kind, bool(deps), python_above
        above = python_above or kind == "PythonRDD"
        pending += [(d.rdd(), above) for d in deps]
    if pending:
        yield "", False, False


def path_key(paths: Sequence[str]) -> str:
    """The key of a file dataset read from (or written to) the qualified ``paths``."""
    return "path:" + "|".join(sorted(p.rstrip("/") for p in paths))


class PendingFrame(ClassicDataFrame):
    """A DataFrame whose plan is looked up on every use: a table of a
    capture run, which reads the run's staged rows while the run lasts (a
    step output's first use waits for the background job writing them, and
    raises its error) and, once the run has ended, a plan that no longer
    depends on them (see :meth:`.session.SparkCaptureSession.close`).
    PySpark's classic DataFrame reaches the JVM only through ``_jdf``, so
    that is the one attribute looked up."""

    def __init__(self, spark: SparkSession, ready: Callable[[], DataFrame], table_id: int | None = None) -> None:
        self._ready = ready
        self.table_id = table_id  # the run's table this DataFrame is
        super().__init__(None, spark)  # no JVM DataFrame yet: _jdf waits for it

    @property
    def _jdf(self) -> Any:
        return self._ready()._jdf

    @_jdf.setter
    def _jdf(self, value: Any) -> None:
        if value is not None:
            raise AttributeError("a pending step output's plan is set by its writer job")

    # PySpark caches these with functools.cached_property, which on Python
    # < 3.12 holds ONE lock for every DataFrame while computing: waiting for
    # the job inside it would block the writer thread's own schema lookups.
    @property
    def schema(self) -> Any:
        return self._ready().schema

    @property
    def rdd(self) -> Any:
        return self._ready().rdd


# -- SQL writes (:mod:`.sqlwrites`) ------------------------------------------------------
# The parsed (unresolved) commands of the SQL statements that write a query's rows.
SQL_WRITES = ("InsertIntoStatement", "CreateTableAsSelect", "ReplaceTableAsSelect", "InsertIntoDir")


def parsed_statement(spark: SparkSession, text: str) -> Any | None:
    """``text`` parsed by the session's own SQL parser; None when it does not
    parse (``spark.sql`` then reports the error as usual)."""
    try:
        return spark._jsparkSession.sessionState().sqlParser().parsePlan(text)
    except Exception:  # py4j: Spark's ParseException, raised again by spark.sql itself
        return None


def sql_writes(plan: Any) -> list[Any]:
    """The write commands in a parsed statement, top first."""
    found = [plan] if plan.nodeName() in SQL_WRITES else []
    for child in Catalyst.items(plan.children()):
        found += sql_writes(child)
    return found


def sql_write_target(command: Any) -> tuple[str, bool]:
    """(the table a SQL write writes, True) or (the directory, False)."""
    kind = command.nodeName()
    if kind == "InsertIntoStatement":
        return str(command.table().tableName()), True
    if kind == "InsertIntoDir":
        location = command.storage().locationUri()
        return (str(location.get().toString()) if location.isDefined() else "a directory"), False
    return ".".join(Catalyst.items(command.name().nameParts())), True


def sql_write_query(command: Any) -> Any:
    """The query whose rows a SQL write writes (a parsed plan)."""
    return command.child() if command.nodeName() == "InsertIntoDir" else command.query()


def skipped_sql_write(spark: SparkSession, command: Any) -> bool:
    """``CREATE TABLE IF NOT EXISTS ... AS`` over a table that exists: it writes nothing."""
    if command.nodeName() != "CreateTableAsSelect" or not command.ignoreIfExists():
        return False
    return bool(spark.catalog.tableExists(sql_write_target(command)[0]))


def sql_write_over(spark: SparkSession, command: Any, rows: DataFrame) -> DataFrame:
    """Run the SQL write ``command`` with ``rows`` in place of its query, as
    ``spark.sql`` runs it (a command runs when its Dataset is made)."""
    query = sql_write_query(command)
    children = [Catalyst.plan(rows) if c is query or c.equals(query) else c for c in Catalyst.items(command.children())]
    catalyst = Catalyst(spark)
    return catalyst.frame(command.withNewChildren(catalyst.seq(children)))


def query_frame(spark: SparkSession, query: Any) -> DataFrame:
    """A parsed query as a DataFrame (analyzed, not run)."""
    return Catalyst(spark).frame(query)


def positional_insert_columns(spark: SparkSession, command: Any) -> list[str] | None:
    """The columns of the table an ``INSERT`` without a column list fills by
    position (its query's columns go into them in order); None otherwise."""
    if command.nodeName() != "InsertIntoStatement" or command.byName() or not command.userSpecifiedCols().isEmpty():
        return None
    try:
        return list(spark.table(sql_write_target(command)[0]).columns)
    except Exception:  # not a table Spark can read back (the statement reports its own errors)
        return None


def path_exists(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` exists on its (Hadoop) filesystem, as Spark's writer checks it."""
    jvm = spark._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return bool(hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()).exists(hadoop_path))
