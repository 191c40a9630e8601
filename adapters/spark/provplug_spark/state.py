"""What one rewrite of a step output knows, and what a rule is given.

The provenance of an attribute (by Catalyst expression id) is a set of
:class:`~.writer.Term` s: "the ids ``base + r`` for each row number ``r``
that row-number column ``__pv_<n>`` holds in this row". A
:class:`RewriteState` holds them for one rewrite, beside the row-number
columns made so far and the aggregates whose provenance is deferred to a
group join (:mod:`.groupjoin`); a rule (:mod:`.rules`) gets a
:class:`Context`: that state and the facts about the one node it rewrites.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from pyspark.sql import DataFrame

from provplug.errors import CaptureError

from ._jvm import Catalyst, Expression
from .rowlineage import MemberField, Members, RowFacts, Slot
from .sources import TableLeaf, Tables
from .terms import Term
from .writer import Cell

PROV_PREFIX = "__pv_"  # row-number columns
HIDDEN_PREFIX = "__pg"  # group-join keys (__pgk_<n>_<i>) and markers (__pgm_<n>); never __pv_
ROWS_TYPE = "bigint"
ROW_LIST_TYPE = "array<bigint>"
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class RowColumn:
    """What a row-number column of the rewritten plan holds."""

    table_id: int
    scalar: bool  # one row number (or null), not an array of them
    may_repeat: bool  # an array may hold one row number several times


@dataclasses.dataclass(frozen=True)
class Node:
    """A rewritten plan node and what the rewrite knows about its rows."""

    plan: Any
    rows: tuple[str, ...]  # its row-number columns
    hidden: tuple[str, ...]  # its group-join columns
    members: Members | None  # its rows' members (row lineage); None: unknown (a black box)
    stable: bool = True  # recomputation yields the same rows with the same row numbers
    injective: bool = True  # every row comes from distinct input rows
    max_rows: int | None = None  # at most this many rows (None: no bound known)


class NodeMemo(Generic[T]):
    """What the run's rewrites worked out about plan nodes, for a later
    rewrite that meets the same node: found by a text of the node (a key
    holding its expression ids, unique in the JVM), checked by Catalyst's
    own ``equals`` (one py4j round trip)."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[Any, T]] = {}

    def get(self, key: str, node: Any) -> T | None:
        known = self._known.get(key)
        return known[1] if known is not None and node.equals(known[0]) else None

    def put(self, key: str, node: Any, value: T) -> None:
        self._known[key] = (node, value)


@dataclasses.dataclass(frozen=True)
class TableRead:
    """A table leaf rewritten to carry its row numbers, kept for the run's
    later rewrites that read the same leaf (:func:`.rules.table_read`)."""

    paths: tuple[str, ...]
    leaf: TableLeaf  # the run's table it reads
    attrs: tuple[tuple[str, int], ...]  # (name, expression id) of its output
    rows: str  # its row-number column
    plan: Any  # the leaf with that column
    row_attribute: Any  # that column's attribute


@dataclasses.dataclass(frozen=True)
class GroupJoin:
    """The deferred provenance of one aggregate (see :mod:`.groupjoin`)."""

    marker: str  # hidden output column: non-null on the rows this aggregate produced
    keys: tuple[str, ...]  # hidden output columns holding the grouping values (none: a global aggregate)
    child: DataFrame  # the recomputed input rows: the same ``keys`` columns, then their row-number columns
    cells: tuple[Cell, ...]  # the aggregate's output cells over the child's row-number columns
    member: Slot | None = None  # the child's one row-number column: each joined row is one member


