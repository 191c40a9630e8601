"""Reductions written as text, for the command line and configuration files.

A spec is ``TABLE=TECHNIQUE:key=value,key=value,...``, e.g.::

    Weather=sample:ratio=0.33,seed=1
    Weather=histogram:attribute=Temperature,width=6,variant=eliminate,buckets=1
    Weather=kmeans:attributes=Latitude|Longitude,k=3,variant=sample,ratio=0.66,seed=7
    Weather=equivalence:attribute=Country,variant=eliminate,classes=Australia
    Weather=keep:where=Country = 'Australia' AND Temperature < 20

Values are read as integers, numbers, ``true``/``false``/``none`` when they
look like one, ``|``-separated lists (``a|b``) otherwise, or text. ``where``
and ``assignment`` are SQL and stay text as written; a value may hold commas
as long as none is followed by ``name=`` (which starts the next parameter).
``seed`` is the reduction's seed (default 0). TECHNIQUE is the name of a
technique registered through ``provplug_register_reductions``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from provplug.errors import ReductionError
from provplug.plugin.reductions import Reduction

if TYPE_CHECKING:
    from provplug.plugin.manager import Plugins

_SQL_PARAMS = frozenset({"where", "assignment"})
_NEXT_PARAM = re.compile(r",(?=\s*[A-Za-z_]\w*\s*=(?!=))")
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def value_of(text: str) -> Any:
    """A parameter's text as a value (see the module docstring)."""
    text = text.strip()
    if "|" in text:
        return [value_of(part) for part in text.split("|")]
    if _INTEGER.fullmatch(text):
        return int(text)
    if _NUMBER.fullmatch(text):
        return float(text)
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    return text


def parse_params(text: str) -> dict[str, Any]:
    """``key=value,key=value`` as a dict (SQL values kept as text)."""
    params: dict[str, Any] = {}
    if not text.strip():
        return params
    for item in _NEXT_PARAM.split(text):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ReductionError(f"reduction parameter {item.strip()!r} is not key=value")
        if key in params:
            raise ReductionError(f"reduction parameter {key!r} is given twice")
        params[key] = raw.strip() if key in _SQL_PARAMS else value_of(raw)
    return params


def parse_reduction(text: str, plugins: Plugins | None = None) -> Reduction:
    """``TECHNIQUE:key=value,...`` as a reduction of a registered technique."""
    from provplug.plugin.manager import get_plugins

    name, _, rest = text.partition(":")
    name = name.strip()
    techniques = (plugins or get_plugins()).reductions()
    if name not in techniques:
        raise ReductionError(f"unknown reduction {name!r} (techniques: {', '.join(sorted(techniques))})")
    params = parse_params(rest)
    seed = params.pop("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ReductionError(f"seed must be an integer, not {seed!r}")
    reduction = techniques[name].build(params, seed)
    if not isinstance(reduction, Reduction):
        raise ReductionError(f"reduction technique {name!r} built a {type(reduction).__name__}, not a Reduction")
    return reduction


def parse_spec(text: str, plugins: Plugins | None = None) -> tuple[str, Reduction]:
    """``TABLE=TECHNIQUE:key=value,...`` as (table, reduction)."""
    table, sep, rest = text.partition("=")
    if not sep or not table.strip() or ":" in table or not rest.strip():
        raise ReductionError(f"reduction {text!r} is not TABLE=TECHNIQUE:key=value,...")
    return table.strip(), parse_reduction(rest, plugins)


def parse_specs(specs: Iterable[str], plugins: Plugins | None = None) -> dict[str, Reduction]:
    """Several ``TABLE=...`` specs as the ``reduce=`` mapping of ``provplug.capture``."""
    found: dict[str, Reduction] = {}
    for text in specs:
        table, reduction = parse_spec(text, plugins)
        if table in found:
            raise ReductionError(f"table {table!r} is reduced twice")
        found[table] = reduction
    return found


def reductions_from(value: Mapping[str, Any] | None, plugins: Plugins | None = None) -> dict[str, Reduction]:
    """A ``reduce=`` mapping whose values are reductions or their text
    (``TECHNIQUE:key=value,...``), as reductions."""
    found: dict[str, Reduction] = {}
    for table, item in (value or {}).items():
        if isinstance(item, str):
            found[str(table)] = parse_reduction(item, plugins)
        elif isinstance(item, Reduction):
            found[str(table)] = item
        else:
            raise ReductionError(f"reduce[{table!r}] is a {type(item).__name__}, not a reduction or its spec text")
    return found
