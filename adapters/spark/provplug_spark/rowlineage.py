"""Row lineage in the rewrite: which input rows each output row needs, and
how they combine (:mod:`provplug.ingest.rowlineage`, docs/capture-semantics.md).

Beside the row-number columns the cell triples use, every rewritten node
carries its :class:`Members`: the row's members (sets of input rows used
jointly) as columns of the row. A row that merges no rows has one member,
its *flat* slots (one row-number column per input table read, null where
the row has none: another union branch, a null-padded outer-join side). A
row-merging node (aggregate, distinct, dropDuplicates) collects its child's
members into one *group* column, an array with one element per member (a
struct of row numbers, or the row number itself when a member has one
slot, so that a one-table aggregate shares the list its cells already
collect). A row's members are the group's elements, each joined with the
flat slots (a null or empty group: the flat slots alone). An aggregate
whose members go through a group join (:mod:`.groupjoin`) is *deferred*:
the group join writes its rows' records.

:class:`RowFacts` gathers, while the rules run, what the op's
:class:`~provplug.rowrules.OpRowRules` say: the value rule of each
attribute (copy of an input cell, aggregate over one), the input columns
that decide existence, and why existence is opaque when it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from provplug import ids
from provplug.rowrules import ColumnRule

if TYPE_CHECKING:
    from ._jvm import Catalyst
    from .terms import Term

# "false": capture no row lineage (no member columns, records or rules), e.g.
# to measure its cost side by side; anything else (default): capture it.
ROW_LINEAGE_CONF = "spark.provplug.rowLineage"
# Catalyst aggregate functions what-if can recompute, by name.
AGGREGATE_FUNCTIONS = {"Sum": "sum", "Average": "avg", "Min": "min", "Max": "max"}
SUBQUERY_EXPRESSIONS = {"Exists", "ListQuery", "InSubquery"}
# Also an opaque reason, so that a rewrite that reads only ``reasons`` (not
# :attr:`RowFacts.existence`) records a global aggregate as opaque, never exact.
ONE_ROW_REASON = "a global aggregate (one row even with no input rows)"


@dataclasses.dataclass(frozen=True)
class Slot:
    """One input row of a member: a bigint column (flat) or struct field
    (in a group) holding its row number, null when the member has none."""

    column: str
    table_id: int
    optional: bool  # the null-padded side of an outer join


@dataclasses.dataclass(frozen=True)
class Deferred:
    """Members held by group join ``group`` (its rows carry its marker)."""

    group: int
    optional: bool


@dataclasses.dataclass(frozen=True)
class Members:
    """How a rewritten node's rows hold their members (see the module docstring)."""

    flat: tuple[Slot, ...] = ()
    group: str | None = None  # array column, one element per member
    grouped: tuple[Slot, ...] = ()  # the slots of the group's elements (one: the element is the row number)
    deferred: tuple[Deferred, ...] = ()
    empty: bool = False  # a member may hold no input row (rows built inside the step)
    one_row: bool = False  # a global aggregate's row: it exists with no member left

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a plan above must carry for them."""
        return tuple(s.column for s in self.flat) + ((self.group,) if self.group else ())

    @property
    def tables(self) -> set[int]:
        return {s.table_id for s in (*self.flat, *self.grouped)}

    def padded(self) -> Members:
        """The members as the null-padded side of an outer join."""
        return Members(
            tuple(dataclasses.replace(s, optional=True) for s in self.flat),
            self.group,
            tuple(dataclasses.replace(s, optional=True) for s in self.grouped),
            tuple(dataclasses.replace(d, optional=True) for d in self.deferred),
            self.empty,
            self.one_row,
        )


@dataclasses.dataclass(frozen=True)
class MemberLayout:
    """What the writer needs to turn a batch's member columns into records."""

    flat: tuple[Slot, ...]
    group: str | None
    grouped: tuple[Slot, ...]  # field names in ``Slot.column``; one slot: the element itself
    markers: tuple[str, ...]  # rows with one of these non-null are written by their group join


@dataclasses.dataclass(frozen=True)
class PairLayout:
    """What a group join's writer needs: each joined row is one member."""

    member: Slot  # the member's input row (the aggregate's child row)
    flat: tuple[Slot, ...]  # the output row's flat slots, the same for every member


def enabled(spark: SparkSession) -> bool:
    """Whether the session's captures record row lineage (:data:`ROW_LINEAGE_CONF`)."""
    return (spark.conf.get(ROW_LINEAGE_CONF, "true") or "true").lower() != "false"


# -- member columns in Spark ---------------------------------------------------------------
def _element(x: Column, slots: Sequence[Slot]) -> list[Column]:
    """The slot columns of group element ``x``."""
    if len(slots) == 1:
        return [x.alias(slots[0].column)]
    return [x.getField(s.column).alias(s.column) for s in slots]


