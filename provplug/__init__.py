"""provplug: attribute-level provenance capture, storage and lineage queries.

``import provplug`` — and so ``provplug --help`` and every command's
start-up — loads no pandas, pyarrow, numpy, duckdb or Spark: the query API
loads on first use (PEP 562), capture's writers when a run first writes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from provplug.errors import (
    CaptureError,
    ImportInputError,
    LineageQueryError,
    NotIndexedError,
    PluginError,
    ProvplugError,
    StoreError,
)
from provplug.ingest.capture import capture, current_run, module, step
from provplug.plugin.markers import hookimpl

if TYPE_CHECKING:
    from provplug.api import open
    from provplug.ingest.scripts import capture_writes
    from provplug.store.open import open_store

__version__ = "0.1.0"

# public name -> the module that defines it (a module named like its
# attribute, such as provplug.capture, must be imported eagerly instead: its
# import would bind the module over the name)
_LAZY = {"open": "provplug.api", "capture_writes": "provplug.ingest.scripts", "open_store": "provplug.store.open"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'provplug' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CaptureError",
    "ImportInputError",
    "LineageQueryError",
    "NotIndexedError",
    "PluginError",
    "ProvplugError",
    "StoreError",
    "capture",
    "capture_writes",
    "current_run",
    "hookimpl",
    "module",
    "open",
    "open_store",
    "step",
]
