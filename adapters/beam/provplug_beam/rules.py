"""How each Beam transform applied inside a step propagates provenance.

``rule_for(transform, ...)`` returns the traced counterpart of a transform the
adapter understands (docs/capture-semantics.md in Beam terms), or ``None``:

==========================  ==================================================
``Map``/``FlatMap``/``ParDo``  black box: every output attribute <- every cell
                             of the input element
``Filter``                   copy: the same attribute of the same element
``GroupByKey``               ``key`` <- key cells of every element of the
                             group; ``value`` <- their value cells
``CombinePerKey``            as ``GroupByKey``; the combined value's attributes
                             <- the value cells of the group
``CombineGlobally``          the result <- every cell of every element
``Top.Of``                   as ``CombineGlobally`` (the list <- every cell)
``GroupBy(fields)``          ``key`` <- the key fields' cells of the group
``GroupBy.aggregate_field``  key field <- that field's cells of the group;
                             aggregate <- the aggregated field's cells
``CoGroupByKey``             ``key`` <- key cells of all matched elements;
                             attribute ``tag`` <- the value cells of that side
``Flatten``                  union: every element keeps its provenance
``Distinct``                 each attribute <- that attribute's cells of every
                             merged (equal) element
``Select``                   a field name copies; a callable is a black box
==========================  ==================================================

A key or aggregate given as a callable instead of a field name sees the whole
element, so it is a black box over the element's cells.

A step declared with ``rates=`` (location lineage on) has one rule only,
:func:`rated_rule`: its one ``Map``/``MapTuple``/``FlatMap``/``ParDo`` is the
black box above, its outputs numbered by position and checked against the
declared fan-out (:mod:`provplug_beam.rated`).

Each rule also says how its output rows follow from its input rows
(``Rule.rows``, a transfer of :mod:`provplug_beam.rowstate`): ``Filter``,
``Select``, ``Flatten`` keep rows; ``Map``/``MapTuple`` give one row per row;
groupings, ``Distinct`` and ``CoGroupByKey`` merge rows (one member each);
``FlatMap``/``ParDo``, DoFns reading captured side inputs and global
combines with defaults make existence opaque. ``sum``/``min``/``max``,
``Mean`` and ``Count`` over a copied column are aggregates the format
recomputes.

Grouping keys keep the type Beam knows for the plain input (``Tuple[K, V]``),
so a coder registered for ``K`` groups the traced elements as it groups the
plain ones.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.transforms.combiners import TopCombineFn, TupleCombineFn
from apache_beam.typehints.typehints import Any as AnyType
from apache_beam.typehints.typehints import Tuple

from provplug.errors import CaptureError

from . import _internals as internals
from . import rowstate
from .elements import Traced, all_ids, key_and_value_ids, kv_prov, union, value_key
from .fns import MergeEqualFn, TracedCombineFn, TracedDoFn, as_combine_fn, split_ids
from .rated import RATED_OPERATIONS, RatedDoFn, not_one_pardo

Expand = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class Rule:
    operation: str
    black_box: bool
    expand: Expand
    rows: rowstate.Transfer  # how the rows of its output follow from its inputs' (row lineage)


class Expansion(beam.PTransform[Any, Any]):
    """Applies a rule's expansion under the user's label."""

    def __init__(self, rule: Rule) -> None:
        super().__init__()
        self.rule = rule

    def _extract_input_pvalues(self, pvalueish: Any) -> Any:
        # Like Beam's multi-input transforms: dict values or tuple members.
        if isinstance(pvalueish, dict):
            return pvalueish, tuple(pvalueish.values())
        if isinstance(pvalueish, (tuple, list)):
            return pvalueish, tuple(pvalueish)
        return pvalueish, (pvalueish,)

    def expand(self, pvalueish: Any) -> Any:
        return self.rule.expand(pvalueish)


def rule_for(
    transform: Any, label: str, plain: Callable[[Any], Any], input_type: Callable[[], Any] = lambda: AnyType
) -> Rule | None:
    """The traced form of ``transform``; ``plain`` strips provenance from a
    traced PCollection used as a side input; ``input_type()`` is the Beam
    type of the (first) input's plain values (asked only by grouping rules)."""

    def key() -> Any:
        return internals.key_type(input_type())

    if isinstance(transform, beam.ParDo):
        return _pardo(transform, label, plain)
    if isinstance(transform, beam.GroupByKey):
        return Rule("GroupByKey", False, lambda pc: _group_by_key(pc, key), rowstate.group_by_key)
    if isinstance(transform, beam.CombinePerKey):
        return _combine_per_key(transform, label, key)
    if isinstance(transform, beam.CombineGlobally):
        return _combine_globally(transform, label)
    top = internals.top_of(transform)
    if top is not None:
        return _combine_globally_with(TopCombineFn(*top), getattr(transform, "has_defaults", True), "Top.Of", None)
    if isinstance(transform, beam.CoGroupByKey):
        return Rule("CoGroupByKey", False, lambda pcolls: _co_group_by_key(pcolls, key), rowstate.co_group_by_key)
    if isinstance(transform, beam.Flatten):
        return Rule("Flatten", False, lambda pcolls: pcolls | "Flatten" >> beam.Flatten(), rowstate.flatten)
    if internals.is_distinct(transform):
        return Rule("Distinct", False, _distinct, rowstate.distinct)
    if internals.is_group_and_aggregate(transform):
        return _group_and_aggregate(transform)
    if isinstance(transform, beam.GroupBy):
        return _group_by(transform)
    if isinstance(transform, beam.Select):
        return _select(transform)
    return None


