"""Standard exports of a store, a run or a lineage answer: W3C PROV (PROV-JSON,
PROV-N, through the ``prov`` package) and OpenLineage (RunEvents with
column-lineage facets, through ``openlineage-python``), and any format a
plugin registers (``provplug_register_export_formats``; the built-in ones are
registered the same way, by :mod:`provplug.export.formats`).

``provplug export STORE [--run R] [T.C --where P | --value-id N] --format F``:
without a target the whole run (or store) is exported — PROV: every op as an
activity, every table as an entity (a collection), and every value and triple
when there are at most :data:`MAX_WHOLE_VALUES` values; OpenLineage: one
event per op with the column lineage of all its triples. With a target, the
target's lineage answer: its values and edges (PROV), the ops on its edges
and the column pairs of those edges (OpenLineage).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from provplug.export.selection import MAX_WHOLE_VALUES, ExportError, Selection, Target, select

if TYPE_CHECKING:
    from provplug.plugin.manager import Plugins
    from provplug.plugin.protocols import ExportFormat, Store

__all__ = ["MAX_WHOLE_VALUES", "ExportError", "Selection", "Target", "export", "export_format", "format_names"]


def export(
    store: Store,
    fmt: str,
    run: str | None = None,
    target: Target | None = None,
    namespace: str | None = None,
    plugins: Plugins | None = None,
) -> str | bytes:
    """The export of ``store`` (one ``run``, or the whole store; or ``target``'s lineage)
    in the registered format ``fmt``: text, or bytes for a binary format."""
    chosen = export_format(fmt, plugins)
    for module in chosen.requires:
        _require(module)
    store.check()
    selection = select(store, run, target, with_values=chosen.lists_values)
    return chosen.render(store, selection, namespace)


def export_format(name: str, plugins: Plugins | None = None) -> ExportFormat:
    """The registered export format called ``name``."""
    formats = _registry(plugins)
    if name not in formats:
        raise ExportError(f"unknown export format {name!r} (formats: {', '.join(formats)})")
    return formats[name]


def format_names(plugins: Plugins | None = None) -> list[str]:
    """The names of the registered export formats."""
    return list(_registry(plugins))


def _registry(plugins: Plugins | None) -> dict[str, ExportFormat]:
    from provplug.plugin.manager import get_plugins

    return (plugins or get_plugins()).export_formats()


def _require(module: str) -> None:
    top = module.split(".")[0]
    if importlib.util.find_spec(top) is None or importlib.util.find_spec(module) is None:
        raise ExportError(f"this export needs the {top} package: install provplug[export]")
