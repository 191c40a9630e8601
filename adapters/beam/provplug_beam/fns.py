"""The DoFns and CombineFns that carry provenance beside the user's functions.

Each wraps a user DoFn / CombineFn: the user code sees plain values, and the
wrapper derives the provenance of what it returns (see :mod:`.elements`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.transforms.window import TimestampedValue

from provplug.errors import CaptureError

from .elements import Ids, Prov, Traced, all_ids, per_attribute

_PASS_THROUGH = (beam.pvalue.TaggedOutput, TimestampedValue)


class TracedDoFn(beam.DoFn):
    """Runs ``inner`` on the value of each traced element.

    ``copy=True`` (``Filter``): outputs keep the element's provenance.
    Otherwise black box: every output attribute <- every input cell, one id
    tuple shared by all the outputs of the element.
    """

    def __init__(self, inner: beam.DoFn, copy: bool, label: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Beam's is unannotated (python/mypy#16653)
        self.inner, self.copy, self.label = inner, copy, label

    def setup(self) -> None:
        self.inner.setup()

    def start_bundle(self) -> None:
        self.inner.start_bundle()

    def process(self, element, *args, **kwargs):  # type: ignore[no-untyped-def]  # Beam reads type hints from it
        value, prov = element
        outputs = self.inner.process(value, *args, **kwargs)
        if not outputs:
            return
        ids = prov if self.copy else all_ids(prov)
        for out in outputs:
            if isinstance(out, _PASS_THROUGH):
                raise CaptureError(f"{self.label}: tagged or timestamped outputs cannot be captured")
            yield out, ids

    def finish_bundle(self) -> None:
        if list(self.inner.finish_bundle() or ()):
            raise CaptureError(f"{self.label}: outputs from finish_bundle cannot be captured")

    def teardown(self) -> None:
        self.inner.teardown()


Acc = tuple[Any, set[int], list[set[int]]]


class TracedCombineFn(beam.CombineFn):
    """Combines ``(value, ids)`` inputs: ``inner`` combines the values, and
    each of the ``slots`` id groups is unioned across the combined inputs.

    ``ids`` is one id tuple per slot, or one id tuple for all of them (what
    an element whose provenance is one tuple gives: unioned once, not once
    per slot). Output: ``(inner result, (ids of slot 0, ids of slot 1, ...))``.
    """

    def __init__(self, inner: beam.CombineFn, slots: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Beam's is unannotated (python/mypy#16653)
        self.inner, self.slots = inner, slots

    def setup(self, *args: Any, **kwargs: Any) -> None:
        self.inner.setup(*args, **kwargs)

    def create_accumulator(self) -> Acc:
        return self.inner.create_accumulator(), set(), [set() for _ in range(self.slots)]

    def add_input(self, acc: Acc, element: tuple[Any, Sequence[Any]]) -> Acc:
        inner_acc, shared, groups = acc
        value, ids = element
        if not ids or type(ids[0]) is int:
            shared.update(ids)
        else:
            for group, new in zip(groups, ids, strict=True):
                group.update(new)
        return self.inner.add_input(inner_acc, value), shared, groups

    def merge_accumulators(self, accs: Iterable[Acc]) -> Acc:
        accs = list(accs)
        merged = self.inner.merge_accumulators([a[0] for a in accs])
        return (
            merged,
            set().union(*(a[1] for a in accs)),
            [set().union(*(a[2][i] for a in accs)) for i in range(self.slots)],
        )

    def compact(self, acc: Acc) -> Acc:
        return self.inner.compact(acc[0]), acc[1], acc[2]

    def extract_output(self, acc: Acc) -> tuple[Any, tuple[Ids, ...]]:
        inner_acc, shared, groups = acc
        if not any(groups):
            every = tuple(sorted(shared))
            return self.inner.extract_output(inner_acc), (every,) * self.slots
        return self.inner.extract_output(inner_acc), tuple(tuple(sorted(shared | g)) for g in groups)

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        self.inner.teardown(*args, **kwargs)


class MergeEqualFn(beam.CombineFn):
    """``Distinct``: keeps one of the equal values; each attribute <- that
    attribute's cells of every merged element."""

    def create_accumulator(self) -> tuple[bool, Any, dict[str, set[int]]]:
        return False, None, {}

    def add_input(
        self, acc: tuple[bool, Any, dict[str, set[int]]], element: tuple[Any, Prov | Mapping[str, Iterable[int]]]
    ) -> tuple[bool, Any, dict[str, set[int]]]:
        seen, value, prov = acc
        new_value, new_prov = element
        spread = per_attribute(new_value, new_prov) if type(new_prov) is tuple else new_prov
        assert isinstance(spread, Mapping)
        for a, ids in spread.items():
            prov.setdefault(a, set()).update(ids)
        return True, (value if seen else new_value), prov

    def merge_accumulators(
        self, accs: Iterable[tuple[bool, Any, dict[str, set[int]]]]
    ) -> tuple[bool, Any, dict[str, set[int]]]:
        result = self.create_accumulator()
        for seen, value, prov in accs:
            if seen:
                result = self.add_input(result, (value, prov))
        return result

    def extract_output(self, acc: tuple[bool, Any, dict[str, set[int]]]) -> Traced:
        _, value, prov = acc
        return value, {a: tuple(sorted(ids)) for a, ids in prov.items()}


def as_combine_fn(fn: Any) -> beam.CombineFn:
    """A ``CombineFn`` for what ``CombinePerKey``/``CombineGlobally`` accept."""
    if isinstance(fn, type) and issubclass(fn, beam.CombineFn):
        return fn()
    return beam.CombineFn.maybe_from_callable(fn)


def split_ids(prov: Prov, names: Sequence[str | None]) -> Sequence[Any]:
    """For each name: that attribute's ids, or (``None``) all the element's
    ids; a provenance that is one tuple is returned as is (the same ids for
    every name, see :class:`TracedCombineFn`)."""
    if type(prov) is tuple:
        return prov
    assert isinstance(prov, dict)
    every: Ids | None = None
    out = []
    for name in names:
        if name is not None and name in prov:
            out.append(tuple(prov[name]))
        else:
            every = every if every is not None else all_ids(prov)
            out.append(every)
    return tuple(out)
