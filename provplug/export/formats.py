"""The built-in export formats, registered as a plugin through
``provplug_register_export_formats`` (the hook any format plugin implements).

``prov-json`` and ``prov-n`` are W3C PROV documents (through the ``prov``
package, :mod:`provplug.export.w3c_prov`); ``openlineage`` is a JSON array of
OpenLineage RunEvents with column-lineage facets (through
``openlineage-python``, :mod:`provplug.export.openlineage_events`).

Importing this module imports neither library: the registry is read to build
``provplug export --help``, so each format imports its library when it renders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provplug.plugin.markers import hookimpl

if TYPE_CHECKING:
    from provplug.plugin.protocols import ExportFormat, ExportSelection, Store


@dataclass(frozen=True)
class ProvFormat:
    """A W3C PROV serialisation of the selection (``serialization``: ``json`` or ``provn``)."""

    name: str
    description: str
    media_type: str
    extension: str
    serialization: str
    requires: tuple[str, ...] = ("prov",)
    lists_values: bool = True

    def render(self, store: Store, selection: ExportSelection, namespace: str | None) -> str:
        from provplug.export.scope import tables_of
        from provplug.export.w3c_prov import prov_json, prov_n

        all_tables = {t.table_id: t for t in tables_of(store)}
        return prov_json(selection, all_tables) if self.serialization == "json" else prov_n(selection, all_tables)


@dataclass(frozen=True)
class OpenLineageFormat:
    """One OpenLineage RunEvent per op of the selection, as a JSON array."""

    name: str = "openlineage"
    description: str = "a JSON array of OpenLineage RunEvents with column lineage"
    media_type: str = "application/json"
    extension: str = "json"
    requires: tuple[str, ...] = ("openlineage.client",)
    lists_values: bool = False  # events are per op: the column lineage is read from the triples

    def render(self, store: Store, selection: ExportSelection, namespace: str | None) -> str:
        from provplug.export.openlineage_events import events_json
        from provplug.export.scope import tables_of

        all_tables = {t.table_id: t for t in tables_of(store)}
        # A lineage answer's column lineage comes from its own edges; a whole run's from all its triples.
        triples = _edges_table(selection) if selection.targeted else None
        return events_json(store, selection, all_tables, namespace, triples)


def _edges_table(selection: ExportSelection) -> object:
    """A lineage answer's edges as the triples a column-lineage scan reads."""
    import pyarrow as pa

    src, dst, op = zip(*selection.edges, strict=True) if selection.edges else ((), (), ())
    return pa.table(
        {"src": pa.array(src, pa.int64()), "dst": pa.array(dst, pa.int64()), "op": pa.array(op, pa.int64())}
    )


BUILTIN_FORMATS: tuple[ExportFormat, ...] = (
    ProvFormat("prov-json", "W3C PROV-JSON", "application/json", "json", "json"),
    ProvFormat("prov-n", "W3C PROV-N", "text/provenance-notation", "provn", "provn"),
    OpenLineageFormat(),
)


@hookimpl
def provplug_register_export_formats(register: Callable[[ExportFormat], None]) -> None:
    for export_format in BUILTIN_FORMATS:
        register(export_format)
