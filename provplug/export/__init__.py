"""Standard exports of a store, a run or a lineage answer: W3C PROV (PROV-JSON,
PROV-N, through the ``prov`` package) and OpenLineage (RunEvents with
column-lineage facets, through ``openlineage-python``).

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
    from provplug.plugin.protocols import Store

FORMATS = ("prov-json", "prov-n", "openlineage")
_PACKAGES = {"prov-json": "prov", "prov-n": "prov", "openlineage": "openlineage.client"}

__all__ = ["FORMATS", "MAX_WHOLE_VALUES", "ExportError", "Selection", "Target", "export"]


def export(
    store: Store, fmt: str, run: str | None = None, target: Target | None = None, namespace: str | None = None
) -> str:
    """The export of ``store`` (one ``run``, or the whole store; or ``target``'s lineage) as text."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})")
    _require(_PACKAGES[fmt])
    store.check()
    selection = select(store, run, target, with_values=fmt != "openlineage")
    from provplug.export.scope import tables_of

    all_tables = {t.table_id: t for t in tables_of(store)}
    if fmt == "openlineage":
        from provplug.export.openlineage_events import events_json

        return events_json(store, selection, all_tables, namespace, _edges_table(selection) if target else None)
    from provplug.export.w3c_prov import prov_json, prov_n

    return prov_json(selection, all_tables) if fmt == "prov-json" else prov_n(selection, all_tables)


def _require(package: str) -> None:
    top = package.split(".")[0]
    if importlib.util.find_spec(top) is None or importlib.util.find_spec(package) is None:
        raise ExportError(f"this export needs the {top} package: install provplug[export]")


def _edges_table(selection: Selection) -> object:
    """A lineage answer's edges as the triples a column-lineage scan reads."""
    import pyarrow as pa

    src, dst, op = zip(*selection.edges, strict=True) if selection.edges else ((), (), ())
    return pa.table({"src": pa.array(src, pa.int64()), "dst": pa.array(dst, pa.int64()), "op": pa.array(op, pa.int64())})
