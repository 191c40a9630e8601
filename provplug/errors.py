"""Named exceptions. Every user-facing failure is a ``ProvplugError`` whose
message is one line; the CLI prints it as ``provplug: error: ...`` and exits 2."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


class ProvplugError(Exception):
    """Base class: an error caused by input or state the user can fix."""


class StoreError(ProvplugError):
    """The store is missing, malformed, or cannot be written."""


class ImportInputError(ProvplugError):
    """A provenance file to import is missing or malformed."""


class CaptureError(ProvplugError):
    """A pipeline step cannot be captured exactly."""


class CaptureNotStartedError(CaptureError):
    """A run of intercepted writes could not start (not strict): the writes go on uncaptured."""


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


class MemoryBudgetError(ProvplugError):
    """A memory budget that is not a size (see provplug.index.budget)."""


class SplitsError(ProvplugError):
    """A ``--splits`` document (or a split chooser's answer) is unusable."""


class WherePredicateError(LineageQueryError):
    """``--where`` is not one boolean expression over the table's columns."""


class WhereLimitError(WherePredicateError):
    """A ``--where`` predicate met a bound: its time, memory or thread limit."""


class PictureError(ProvplugError):
    """A picture cannot be made (Graphviz or its Python package missing, or
    Graphviz failed)."""


class ExportError(ProvplugError):
    """An export cannot be made as asked (too large, or a format's package is missing)."""


class BadParameter(LineageQueryError):
    """A query parameter of the explorer's API is malformed (not a number, not one of the choices)."""


class MissingExtraError(ProvplugError):
    """A command needs an optional extra that is not installed."""


class UsageError(ProvplugError):
    """A malformed command line (what argparse would print and exit on)."""

    def __init__(self, message: str, parser: argparse.ArgumentParser) -> None:
        super().__init__(message)
        self.parser = parser


class RetentionError(ProvplugError):
    """A retention rule (``provplug gc --keep-last N`` / ``--older-than DAYS``) that makes no sense."""


class LostFilesError(CaptureError):
    """Files Spark's tasks reported writing into the store are not there (or
    hold other counts): the executors do not share the store's storage. The
    run fails and commits nothing, whatever the capture mode."""


class VersionInUseError(StoreError):
    """A run cannot be deleted: another run's lineage reads a dataset
    version it wrote (``--force`` deletes it; answers then mark the version missing)."""


class ConnectionSettingsError(StoreError):
    """A setting that says how to reach object storage (``spark.provplug.fs.*``,
    ``AWS_ENDPOINT_URL``, ``AWS_REGION``) is unknown or malformed."""