# -- ParDo family ----------------------------------------------------------------
def _pardo(transform: beam.ParDo, label: str, plain: Callable[[Any], Any], fn: beam.DoFn | None = None) -> Rule:
    """``fn``: the traced DoFn to run (default :class:`TracedDoFn`, a copy for ``Filter``)."""
    if internals.uses_dofn_params(transform.fn):
        raise CaptureError(f"{label}: a DoFn asking for timestamps, windows or state cannot be captured")
    raw_args, raw_kwargs = internals.pardo_side_inputs(transform)
    args = tuple(_plain_side_input(a, plain) for a in raw_args)
    kwargs = {k: _plain_side_input(v, plain) for k, v in raw_kwargs.items()}
    keep = internals.is_filter(transform)
    fn = fn or TracedDoFn(transform.fn, keep, label)
    operation = internals.pardo_operation(transform)
    rows = _pardo_rows(operation, keep)
    if any(
        new is not old for new, old in zip((*args, *kwargs.values()), (*raw_args, *raw_kwargs.values()), strict=True)
    ):
        # The side input's rows are no member: existence and values may follow them unseen.
        rows = rowstate.opaque(rows, f"{operation} reads captured data as a side input")
    return Rule(operation, not keep, lambda pc: pc | "Traced" >> beam.ParDo(fn, *args, **kwargs), rows)


def rated_rule(transform: Any, name: str, step: str, plain: Callable[[Any], Any], fan_out: int) -> Rule:
    """The rule of the one ParDo (labelled ``name``) of step ``step``, declared
    with ``fan_out`` outputs per element (:mod:`.rated`): a black box whose
    outputs come numbered by position; a LocationError for any other transform."""
    if not isinstance(transform, beam.ParDo):
        raise not_one_pardo(step, f"{name} is a {type(transform).__qualname__}, not a ParDo")
    operation = "Filter" if internals.is_filter(transform) else internals.pardo_operation(transform)
    if operation not in RATED_OPERATIONS:  # a Filter keeps 0 or 1 element: no fixed rate
        raise not_one_pardo(step, f"{name} is a {operation}")
    label = f"step {step}: {name}"
    return _pardo(transform, label, plain, RatedDoFn(transform.fn, fan_out, label, step))


def _pardo_rows(operation: str, keep: bool) -> rowstate.Transfer:
    """``Filter`` keeps rows, ``Map``/``MapTuple`` give one row per row (a
    black box); any other DoFn may give 0..n per element and keep state."""
    if keep:
        return rowstate.filtered
    if operation in ("Map", "MapTuple"):
        return rowstate.mapped
    return rowstate.black_box(f"{operation}: a black box that may emit 0..n elements per input")


def _plain_side_input(arg: Any, plain: Callable[[Any], Any]) -> Any:
    """Side inputs are read as plain values (their cells are not parents)."""
    pcoll = internals.side_input_pcollection(arg)
    if pcoll is None:
        return arg
    stripped = copy.copy(arg)
    stripped.pvalue = plain(pcoll)
    return stripped


