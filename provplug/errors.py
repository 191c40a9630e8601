"""Named exceptions. Every user-facing failure is a ``ProvplugError`` whose
message is one line; the CLI prints it as ``provplug: error: ...`` and exits 2."""

from __future__ import annotations


class ProvplugError(Exception):
    """Base class: an error caused by input or state the user can fix."""


class StoreError(ProvplugError):
    """The store is missing, malformed, or cannot be written."""


class ImportInputError(ProvplugError):
    """A provenance file to import is missing or malformed."""


class CaptureError(ProvplugError):
    """A pipeline step cannot be captured exactly."""


class PluginError(ProvplugError):
    """A plugin is malformed or no plugin can serve a request."""


class NotIndexedError(ProvplugError):
    """A query needs an index the store does not have (run ``provplug index``)."""


class LineageQueryError(ProvplugError):
    """A lineage query names an unknown table, column or value, or selects nothing."""


class IdSpaceError(ProvplugError):
    """A table, column or row number does not fit the value-id layout."""


class DamagedStoreError(StoreError):
    """A file of the store is truncated or unreadable (see provplug.store.files)."""


class DamagedIndexError(NotIndexedError):
    """The lineage index is incomplete or damaged: re-run ``provplug index``."""


class ReductionError(CaptureError):
    """A provenance reduction is malformed or cannot apply (see provplug.reduce)."""


class LocationError(CaptureError):
    """A location-based lineage model is ill-defined, or the data contradicts
    a step's declared rates (see provplug.location)."""
