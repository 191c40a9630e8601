"""provplug: attribute-level provenance capture, storage and lineage queries."""

from __future__ import annotations

from .errors import (
    CaptureError,
    ImportInputError,
    LineageQueryError,
    NotIndexedError,
    PluginError,
    ProvplugError,
    StoreError,
)
from .capture import capture, current_run, step
from .hookspecs import hookimpl
from .store import open_store
from .query.api import open  # noqa: A004 - provplug.open(STORE) for lineage queries

__version__ = "0.1.0"

__all__ = [
    "CaptureError",
    "ImportInputError",
    "LineageQueryError",
    "NotIndexedError",
    "PluginError",
    "ProvplugError",
    "StoreError",
    "hookimpl",
    "step",
    "capture",
    "current_run",
    "open_store",
    "open",
]

