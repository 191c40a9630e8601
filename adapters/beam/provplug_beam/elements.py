"""Traced elements: a pipeline value paired with the provenance of its attributes.

Inside a capture every element of a traced ``PCollection`` is ``(value, prov)``
where ``prov`` is either

* a dict mapping each attribute of ``value`` to the sorted ids of the input
  cells it was derived from, or
* one sorted tuple of ids: *every* attribute of ``value`` <- those cells. This
  is what black boxes (``Map``, ``FlatMap``, ``ParDo``) and global aggregates
  produce; carried as is along black-box paths, it is never rebuilt per
  attribute or re-sorted, and is spread over the attributes only where a
  table is written.

The attributes of a value are:

* dict, ``beam.Row``, ``NamedTuple``: its fields;
* a 2-tuple ``(key, value)`` (Beam's KV): ``"key"``, then the fields of the
  value when it has named fields (``CoGroupByKey`` results, KV of rows), else
  ``"value"``;
* anything else: the single attribute ``"value"``.

These functions run on the workers; they are pure and picklable by reference.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from typing import Any, Union

Ids = tuple[int, ...]
Prov = Union[Ids, dict[str, Ids]]  # noqa: UP007 - Beam reads this annotation as a type hint
Traced = tuple[Any, Prov]


def is_named(value: Any) -> bool:
    return isinstance(value, dict) or _is_row(value) or (isinstance(value, tuple) and hasattr(value, "_fields"))


def _is_row(value: Any) -> bool:
    return type(value).__name__ == "Row" and hasattr(value, "as_dict")


def named_cells(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    if _is_row(value):
        return dict(value.as_dict())
    return dict(zip(value._fields, value, strict=True))


def is_kv(value: Any) -> bool:
    return isinstance(value, tuple) and not hasattr(value, "_fields") and len(value) == 2


def cells(value: Any) -> dict[str, Any]:
    """Attribute -> cell value, in the value's own attribute order."""
    if is_named(value):
        return named_cells(value)
    if is_kv(value):
        key, inner = value
        rest = named_cells(inner) if is_named(inner) else {"value": inner}
        return {"key": key, **{a: v for a, v in rest.items() if a != "key"}}
    return {"value": value}


def attributes(value: Any) -> tuple[str, ...]:
    return tuple(cells(value))


def union(groups: Iterable[Iterable[int]]) -> Ids:
    merged: set[int] = set()
    for ids in groups:
        merged.update(ids)
    return tuple(sorted(merged))


def all_ids(prov: Prov | Mapping[str, Ids]) -> Ids:
    """Every id of an element's provenance, sorted."""
    if type(prov) is tuple:
        return prov
    assert isinstance(prov, Mapping)
    if len(prov) == 1:
        return tuple(next(iter(prov.values())))
    return union(prov.values())


def ids_of(prov: Prov, attribute: str) -> Ids:
    """The ids of one attribute (``()`` when it has none)."""
    if type(prov) is tuple:
        return prov
    assert isinstance(prov, dict)
    return prov.get(attribute, ())


def per_attribute(value: Any, prov: Prov) -> dict[str, Ids]:
    """``prov`` as attribute -> ids (a tuple is spread over every attribute of ``value``)."""
    if type(prov) is tuple:
        return {a: prov for a in attributes(value)} if prov else {}
    assert isinstance(prov, dict)
    return prov


def black_box(value: Any, prov: Prov) -> Ids:
    """Every attribute of ``value`` <- every input cell of the element it came from."""
    return all_ids(prov)


def key_and_value_ids(value: Any, prov: Prov) -> tuple[Ids, Ids]:
    """The ids of a KV element's key and of its value (all other attributes).

    An element that is not KV-shaped (e.g. a two-field NamedTuple Beam still
    groups as a pair), or whose provenance is one tuple, gives all its ids to both.
    """
    if type(prov) is tuple:
        return prov, prov
    assert isinstance(prov, dict)
    if "key" not in prov or not is_kv(value):
        ids = all_ids(prov)
        return ids, ids
    return tuple(prov["key"]), union(ids for a, ids in prov.items() if a != "key")


def kv_prov(value: Any, key_ids: Ids, value_ids: Ids, by_attribute: Mapping[str, Ids] | None = None) -> Prov:
    """Provenance of a KV result: ``key`` <- ``key_ids``; each value attribute
    <- its entry in ``by_attribute`` if given, else ``value_ids``."""
    if not by_attribute and key_ids == value_ids:
        return key_ids
    extra = by_attribute or {}
    return {a: key_ids if a == "key" else extra.get(a, value_ids) for a in attributes(value)}


# -- a canonical, process-independent form for ordering and equality --------
def canonical(value: Any) -> Any:
    """A form of ``value`` whose ``repr`` is the same in every process
    (no hash-randomised set order, no dict insertion order)."""
    if is_named(value):
        return ("N", tuple(sorted((k, canonical(v)) for k, v in named_cells(value).items())))
    if isinstance(value, (list, tuple)):
        return ("L", tuple(canonical(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("S", tuple(sorted(repr(canonical(v)) for v in value)))
    if isinstance(value, Mapping):
        return ("M", tuple(sorted((repr(canonical(k)), canonical(v)) for k, v in value.items())))
    if hasattr(value, "__iter__") and not isinstance(value, (str, bytes)):
        return ("L", tuple(canonical(v) for v in value))
    return (type(value).__name__, repr(value))


def value_key(value: Any) -> str:
    return repr(canonical(value))


def element_key(element: Traced) -> str:
    """Orders the elements of a step output deterministically: by content,
    then by provenance (equal keys mean interchangeable elements)."""
    value, prov = element
    return repr((canonical(value), tuple(sorted((a, tuple(ids)) for a, ids in per_attribute(value, prov).items()))))


def bucket(key: str, buckets: int) -> int:
    return zlib.crc32(key.encode()) % buckets