# -- grouping --------------------------------------------------------------------
def _to_kv(element: Traced) -> tuple[Any, tuple[Any, tuple[int, ...], tuple[int, ...]]]:
    value, prov = element
    key, inner = value
    key_ids, value_ids = key_and_value_ids(value, prov)
    return key, (inner, key_ids, value_ids)


def _from_grouped(kv: tuple[Any, Any]) -> Traced:
    key, items = kv
    items = list(items)
    value = (key, [item[0] for item in items])
    return value, kv_prov(value, union(i[1] for i in items), union(i[2] for i in items))


def _keyed(key: Callable[[], Any]) -> Any:
    """The type of ``(key, anything)``: Beam picks the key's coder from it."""
    return Tuple[key(), AnyType]


def _group_by_key(pc: Any, key: Callable[[], Any]) -> Any:
    return (
        pc
        | "ToKV" >> beam.Map(_to_kv).with_output_types(_keyed(key))
        | "GroupByKey" >> beam.GroupByKey()
        | "WithProv" >> beam.Map(_from_grouped)
    )


def _co_group_by_key(pcolls: Any, key: Callable[[], Any]) -> Any:
    def to_kv(pc: Any, i: int) -> Any:
        return pc | f"ToKV{i}" >> beam.Map(_to_kv).with_output_types(_keyed(key))

    if isinstance(pcolls, dict):
        tagged: Any = {tag: to_kv(pc, i) for i, (tag, pc) in enumerate(pcolls.items())}
    else:
        tagged = tuple(to_kv(pc, i) for i, pc in enumerate(pcolls))
    return tagged | "CoGroupByKey" >> beam.CoGroupByKey() | "WithProv" >> beam.Map(_from_co_grouped)


def _from_co_grouped(kv: tuple[Any, Any]) -> Traced:
    key, groups = kv
    if isinstance(groups, Mapping):
        sides = {tag: list(items) for tag, items in groups.items()}
        value: Any = (key, {tag: [i[0] for i in items] for tag, items in sides.items()})
        by_attribute = {str(tag): union(i[2] for i in items) for tag, items in sides.items()}
    else:
        sides = {ix: list(items) for ix, items in enumerate(groups)}
        value = (key, tuple([i[0] for i in items] for items in sides.values()))
        by_attribute = {}
    every = [i for items in sides.values() for i in items]
    return value, kv_prov(value, union(i[1] for i in every), union(i[2] for i in every), by_attribute)


def _combine_per_key(transform: beam.CombinePerKey, label: str, key: Callable[[], Any]) -> Rule:
    if transform.args or transform.kwargs:
        raise CaptureError(f"{label}: CombinePerKey with extra arguments cannot be captured")
    combine_fn = as_combine_fn(transform.fn)
    fn = TracedCombineFn(combine_fn, 2)

    def expand(pc: Any) -> Any:
        return (
            pc
            | "ToKV" >> beam.Map(_to_combine_kv).with_output_types(_keyed(key))
            | "CombinePerKey" >> beam.CombinePerKey(fn)
            | "WithProv" >> beam.Map(_from_combined)
        )

    return Rule("CombinePerKey", False, expand, rowstate.combine_per_key(internals.aggregate_function(combine_fn)))


def _to_combine_kv(element: Traced) -> tuple[Any, tuple[Any, Any]]:
    value, prov = element
    key, inner = value
    if type(prov) is tuple:  # key and value <- the same ids: one group
        return key, (inner, prov)
    key_ids, value_ids = key_and_value_ids(value, prov)
    return key, (inner, key_ids if key_ids is value_ids else (key_ids, value_ids))


def _from_combined(kv: tuple[Any, Any]) -> Traced:
    key, (out, (key_ids, value_ids)) = kv
    value = (key, out)
    return value, kv_prov(value, key_ids, value_ids)


def _combine_globally(transform: beam.CombineGlobally, label: str) -> Rule:
    if transform.args or transform.kwargs or getattr(transform, "as_view", False):
        raise CaptureError(f"{label}: CombineGlobally with arguments or as a view cannot be captured")
    combine_fn = as_combine_fn(transform.fn)
    return _combine_globally_with(
        combine_fn,
        getattr(transform, "has_defaults", True),
        "CombineGlobally",
        internals.aggregate_function(combine_fn),
    )


