"""The lineage index: components, workflow graph, splits, connected sets
(docs/queries.md, "Indexing and lineage queries").

Public API::

    build_index(store, theta=25_000, splits=None, spark=None, engine="auto", progress=SILENT)
    current_dir(store) -> str          # path of the live generation (NotIndexedError if none)
    current_generation(store) -> str | None
    read_meta(store) -> dict | None    # the live generation's meta.json

The files under ``current_dir(store)`` follow :mod:`provplug.index.layout`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Components of at least this many values are partitioned into sets. Defined
# here, not in .build, so that the command line can show it without loading
# pyarrow (the rest of the API loads on first use, PEP 562).
DEFAULT_THETA = 25_000

if TYPE_CHECKING:  # (build_index stays untyped here: .build imports DEFAULT_THETA from this module)
    from provplug.index.generation import current_dir, current_generation, read_meta

_LAZY = {
    "build_index": "provplug.index.build",
    "current_dir": "provplug.index.generation",
    "current_generation": "provplug.index.generation",
    "read_meta": "provplug.index.generation",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'provplug.index' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = ["DEFAULT_THETA", "build_index", "current_dir", "current_generation", "read_meta"]