def _nulls(slots: Iterable[Slot]) -> list[Column]:
    return [F.lit(None).cast("bigint").alias(s.column) for s in slots]


def _packed(fields: list[Column], count: int) -> Column:
    """One member element: the row number itself for one slot, else a struct."""
    return fields[0] if count == 1 else F.struct(*fields)


def member_array(members: Members, slots: Sequence[Slot]) -> Column:
    """The row's members as an array with one element per member, each
    holding ``slots`` (a superset of the row's own; the others null)."""
    own = {s.column for s in members.flat}
    names = [g.column for g in members.grouped]

    def element(x: Column | None) -> Column:
        parts = dict(zip(names, _element(x, members.grouped), strict=True)) if x is not None else {}
        fields = [
            parts[s.column]
            if s.column in parts
            else F.col(s.column).alias(s.column)
            if s.column in own
            else F.lit(None).cast("bigint").alias(s.column)
            for s in slots
        ]
        return _packed(fields, len(slots))

    if members.group is None:
        return F.array(element(None))
    group = F.col(members.group)
    # Elements already holding exactly ``slots``, in order, are used as they are:
    # a transform would rebuild each one, uncompiled (Spark runs lambdas interpreted).
    elements = group if names == [s.column for s in slots] else F.transform(group, element)
    return F.when(F.coalesce(F.size(group), F.lit(0)) > 0, elements).otherwise(F.array(element(None)))


def product(left: Members, right: Members, name: str) -> Column:
    """The group of a join of two grouped sides: every pair of members (a
    side with no member: the other side's members alone)."""
    a, b = F.col(left.group or ""), F.col(right.group or "")

    def pair(x: Column | None, y: Column | None) -> Column:
        fields = (_element(x, left.grouped) if x is not None else _nulls(left.grouped)) + (
            _element(y, right.grouped) if y is not None else _nulls(right.grouped)
        )
        return F.struct(*fields)

    has_a, has_b = F.coalesce(F.size(a), F.lit(0)) > 0, F.coalesce(F.size(b), F.lit(0)) > 0
    both = F.flatten(F.transform(a, lambda x: F.transform(b, lambda y: pair(x, y))))
    return (
        F.when(has_a & has_b, both)
        .when(has_a, F.transform(a, lambda x: pair(x, None)))
        .when(has_b, F.transform(b, lambda y: pair(None, y)))
        .alias(name)
    )


def collected(child: Members, lists: dict[str, str], name: str, jvm: Catalyst) -> tuple[Members, Column | None]:
    """The members of a group of ``child`` rows: every member of every row
    (``lists``: row column -> its list already collected for the cells).
    Returns the new members and the aggregate column to add (None: shared)."""
    if child.group is None and len(child.flat) == 1:
        slot = child.flat[0]
        if slot.column in lists:  # the cells' list of the one table is the member list
            return Members((), lists[slot.column], (slot,), (), child.empty), None
        return Members((), name, (slot,), (), child.empty), jvm.collect_list(slot.column).alias(name)
    slots = (*child.grouped, *child.flat)
    if child.group is None:
        column = F.collect_list(_packed([jvm.col(s.column) for s in child.flat], len(slots))) if slots else None
    else:
        column = F.flatten(F.collect_list(member_array(child, slots)))
    if column is None:  # members hold no input row
        return Members(empty=child.empty), None
    return Members((), name, slots, (), child.empty), column.alias(name)


@dataclasses.dataclass(frozen=True)
class MemberField:
    """A list an aggregate collects for cells that its member list also
    holds: the same row numbers are one field of the member elements (the
    writer reads them there, and Spark prunes the list the plan no longer
    needs: one list shuffled and handed to Python instead of one a table)."""

    group: str  # the member list column
    field: str | None  # the field of its elements (None: an element is the row number)
    exact: bool  # each number as often as in the list (else the same numbers, some repeated)


def member_fields(
    child: Members, members: Members, lists: dict[str, str], known: dict[str, MemberField]
) -> dict[str, MemberField]:
    """The lists (row column -> list column, of one aggregate over ``child``
    rows collecting ``members``) that are fields of the members' elements;
    ``known``: those of the lists below."""
    if members.group is None:
        return {}
    names = [s.column for s in members.grouped]
    flat = {s.column for s in child.flat}
    found = {}
    for rows, listed in lists.items():
        if listed == members.group:
            continue  # the member list itself (one table)
        below = known.get(rows)
        if rows in flat:
            # A row's own slot is in each of its members' elements: once a row
            # when its members are the row itself, else once a member.
            field, exact = rows, child.group is None
        elif rows == child.group and len(child.grouped) == 1:
            # The child's member list of one table (its cells' list too): its elements are that slot.
            field, exact = child.grouped[0].column, True
        elif below is not None and below.group == child.group and child.group is not None:
            # A list of lists: the child's member elements are packed as they are.
            field = below.field if below.field is not None else child.grouped[0].column
            exact = below.exact
        else:
            continue
        if field in names:
            found[listed] = MemberField(members.group, None if len(names) == 1 else field, exact)
    return found


