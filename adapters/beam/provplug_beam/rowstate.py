"""Row lineage of Beam steps (docs/capture-semantics.md; the format is :mod:`provplug.ingest.rowlineage`).

**Records.** Every transform the adapter traces keeps or merges rows; none
uses two rows *jointly* (Beam has no join primitive: ``CoGroupByKey`` emits
one row per key that exists while any element of any side has that key, and
what a ``FlatMap`` makes of it is a black box). So an output row's members
are exactly the distinct input rows its cells come from, one row each, and
they follow from the cell ids every element already carries: a cell id packs
its table and row (:mod:`provplug.ids`). ``WriteTable`` derives the records
beside the triples it writes (:func:`member_rows`); no extra state travels
with the elements. ``optional`` is never set (no outer join is captured).

**Rules.** How each output column follows from the members, which input
columns decide existence and which transforms make existence opaque are
worked out on the driver, symbolically, along the transforms of the step
(:class:`RowState` per traced PCollection, one transfer per rule in
:mod:`provplug_beam.rules`). A table's columns are known only after the run,
so each PCollection's state is a function of the tables' columns
(:data:`RowsFn`), evaluated when the run is recorded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from provplug import ids
from provplug.rowrules import ColumnKind, ColumnRule, OpRowRules

Ref = tuple[int, str]  # (input table, column)
Catalog = Mapping[int, Sequence[str]]  # table id -> its columns


@dataclasses.dataclass(frozen=True)
class Col:
    """How one attribute follows from the input rows (a :class:`ColumnRule` to be)."""

    kind: ColumnKind
    refs: frozenset[Ref] = frozenset()
    function: str | None = None

    @staticmethod
    def computed(refs: Iterable[Ref]) -> Col:
        refs = frozenset(refs)
        return Col("computed", refs) if refs else Col("literal")


@dataclasses.dataclass(frozen=True)
class RowState:
    """What the elements of one traced PCollection are, in terms of the rows
    of the tables it reads: a rule per attribute (``other`` for attributes
    not named), the columns deciding existence, why existence is opaque, and
    whether each element stands for exactly one input row (so an aggregate
    over the elements is one over the members)."""

    named: Mapping[str, Col]
    other: Col | None = None
    deciding: frozenset[Ref] = frozenset()
    opaque: tuple[str, ...] = ()
    one_row: bool = True
    sources: frozenset[int] = frozenset()  # tables whose rows the elements come from
    # One element whatever is deleted (a global count with defaults: 0 with no member left).
    always_one_row: bool = False

    def col(self, attribute: str) -> Col:
        found = self.named.get(attribute, self.other)
        return found if found is not None else Col.computed(self.refs())

    def refs(self, skip: Iterable[str] = ()) -> frozenset[Ref]:
        skipped = set(skip)
        cols = [c for a, c in self.named.items() if a not in skipped]
        if self.other is not None:
            cols.append(self.other)
        return frozenset().union(*(c.refs for c in cols))

    def key(self) -> Col:
        """A KV element's key (an element without a ``key`` attribute gives
        all its cells to key and value, as :func:`.elements.key_and_value_ids`)."""
        return self.named["key"] if "key" in self.named else Col.computed(self.refs())

    def value_refs(self) -> frozenset[Ref]:
        return self.refs(skip=("key",)) if "key" in self.named else self.refs()


RowsFn = Callable[[Catalog], RowState]
Tagged = Sequence[tuple[Any, RowState]]  # (tag or position, state) per main input
Transfer = Callable[[Tagged], RowState]


def table(table_id: int) -> RowsFn:
    """A table read by a step: each attribute is a copy of its own column."""

    def state(catalog: Catalog) -> RowState:
        return RowState(
            {c: Col("copy", frozenset({(table_id, c)})) for c in catalog[table_id]}, sources=frozenset({table_id})
        )

    return state


def no_input(catalog: Catalog) -> RowState:
    """A step output built without reading a captured table."""
    return RowState({}, Col("literal"))


def applied(transfer: Transfer, inputs: Sequence[tuple[Any, RowsFn]]) -> RowsFn:
    return lambda catalog: transfer([(tag, rows(catalog)) for tag, rows in inputs])


def _only(inputs: Tagged) -> RowState:
    return inputs[0][1]


# -- transfers, one per kind of rule -----------------------------------------------
def filtered(inputs: Tagged) -> RowState:
    """``Filter``: rows kept as they are; the predicate reads the whole element."""
    s = _only(inputs)
    return dataclasses.replace(s, deciding=s.deciding | s.refs(), opaque=_over_one_row([s], "a filter"))


def mapped(inputs: Tagged) -> RowState:
    """``Map``/``MapTuple``: one output per input (Beam's contract), a black box."""
    s = _only(inputs)
    return dataclasses.replace(s, named={}, other=Col.computed(s.refs()))


def black_box(reason: str) -> Transfer:
    """``FlatMap``/``ParDo``: 0..n outputs per input, from code that may keep state."""

    def transfer(inputs: Tagged) -> RowState:
        s = mapped(inputs)
        return dataclasses.replace(s, deciding=s.deciding | s.refs(), opaque=(*s.opaque, reason), one_row=False)

    return transfer


def opaque(transfer: Transfer, reason: str) -> Transfer:
    def wrapped(inputs: Tagged) -> RowState:
        s = transfer(inputs)
        return dataclasses.replace(s, opaque=(*s.opaque, reason))

    return wrapped


def aggregate(function: str | None, s: RowState, col: Col) -> Col:
    """An aggregate over the elements is one over the members only when each
    element is one input row and the aggregated value a copy of its cell."""
    if function is None or not s.one_row:
        return Col.computed(col.refs)
    if function == "count_star":
        return Col("aggregate", frozenset(), "count_star")
    if col.kind == "copy" and len(col.refs) == 1:  # (a Flatten's copy per table: not one column)
        return Col("aggregate", col.refs, function)
    return Col.computed(col.refs)


def _over_one_row(states: Sequence[RowState], what: str) -> tuple[str, ...]:
    """The opaque reasons of a transform over ``states``: theirs, and that a
    global combine's element outlives its members, which they do not say."""
    reasons = tuple(r for s in states for r in s.opaque)
    if any(s.always_one_row for s in states):
        reasons += (f"{what} over a global combine's default row",)
    return reasons


def _grouped(s: RowState, named: Mapping[str, Col], key_refs: Iterable[Ref], other: Col | None = None) -> RowState:
    return RowState(named, other, s.deciding | frozenset(key_refs), _over_one_row([s], "a grouping"), False, s.sources)


def group_by_key(inputs: Tagged) -> RowState:
    s = _only(inputs)
    key = s.key()
    return _grouped(s, {"key": key, "value": Col.computed(s.value_refs())}, key.refs)


def combine_per_key(function: str | None) -> Transfer:
    def transfer(inputs: Tagged) -> RowState:
        s = _only(inputs)
        key, values = s.key(), Col.computed(s.value_refs())
        value = aggregate(function, s, s.named.get("value", values)) if "key" in s.named else values
        return _grouped(s, {"key": key, "value": value}, key.refs, values)

    return transfer


def combine_globally(function: str | None, has_defaults: bool) -> Transfer:
    """One element over every input element. With defaults it exists with
    no element left; its value then is the CombineFn's over nothing, which
    what-if recomputes (Spark's rules) only for a count: 0."""

    def transfer(inputs: Tagged) -> RowState:
        s = _only(inputs)
        every = Col.computed(s.refs())
        single = set(s.named) == {"value"} and s.other is None
        value = aggregate(function, s, s.named["value"]) if single else every
        grouped = _grouped(s, {"value": value}, (), every)
        if not has_defaults:
            return grouped
        if value.kind == "aggregate" and value.function == "count_star":
            return dataclasses.replace(grouped, always_one_row=True)
        return dataclasses.replace(
            grouped,
            opaque=(
                *grouped.opaque,
                "a global combine emits a default row when no "
                "input row is left (its value over nothing is the CombineFn's)",
            ),
        )

    return transfer


def co_group_by_key(inputs: Tagged) -> RowState:
    """One row per key: its members are the elements of every side with that key."""
    states = [s for _, s in inputs]
    key_refs = frozenset().union(*(s.key().refs for s in states))
    named: dict[str, Col] = {"key": Col.computed(key_refs)}
    if all(isinstance(tag, str) for tag, _ in inputs):
        named.update({tag: Col.computed(s.value_refs()) for tag, s in inputs})
    else:
        named["value"] = Col.computed(frozenset().union(*(s.value_refs() for s in states)))
    return RowState(
        named,
        None,
        frozenset().union(*(s.deciding for s in states)) | key_refs,
        _over_one_row(states, "a CoGroupByKey"),
        False,
        frozenset().union(*(s.sources for s in states)),
    )


def flatten(inputs: Tagged) -> RowState:
    """Union: each row keeps its one member; a column copies the cell of
    the member's own table when each branch copies (or is a literal) and no
    branch's rows hold another branch's source table; else computed."""
    states = [s for _, s in inputs]
    if not states:
        return RowState({}, Col("literal"))
    names = {a for s in states for a in s.named}
    named = {a: _branch_copy([s.col(a) for s in states], states) for a in names}
    others = [s.other for s in states if s.other is not None]
    disjoint = sum(len(s.sources) for s in states) == len(frozenset().union(*(s.sources for s in states)))
    return RowState(
        named,
        _same_or_computed(others) if others else None,
        frozenset().union(*(s.deciding for s in states)),
        _over_one_row(states, "a Flatten"),
        all(s.one_row for s in states) and disjoint,
        frozenset().union(*(s.sources for s in states)),
    )


def _branch_copy(cols: Sequence[Col], states: Sequence[RowState]) -> Col:
    """One column of a Flatten: a copy per branch table when it can be told."""
    if all(c == cols[0] for c in cols) or any(c.kind not in ("copy", "literal") for c in cols):
        return _same_or_computed(cols)
    copies = [next(iter(c.refs)) if c.kind == "copy" and len(c.refs) == 1 else None for c in cols]
    tables = {ref[0] for ref in copies if ref is not None}
    if any(c.kind == "copy" and ref is None for c, ref in zip(cols, copies, strict=True)) or len(tables) != len(
        {ref for ref in copies if ref is not None}
    ):
        return _same_or_computed(cols)  # a branch copying from several cells, or one table's two columns
    for ref, s in zip(copies, states, strict=True):
        if (s.sources & tables) - ({ref[0]} if ref is not None else set()):
            return _same_or_computed(cols)  # this branch's rows may hold another branch's table
    return Col("copy", frozenset(ref for ref in copies if ref is not None))


def _same_or_computed(cols: Sequence[Col]) -> Col:
    return cols[0] if all(c == cols[0] for c in cols) else Col.computed(frozenset().union(*(c.refs for c in cols)))


def distinct(inputs: Tagged) -> RowState:
    """Equal elements merge: each attribute copies any member's cell (they agree)."""
    s = _only(inputs)
    return dataclasses.replace(s, deciding=s.deciding | s.refs(), one_row=False, opaque=_over_one_row([s], "distinct"))


def _field(s: RowState, source: str | None) -> Col:
    return s.col(source) if source is not None else Col.computed(s.refs())


def group_by(sources: Sequence[str | None]) -> Transfer:
    """``GroupBy(fields)``: ``key`` and the list of grouped elements."""

    def transfer(inputs: Tagged) -> RowState:
        s = _only(inputs)
        keys = [_field(s, src) for src in sources]
        key = keys[0] if len(keys) == 1 else Col.computed(frozenset().union(*(k.refs for k in keys)))
        return _grouped(s, {"key": key, "value": Col.computed(s.refs())}, key.refs)

    return transfer


def group_and_aggregate(
    keys: Sequence[tuple[str, str | None]], aggregates: Sequence[tuple[str, str | None, str | None]]
) -> Transfer:
    """``GroupBy(...).aggregate_field``: ``keys`` as (name, source field);
    ``aggregates`` as (dest, source field, aggregate function or None)."""

    def transfer(inputs: Tagged) -> RowState:
        s = _only(inputs)
        named = {name: _field(s, src) for name, src in keys}
        key_refs = frozenset().union(*(c.refs for c in named.values()))
        for dest, src, function in aggregates:
            named[dest] = aggregate(function, s, _field(s, src)) if src is not None else Col.computed(s.refs())
        return _grouped(s, named, key_refs)

    return transfer


def select(fields: Sequence[tuple[str, str | None]]) -> Transfer:
    def transfer(inputs: Tagged) -> RowState:
        s = _only(inputs)
        return dataclasses.replace(s, named={name: _field(s, src) for name, src in fields}, other=None)

    return transfer


# -- the recorded form ------------------------------------------------------------
def op_rules(op_id: int, out_table: int, columns: Sequence[str], state: RowState, inputs: Sequence[int]) -> OpRowRules:
    """The :class:`OpRowRules` of one output table of a step."""
    deciding: dict[int, set[str]] = {}
    for t, c in state.deciding:
        if t in inputs:
            deciding.setdefault(t, set()).add(c)
    reasons = tuple(dict.fromkeys(state.opaque))
    return OpRowRules(
        op_id,
        out_table,
        "opaque" if reasons else "always_one_row" if state.always_one_row else "exact",
        {c: _column_rule(state.col(c)) for c in columns},
        {t: tuple(sorted(cols)) for t, cols in sorted(deciding.items())},
        reason="; ".join(reasons),
    )


def _column_rule(col: Col) -> ColumnRule:
    if col.kind == "copy" and len(col.refs) > 1:  # a Flatten's copy per table
        return ColumnRule("copy", references=tuple(sorted(col.refs)))
    if col.kind in ("copy", "aggregate") and col.refs:
        ((table_id, column),) = col.refs
        return ColumnRule(col.kind, table_id, column, col.function)
    if col.kind == "aggregate":
        return ColumnRule("aggregate", function=col.function)
    if col.kind == "computed":
        return ColumnRule("computed", references=tuple(sorted(col.refs)))
    return ColumnRule("literal")


# -- records (on the workers) -------------------------------------------------------
_ROW_OF = ~((ids.MAX_COLUMNS - 1) << ids.COLUMN_SHIFT)  # clears the column bits of a cell id


def member_rows(prov: Any) -> list[int]:
    """The input rows of an output element, as the ids of their column 0,
    sorted: each is one member of its row (numbered in this order)."""
    if type(prov) is tuple:
        return sorted({i & _ROW_OF for i in prov})
    return sorted({i & _ROW_OF for group in prov.values() for i in group})


def split_rows(row_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(in_table, in_row)`` of the row ids :func:`member_rows` gives."""
    packed = np.asarray(row_ids, np.int64)
    return packed >> ids.TABLE_SHIFT, packed & (ids.MAX_ROWS - 1)
