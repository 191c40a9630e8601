"""Every use of Beam internals by the adapter, in one place.

Beam has no public hook to rewrite the transforms a function applies, so the
session replaces ``apply`` (and ``run``) on the one ``Pipeline`` *instance*
being captured — never on the class — and recognises transforms by their
classes and a few private attributes listed here. Everything else in the
adapter uses public Beam APIs (``DoFn``, ``CombineFn``, ``ParDo``,
``GroupByKey``, ``Lineage``, ...). A Beam upgrade that breaks capture breaks
here first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

import apache_beam as beam
from apache_beam.transforms import combiners as _combiners
from apache_beam.transforms import ptransform as _ptransform
from apache_beam.transforms import util as _util
from apache_beam.transforms.core import _GroupAndAggregate
from apache_beam.typehints import typehints

Apply = Callable[..., Any]


def install(pipeline: beam.Pipeline, apply: Callable[[Apply, Any, Any, str | None], Any]) -> Apply:
    """Route ``pipeline.apply`` through ``apply(original, transform, input, label)``;
    return the original bound method (``restore`` puts it back)."""
    original: Apply = pipeline.apply

    def intercepted(transform: Any, pvalueish: Any = None, label: str | None = None) -> Any:
        return apply(original, transform, pvalueish, label)

    pipeline.apply = intercepted  # type: ignore[method-assign]  # on this instance only, deliberately
    return original


def restore(pipeline: beam.Pipeline) -> None:
    """Drop the instance-level ``apply`` so the class method is used again."""
    pipeline.__dict__.pop("apply", None)


def replace_run(pipeline: beam.Pipeline, run: Callable[..., Any]) -> Callable[..., Any]:
    """Make ``pipeline.run()`` call ``run``; return the original bound method.

    The capture block runs the pipeline itself; ``with beam.Pipeline() as p``
    (which runs again on exit) then gets the captured run's result back.
    """
    original = pipeline.run
    pipeline.run = run  # type: ignore[method-assign]  # on this instance only, deliberately
    return original


def unname(transform: Any, label: str | None) -> tuple[Any, str | None]:
    """``"label" >> t`` wraps ``t`` in a private class: unwrap it."""
    while isinstance(transform, _ptransform._NamedPTransform):
        label = label or transform.label
        transform = transform.transform
    return transform, label


def is_filter(pardo: beam.ParDo) -> bool:
    """``beam.Filter`` is a ``FlatMap`` whose only trace is its label."""
    return str(pardo.label).startswith("Filter(")


def pardo_operation(pardo: beam.ParDo) -> str:
    """``Map``, ``FlatMap``, ``MapTuple``, ``Filter``, ... or ``ParDo``."""
    head = str(pardo.label).split("(", 1)[0]
    return head if head and head.isidentifier() else "ParDo"


def pardo_side_inputs(pardo: beam.ParDo) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The extra arguments (side inputs included) exactly as the user passed them."""
    args, kwargs = pardo.raw_side_inputs
    return tuple(args), dict(kwargs)


def side_input_pcollection(arg: Any) -> Any | None:
    return arg.pvalue if isinstance(arg, beam.pvalue.AsSideInput) else None


def is_distinct(transform: Any) -> bool:
    """``beam.Distinct()`` is a ``ptransform_fn`` instance around ``util.Distinct``."""
    fn = getattr(transform, "_fn", None)
    return (
        isinstance(transform, _ptransform._PTransformFnPTransform)
        and getattr(fn, "__name__", "") == "Distinct"
        and getattr(fn, "__module__", "") == _util.__name__
    )


def uses_dofn_params(dofn: beam.DoFn) -> bool:
    """True if ``process`` (or the function a ``Map``/``FlatMap`` wraps) asks
    for timestamps, windows, state, ... (not traceable)."""
    from apache_beam.transforms.core import _DoFnParam

    argspec = getattr(dofn, "_process_argspec_fn", None)  # a Map/FlatMap's own function
    for fn in (dofn.process, argspec() if callable(argspec) else None):
        try:
            params = inspect.signature(fn).parameters.values() if fn is not None else ()
        except (TypeError, ValueError):
            continue
        if any(isinstance(p.default, _DoFnParam) for p in params):
            return True
    return False


def expr_field(expr: Callable[[Any], Any]) -> str | None:
    """The field name behind ``GroupBy('City')``-style expressions (Beam turns
    the string into ``lambda x: getattr(x, expr)``), else None (a callable)."""
    try:
        value = inspect.getclosurevars(expr).nonlocals.get("expr")
    except TypeError:
        return None
    return value if isinstance(value, str) and expr.__qualname__.startswith("_expr_to_callable") else None


def group_by_fields(transform: beam.GroupBy) -> list[tuple[str, Callable[[Any], Any], str | None]]:
    """``(name, key function, source field or None)`` per key of a ``GroupBy``."""
    return [(name, fn, expr_field(fn)) for name, fn in transform._key_fields]