def _combine_globally_with(
    combine_fn: beam.CombineFn, has_defaults: bool, operation: str, function: str | None
) -> Rule:
    fn = TracedCombineFn(combine_fn, 1)
    combine = beam.CombineGlobally(fn)
    if not has_defaults:
        combine = combine.without_defaults()

    def expand(pc: Any) -> Any:
        return (
            pc
            | "ToInput" >> beam.Map(_to_global_input)
            | "CombineGlobally" >> combine
            | "WithProv" >> beam.Map(_from_global)
        )

    return Rule(operation, False, expand, rowstate.combine_globally(function, has_defaults))


def _to_global_input(element: Traced) -> tuple[Any, tuple[int, ...]]:
    value, prov = element
    return value, all_ids(prov)


def _from_global(result: tuple[Any, tuple[tuple[int, ...]]]) -> Traced:
    out, (ids,) = result
    return out, ids


def _distinct(pc: Any) -> Any:
    return (
        pc
        | "ByValue" >> beam.Map(lambda e: (value_key(e[0]), e))
        | "Merge" >> beam.CombinePerKey(MergeEqualFn())
        | "Values" >> beam.Values()
    )


# -- schema-aware transforms -------------------------------------------------------
def _group_by(transform: beam.GroupBy) -> Rule:
    fields = internals.group_by_fields(transform)
    key_fn = internals.group_by_key_func(transform, force_tuple=False)
    sources = [src for _, _, src in fields]

    def to_kv(element: Traced) -> Any:
        value, prov = element
        key_ids = prov if isinstance(prov, tuple) else union(split_ids(prov, sources))
        return key_fn(value), (value, key_ids, all_ids(prov))

    def expand(pc: Any) -> Any:
        return (
            pc | "ToKV" >> beam.Map(to_kv) | "GroupByKey" >> beam.GroupByKey() | "WithProv" >> beam.Map(_from_grouped)
        )

    return Rule("GroupBy", None in sources, expand, rowstate.group_by(sources))


def _group_and_aggregate(transform: Any) -> Rule:
    grouping, aggs = internals.aggregations(transform)
    key_fields = internals.group_by_fields(grouping)
    key_fn = internals.group_by_key_func(grouping, force_tuple=True)
    value_fns = [fn for fn, _, _, _ in aggs]
    sources = [src for _, _, src in key_fields] + [src for *_, src in aggs]
    result_fields = [name for name, _, _ in key_fields] + [dest for _, _, dest, _ in aggs]
    result = internals.result_type(result_fields)
    fn = TracedCombineFn(TupleCombineFn(*[combine for _, combine, _, _ in aggs]), len(sources))

    def to_kv(element: Traced) -> Any:
        value, prov = element
        return key_fn(value), ([f(value) for f in value_fns], split_ids(prov, sources))

    def from_combined(kv: Any) -> Traced:
        key, (out, ids) = kv
        return result(*(tuple(key) + tuple(out))), dict(zip(result_fields, ids, strict=True))

    def expand(pc: Any) -> Any:
        return (
            pc
            | "ToKV" >> beam.Map(to_kv)
            | "CombinePerKey" >> beam.CombinePerKey(fn)
            | "WithProv" >> beam.Map(from_combined)
        )

    rows = rowstate.group_and_aggregate(
        [(name, src) for name, _, src in key_fields],
        [(dest, src, internals.aggregate_function(combine)) for _, combine, dest, src in aggs],
    )
    return Rule("GroupBy.aggregate_field", None in sources, expand, rows)


def _select(transform: beam.Select) -> Rule:
    fields = internals.select_fields(transform)

    def select(element: Traced) -> Traced:
        value, prov = element
        every = all_ids(prov)
        row = beam.Row(**{name: fn(value) for name, fn, _ in fields})
        if isinstance(prov, tuple):
            return row, prov
        return row, {name: tuple(prov.get(src, every)) if src else every for name, _, src in fields}

    return Rule(
        "Select",
        any(src is None for _, _, src in fields),
        lambda pc: pc | "Select" >> beam.Map(select),
        rowstate.select([(name, src) for name, _, src in fields]),
    )
