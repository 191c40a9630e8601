"""provplug: attribute-level provenance capture, storage and lineage queries."""

from __future__ import annotations

from .capture import capture, current_run, step
from .errors import (
    CaptureError,
    ImportInputError,
    LineageQueryError,
    NotIndexedError,
    PluginError,
    ProvplugError,
    StoreError,
)
from .markers import hookimpl
from .plugins import open_store
from .query.api import open

__version__ = "0.1.0"

__all__ = [
    "CaptureError",
    "ImportInputError",
    "LineageQueryError",
    "NotIndexedError",
    "PluginError",
    "ProvplugError",
    "StoreError",
    "capture",
    "current_run",
    "hookimpl",
    "open",
    "open_store",
    "step",
]