def group_by_key_func(transform: beam.GroupBy, force_tuple: bool) -> Callable[[Any], Any]:
    grouping = transform.force_tuple_keys(True) if force_tuple else transform
    return cast(Callable[[Any], Any], grouping._key_func())


def is_group_and_aggregate(transform: Any) -> bool:
    return isinstance(transform, _GroupAndAggregate)


def aggregations(transform: Any) -> tuple[beam.GroupBy, list[tuple[Callable[[Any], Any], Any, str, str | None]]]:
    """The grouping and ``(value function, combine fn, dest, source field)`` per aggregate."""
    return transform._grouping, [(fn, combine, dest, expr_field(fn)) for fn, combine, dest in transform._aggregations]


def result_type(fields: Sequence[str]) -> Callable[..., Any]:
    """The picklable named tuple Beam's ``GroupBy.aggregate_field`` emits."""
    from apache_beam.transforms.core import _dynamic_named_tuple

    return _dynamic_named_tuple("Result", tuple(fields))


def select_fields(transform: beam.Select) -> list[tuple[str, Callable[[Any], Any], str | None]]:
    """``(output name, function, source field or None)`` per field of a ``Select``."""
    return [(name, fn, expr_field(fn)) for name, fn in transform._fields]


# -- plain element types --------------------------------------------------------------
class PlainType:
    """The Beam type of a traced PCollection's plain values, worked out only
    when a rule asks for it (inferring it walks every element of a source)."""

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute: Callable[[], Any] | None = compute
        self._value: Any = None

    def __call__(self) -> Any:
        if self._compute is not None:
            self._value, self._compute = self._compute(), None
        return self._value

    @classmethod
    def known(cls, value: Any) -> PlainType:
        return cls(lambda: value or typehints.Any)

    def after(self, transform: Any) -> PlainType:
        """The type of ``transform``'s output for input of this type."""
        return PlainType(lambda: output_type(transform, self()))


def created_type(rows: Sequence[Any]) -> Any:
    """The element type Beam gives ``beam.Create(rows)``."""
    try:
        return beam.Create(rows).infer_output_type(None)
    except Exception:  # type inference is best effort, as in Beam
        return typehints.Any


def output_type(transform: Any, input_type: Any) -> Any:
    """The element type Beam gives ``transform``'s output for plain input of
    ``input_type`` (its declared hints, bound to the input, else inferred);
    ``Any`` when it cannot tell. As ``Pipeline._infer_result_type`` does."""
    try:
        hints = transform.get_type_hints()
        declared = hints.simple_output_type(transform.label)
        if declared:
            inputs = hints.input_types
            if inputs and inputs[0]:
                bindings = typehints.match_type_variables(inputs[0][0], input_type)
                declared = typehints.bind_type_variables(declared, bindings)
            result = declared
        else:
            result = transform.infer_output_type(input_type)
        return typehints.bind_type_variables(result, {"*": typehints.Any}) or typehints.Any
    except Exception:  # type inference is best effort, as in Beam
        return typehints.Any


def key_type(element_type: Any) -> Any:
    """``K`` of a ``Tuple[K, V]`` element type, else ``Any``."""
    if isinstance(element_type, typehints.TupleConstraint) and len(element_type.tuple_types) == 2:
        return element_type.tuple_types[0]
    return typehints.Any


# -- combiners -----------------------------------------------------------------------
def top_of(transform: Any) -> tuple[int, Any, bool] | None:
    """``(n, key, reverse)`` of a ``Top.Of`` (also behind ``Top.Largest``/``Smallest``)."""
    if isinstance(transform, _combiners.Top.Of):
        return transform._n, transform._key, transform._reverse
    return None


def aggregate_function(fn: Any) -> str | None:
    """The aggregate of the row-lineage format (:data:`provplug.rowrules.AGGREGATES`)
    a combine computes: ``sum``/``min``/``max`` (the builtins, Beam's typed
    combiners), ``avg`` (``Mean``), ``count_star`` (``Count``); else None."""
    from apache_beam.transforms import cy_combiners

    inner = getattr(fn, "_fn", fn) if isinstance(fn, beam.transforms.core.CallableWrapperCombineFn) else fn
    builtin = next((name for f, name in ((sum, "sum"), (min, "min"), (max, "max")) if inner is f), None)
    if builtin is not None:
        return builtin
    kind = inner if isinstance(inner, type) else type(inner)
    classes = {
        "count_star": (_combiners.CountCombineFn, cy_combiners.CountCombineFn),
        "avg": (_combiners.MeanCombineFn, cy_combiners.MeanInt64Fn, cy_combiners.MeanFloatFn),
        "sum": (cy_combiners.SumInt64Fn, cy_combiners.SumFloatFn),
        "min": (cy_combiners.MinInt64Fn, cy_combiners.MinFloatFn),
        "max": (cy_combiners.MaxInt64Fn, cy_combiners.MaxFloatFn),
    }
    return next((name for name, found in classes.items() if issubclass(kind, found)), None)
