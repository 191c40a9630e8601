"""The lineage index: components, workflow graph, splits, connected sets
(README, "Indexing and lineage queries").

Public API::

    build_index(store, theta=25_000, splits=None, spark=None, engine="auto", progress=SILENT)
    current_dir(store) -> str          # path of the live generation (NotIndexedError if none)
    current_generation(store) -> str | None
    read_meta(store) -> dict | None    # the live generation's meta.json

The files under ``current_dir(store)`` follow :mod:`provplug.index.layout`.
"""

from __future__ import annotations

from .build import DEFAULT_THETA, build_index
from .generation import current_dir, current_generation, read_meta

__all__ = ["DEFAULT_THETA", "build_index", "current_dir", "current_generation", "read_meta"]