# -- what the op's rules say -------------------------------------------------------------------
class RowFacts:
    """Row-rule facts gathered over one rewrite of a step output."""

    def __init__(self) -> None:
        self.values: dict[int, ColumnRule] = {}  # expression id -> copy / aggregate rule
        self.row_dependent: set[int] = set()  # values that depend on other rows (aggregates, windows, black boxes)
        self.optional: set[str] = set()  # row-number columns of null-padded outer-join sides
        self.deciding: dict[int, set[str]] = {}
        self.opaque_inputs: set[int] = set()
        self.reasons: list[str] = []
        self.one_row = False  # the output is a global aggregate's one row (rules over it keep it so or say opaque)
        self.columns: dict[int, tuple[str, ...]] = {}  # table id -> its column names
        # Attributes whose value comes from fewer cells than their triples do
        # (a using join's merged key is one side's value, with both sides' key cells as parents).
        self.value_terms: dict[int, frozenset[Term]] = {}

    def opaque(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def merged_one_row(self, children: Iterable[Members | None], what: str) -> None:
        """A join, union or grouping over a global aggregate's row: which rows
        exist then is not what the members say (that row outlives them)."""
        if any(m is not None and m.one_row for m in children):
            self.opaque(f"{what} over a global aggregate in the same step")

    @property
    def existence(self) -> str:
        """The op's :attr:`~provplug.rowrules.OpRowRules.existence`."""
        opaque = [r for r in self.reasons if r != ONE_ROW_REASON]
        return "opaque" if opaque else "always_one_row" if self.one_row else "exact"

    @property
    def reason(self) -> str:
        """Why existence is opaque (empty when it is not)."""
        return "; ".join(self.reasons) if self.existence == "opaque" else ""

    def cell(self, base: int) -> tuple[int, str]:
        table, column, _ = ids.unpack(base)
        return table, self.columns[table][column]

    def cells(self, terms: Iterable[Term]) -> list[tuple[int, str]]:
        return sorted({self.cell(t.base) for t in terms})

    def decide(self, expr_ids: Iterable[int], terms: Iterable[Term], what: str) -> None:
        """Expressions reading ``expr_ids`` (their provenance ``terms``)
        decide whether or where rows exist."""
        terms = list(terms)
        if any(e in self.row_dependent for e in expr_ids):
            self.opaque(f"{what} over an aggregate, window or black-box value")
        if any(t.rows in self.optional for t in terms):
            self.opaque(f"{what} over the null-padded side of an outer join")
        for table, column in self.cells(terms):
            self.deciding.setdefault(table, set()).add(column)

    def propagate(self, new: int, refs: Iterable[int]) -> None:
        """``new`` is a function of ``refs`` in the same row: not a copy."""
        self.values.pop(new, None)
        if any(r in self.row_dependent for r in refs):
            self.row_dependent.add(new)
        else:
            self.row_dependent.discard(new)

    def column_rule(self, expr_id: int, terms: Iterable[Term]) -> ColumnRule:
        if expr_id in self.values:
            return self.values[expr_id]
        cells = self.cells(terms)
        return ColumnRule("computed", references=tuple(cells)) if cells else ColumnRule("literal")


def aggregate_rule(expr: Any, facts: RowFacts, jvm_expr_id: Any) -> ColumnRule | None:
    """The rule of an Aggregate's output expression ``expr`` (an Alias of
    one aggregate function over an input column), None when what-if cannot
    recompute it."""
    inner = expr.child() if expr.nodeName() == "Alias" else expr
    if inner.nodeName() != "AggregateExpression" or not inner.filter().isEmpty():
        return None
    func = inner.aggregateFunction()
    args = [func.children().apply(i) for i in range(func.children().size())]
    name = func.nodeName()
    if name == "Count" and len(args) == 1:
        arg = args[0]
        if arg.nodeName() == "Literal" and not inner.isDistinct():
            return ColumnRule("aggregate", function="count_star") if arg.value() is not None else None
        function = "count_distinct" if inner.isDistinct() else "count"
    elif name in AGGREGATE_FUNCTIONS and len(args) == 1 and (not inner.isDistinct() or name in ("Min", "Max")):
        arg, function = args[0], AGGREGATE_FUNCTIONS[name]
    else:
        return None
    if arg.nodeName() != "AttributeReference":
        return None
    source = facts.values.get(jvm_expr_id(arg))
    if source is None or source.kind != "copy" or source.table is None:  # (a union's per-table copy: not one column)
        return None
    return ColumnRule("aggregate", source.table, source.column, function)
