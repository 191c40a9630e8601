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

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.serializers import CloudPickleSerializer
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
from pyspark.sql.types import StructType

from provplug.errors import CaptureError


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
        self._expr_utils = classic.ExpressionUtils
        self._dataset = classic.Dataset
        self._to_expression = getattr(getattr(classic, "ColumnNodeToExpressionConverter$"), "MODULE$")
        self._hidden_tag = catalyst.plans.logical.Project.hiddenOutputTag()
        self._aggregate = catalyst.plans.logical.Aggregate
        self._alias = catalyst.expressions.Alias
        self._window_expression = catalyst.expressions.WindowExpression
        self._array_list = jvm.java.util.ArrayList
        self._to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
        self.none = jvm.scala.Option.apply(None)
        self._byte_tag = jvm.scala.reflect.ClassTag.Byte()

    # -- Scala collections -------------------------------------------------------
    def seq(self, items: Sequence[Any]) -> Any:
        """A Scala Seq of JVM objects."""
        jlist = self._array_list()
        for item in items:
            jlist.add(item)
        return self._to_seq(jlist)

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
        return Column(self._expr_utils.column(expr))

    def expression(self, col: Column) -> Any:
        """A PySpark Column as a (possibly unresolved) Catalyst expression."""
        jc: Any = col._jc  # a classic Column's JVM object (typed as a Column by Column.__getattr__)
        return self._to_expression.apply(jc.node())

    @staticmethod
    def expr_id(attr: Any) -> int:
        """The expression id of an attribute (or named expression)."""
        return int(attr.exprId().id())

    def walk_expressions(self, expr: Any) -> Iterator[Any]:
        """``expr`` and every expression below it."""
        yield expr
        for child in self.items(expr.children()):
            yield from self.walk_expressions(child)

    def expression_names(self, node: Any) -> frozenset[str]:
        """The node names of every expression of plan node ``node``."""
        return frozenset(e.nodeName() for top in self.items(node.expressions()) for e in self.walk_expressions(top))

    def references(self, expr: Any) -> list[Any]:
        """The attributes ``expr`` reads."""
        return self.attrs(expr.references())

    def alias_as(self, expr: Any, attr: Any) -> Any:
        """``expr AS attr``, keeping the attribute's name and expression id."""
        return self._alias(expr, attr.name(), attr.exprId(), attr.qualifier(), self.none, self.seq([]))

    def window_expression(self, function: Any, spec: Any) -> Any:
        return self._window_expression(function, spec)

    # -- plans -----------------------------------------------------------------------
    def frame(self, plan: Any) -> DataFrame:
        """A logical plan as a DataFrame (analyzed anew)."""
        return DataFrame(self._dataset.ofRows(self._session, plan), self.spark)

    @staticmethod
    def plan(frame: DataFrame) -> Any:
        """A DataFrame's analyzed logical plan."""
        return frame._jdf.queryExecution().analyzed()

    def with_children(self, node: Any, children: Sequence[Any]) -> Any:
        """``node`` over other child plans, analyzed."""
        return self.plan(self.frame(node.withNewChildren(self.seq(children))))

    def aggregate(self, grouping: Sequence[Any], outputs: Sequence[Any], child: Any) -> Any:
        """A new Aggregate plan node."""
        return self._aggregate(self.seq(grouping), self.seq(outputs), child, self.none)

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
            raise CaptureError(f"cannot capture {operation}: its function could not be read back from the plan") from exc
        return func, schema

    def built_in_driver(self, logical_rdd: Any, limit: int = 200) -> bool:
        """Whether a LogicalRDD's rows come from the driver (createDataFrame of
        local rows, parallelize): every root of its RDD lineage is a
        ParallelCollectionRDD, and no DataFrame's rows (a SQLExecutionRDD, as
        in ``df.rdd.map(...).toDF()``) lie on the way."""
        pending, seen = [logical_rdd.rdd()], 0
        while pending and seen < limit:
            rdd = pending.pop()
            seen += 1
            kind = rdd.getClass().getSimpleName()
            if kind == "SQLExecutionRDD":
                return False
            deps = self.items(rdd.dependencies())
            if not deps and kind != "ParallelCollectionRDD":
                return False
            pending += [d.rdd() for d in deps]
        return not pending


class PendingFrame(ClassicDataFrame):
    """A DataFrame whose plan is not known yet: a step output whose rows a
    background Spark job is still writing. Its first use waits for the job
    (and raises its error). PySpark's classic DataFrame reaches the JVM only
    through ``_jdf``, so that is the one attribute made to wait."""

    def __init__(self, spark: SparkSession, ready: Callable[[], DataFrame]) -> None:
        self._ready = ready
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