class RewriteState:
    """The provenance derived so far in one rewrite of a step output, and
    what the rewrite saw (input tables, operations, UDF use). Made afresh for
    each rewrite (and for its retry without group joins)."""

    def __init__(
        self,
        jvm: Catalyst,
        tables: Tables,
        group_joins: str,
        allow_groups: bool,
        names: Iterator[int],
        row_lineage: bool = True,
        reads: NodeMemo[TableRead] | None = None,
        over_leaves: NodeMemo[tuple[bool, list[Expression]]] | None = None,
        list_bytes: int = 0,
    ) -> None:
        self.jvm = jvm
        self.tables = tables
        self.group_joins = group_joins  # "global" or "always" (see .groupjoin)
        self.list_bytes = list_bytes  # a global aggregate over at most this (estimated) lists its members
        self.allow_groups = allow_groups  # False: the retry of a step whose group joins could not be written
        self._names = names  # numbers of new row-number columns, shared by the run's rewrites
        self.terms: dict[int, frozenset[Term]] = {}  # expression id -> per-row provenance
        self.deferred: dict[int, frozenset[tuple[int, Term]]] = {}  # expression id -> {(group, child term)}
        self.rows: dict[str, RowColumn] = {}
        self.groups: list[GroupJoin] = []
        self.inputs: set[int] = set()
        self.operations: list[str] = []
        self.uses_udf = False
        self.facts = RowFacts()  # what the op's row rules will say
        self.row_lineage = row_lineage  # False: no members carried (Node.members None throughout)
        self.reads = reads or NodeMemo[TableRead]()  # the run's rewritten table reads
        # the run's nodes over table leaves: whether deterministic, their expressions
        self.over_leaves = over_leaves or NodeMemo[tuple[bool, list[Expression]]]()
        self.attributes: dict[str, Any] = {}  # column name -> its attribute, where known without a lookup
        self.member_fields: dict[str, MemberField] = {}  # list column -> the member list field holding its numbers

    def new_name(self) -> str:
        """A new column name of the rewrite (not a row-number column)."""
        return f"{PROV_PREFIX}{next(self._names)}"

    def new_rows(self, kind: RowColumn) -> str:
        """The name of a new row-number column holding ``kind``."""
        name = f"{PROV_PREFIX}{next(self._names)}"
        self.rows[name] = kind
        return name

    def terms_of(self, attrs: Iterable[Any]) -> frozenset[Term]:
        return self.terms_of_ids([self.jvm.expr_id(a) for a in attrs])

    def deferred_of(self, attrs: Iterable[Any]) -> frozenset[tuple[int, Term]]:
        return self.deferred_of_ids([self.jvm.expr_id(a) for a in attrs])

    def terms_of_ids(self, expr_ids: Iterable[int]) -> frozenset[Term]:
        return frozenset().union(*[self.terms.get(i, frozenset()) for i in expr_ids])

    def deferred_of_ids(self, expr_ids: Iterable[int]) -> frozenset[tuple[int, Term]]:
        return frozenset().union(*[self.deferred.get(i, frozenset()) for i in expr_ids])

    def derive(self, expr_id: int, refs: Sequence[Any]) -> None:
        """The attribute ``expr_id`` := a function of ``refs`` in the same row."""
        self.derive_ids(expr_id, [self.jvm.expr_id(a) for a in refs])  # once: each is a py4j round trip

    def derive_ids(self, expr_id: int, ref_ids: Sequence[int]) -> None:
        """The attribute ``expr_id`` := a function of the attributes ``ref_ids`` in the same row."""
        self.terms[expr_id] = self.terms_of_ids(ref_ids)
        self.deferred[expr_id] = self.deferred_of_ids(ref_ids)
        self.facts.propagate(expr_id, ref_ids)

    def decide(self, refs: Sequence[Any], what: str) -> None:
        """``refs`` decide whether or where rows exist (row lineage's deciding columns)."""
        self.decide_ids([self.jvm.expr_id(a) for a in refs], what)

    def decide_ids(self, ref_ids: Sequence[int], what: str) -> None:
        """The attributes ``ref_ids`` decide whether or where rows exist."""
        terms: set[Term] = set()
        for expr_id in ref_ids:
            terms |= self.facts.value_terms.get(expr_id) or self.terms.get(expr_id, frozenset())
            terms |= {t for _, t in self.deferred.get(expr_id, frozenset())}
        self.facts.decide(ref_ids, terms, what)

    def check_not_deferred(self, refs: Sequence[Any]) -> None:
        self.check_not_deferred_ids([self.jvm.expr_id(a) for a in refs])

    def check_not_deferred_ids(self, ref_ids: Iterable[int]) -> None:
        if self.deferred_of_ids(ref_ids):  # excluded by the merging-above rule
            raise CaptureError("internal: row-merging operation over deferred aggregate provenance")

    def relisted(self, terms: Iterable[Term], lists: dict[str, str], injective: bool) -> frozenset[Term]:
        """``terms`` with each row-number column replaced by a list of the row
        numbers it holds over a group or window (``lists``: row column ->
        list column, added to for row columns not listed yet)."""
        out = set()
        for term in terms:
            if term.rows not in lists:
                source = self.rows[term.rows]
                # A list of one number per member repeats one only when members
                # can share an input row, or when it joins lists.
                lists[term.rows] = self.new_rows(RowColumn(source.table_id, False, not injective or not source.scalar))
                if term.rows in self.facts.optional:
                    self.facts.optional.add(lists[term.rows])
            out.add(Term(lists[term.rows], False, term.base))
        return frozenset(out)

    def cell(self, column: int, terms: frozenset[Term]) -> Cell:
        """How output column ``column`` gets its triples from ``terms``."""
        ordered = tuple(sorted(terms, key=lambda t: (t.rows, t.base)))
        # Two terms of one base (one table's column, twice) the writer dedupes itself.
        return Cell(column, ordered, any(self.rows[t.rows].may_repeat for t in ordered))


@dataclasses.dataclass(frozen=True)
class Context:
    """What a rule is given besides the node and its rewritten children."""

    state: RewriteState
    merging_above: bool  # a row-merging node (aggregate, distinct, window, ...) lies above this one in the step
    expressions: frozenset[str]  # the node names of this node's expressions
    trees: tuple[Expression, ...] = ()  # its expressions (node.expressions()) as their JSON reads them

    @property
    def jvm(self) -> Catalyst:
        return self.state.jvm
