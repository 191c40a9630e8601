"""W3C PROV exports (PROV-JSON, PROV-N) through the ``prov`` package.

=========================  ============================================================
provplug                   PROV
=========================  ============================================================
value (cell)               entity ``ppv:<value id>``, ``prov:type pp:Value``, attributes
                           ``pp:table``, ``pp:column``, ``pp:rowNumber``, ``pp:row`` (the
                           row as JSON text) and ``pp:value`` (absent when not stored)
table                      entity ``ppt:<table id>``, ``prov:type prov:Collection``,
                           ``prov:label`` its name; ``hadMember`` each exported value of it
op (step invocation)       activity ``ppo:<op id>``, ``prov:label`` its name, start and end
                           times, ``pp:kind``, ``pp:operations``, ``pp:run``
op read / wrote a table    ``used(op, table)`` / ``wasGeneratedBy(table, op)``
triple ⟨src, dst, op⟩      ``wasDerivedFrom(dst, src, op)``, ``used(op, src)``,
                           ``wasGeneratedBy(dst, op)``
coarse step (no triple)    activity with ``pp:kind "coarse"`` and ``pp:coarseReason``;
                           ``wasDerivedFrom(output table, input table, op)`` with
                           ``pp:coarse true`` and ``pp:columns`` (``out<-in,in; ...``)
=========================  ============================================================

Every name lives under ``https://w3id.org/provplug/``: ``pp`` is the
vocabulary, ``ppv``/``ppt``/``ppo`` the values, tables and ops of the store.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from provplug.export.scope import Table
from provplug.model import coarse_reason

if TYPE_CHECKING:
    from provplug.plugin.protocols import ExportSelection

BASE = "https://w3id.org/provplug/"
NAMESPACES = {"pp": f"{BASE}ns#", "ppv": f"{BASE}value/", "ppt": f"{BASE}table/", "ppo": f"{BASE}op/"}


def document(selection: ExportSelection, all_tables: dict[int, Table]) -> Any:
    """The selection as a ``prov.model.ProvDocument``."""
    from prov.model import PROV, ProvDocument

    doc = ProvDocument()
    pp = {prefix: doc.add_namespace(prefix, uri) for prefix, uri in NAMESPACES.items()}["pp"]
    tables = _tables_involved(selection, all_tables)
    for table in tables.values():
        attributes: dict[str, Any] = {"prov:type": PROV["Collection"], **_table_attributes(table)}
        doc.entity(f"ppt:{table.table_id}", attributes)
    for op in selection.ops:
        _add_activity(doc, op, tables)
    for value in selection.values:
        attributes = {"prov:type": pp["Value"], **_value_attributes(value)}
        doc.entity(f"ppv:{value['value_id']}", attributes)
        if value["table_id"] in tables:
            doc.hadMember(f"ppt:{value['table_id']}", f"ppv:{value['value_id']}")
    _add_derivations(doc, selection.edges)
    _add_coarse_derivations(doc, selection, tables)
    return doc


def _add_coarse_derivations(doc: Any, selection: ExportSelection, tables: dict[int, Table]) -> None:
    """A coarse step's outputs derive from its inputs as tables, column by column as far as known."""
    for edge in selection.coarse:
        if edge.src_table not in tables or edge.dst_table not in tables:
            continue
        src, dst = tables[edge.src_table], tables[edge.dst_table]
        mapping = [(c, edge.sources_of(j, len(src.columns))) for j, c in enumerate(dst.columns)]
        columns = "; ".join(f"{c}<-{','.join(src.columns[i] for i in ins)}" for c, ins in mapping if ins)
        doc.wasDerivedFrom(
            f"ppt:{edge.dst_table}",
            f"ppt:{edge.src_table}",
            f"ppo:{edge.op}",
            other_attributes={"pp:coarse": True, "pp:columns": columns},
        )


def prov_json(selection: ExportSelection, all_tables: dict[int, Table]) -> str:
    return str(document(selection, all_tables).serialize(format="json", indent=1))


def prov_n(selection: ExportSelection, all_tables: dict[int, Table]) -> str:
    return str(document(selection, all_tables).get_provn())


def _tables_involved(selection: ExportSelection, all_tables: dict[int, Table]) -> dict[int, Table]:
    """The selection's tables and every table its ops read or wrote."""
    wanted = {t.table_id for t in selection.tables}
    for op in selection.ops:
        wanted.update(op["inputs"])
        wanted.update(op["outputs"])
    return {t: all_tables[t] for t in sorted(wanted) if t in all_tables}


def _table_attributes(table: Table) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "prov:label": table.name,
        "pp:run": table.run_id,
        "pp:origin": table.origin,
        "pp:columns": ", ".join(table.columns),
    }
    if table.rows is not None:
        attributes["pp:rows"] = int(table.rows)
    return attributes


def _add_activity(doc: Any, op: dict[str, Any], tables: dict[int, Table]) -> None:
    activity = f"ppo:{op['op_id']}"
    doc.activity(
        activity,
        op["started"],
        op["finished"],
        {
            "prov:label": op["name"],
            "pp:kind": op["kind"],
            "pp:operations": ", ".join(op["operations"]),
            "pp:run": op["run_id"],
            **({"pp:coarseReason": coarse_reason(op)} if op["kind"] == "coarse" else {}),
        },
    )
    for table in op["inputs"]:
        if table in tables:
            doc.used(activity, f"ppt:{table}")
    for table in op["outputs"]:
        if table in tables:
            doc.wasGeneratedBy(f"ppt:{table}", activity)


def _value_attributes(value: dict[str, Any]) -> dict[str, Any]:
    label = f"{value['table']}.{value['column']}" if value.get("column") else str(value["table"])
    attributes: dict[str, Any] = {"pp:table": value["table"]}
    if value.get("column") is not None:
        attributes["pp:column"] = value["column"]
    if value.get("row_number") is not None:
        attributes["pp:rowNumber"] = value["row_number"]
    if value.get("row") is not None:
        attributes["pp:row"] = json.dumps(value["row"], default=str, sort_keys=False)
        literal = _literal(value.get("value"))
        if literal is not None:
            attributes["pp:value"] = literal
            label = f"{label} = {literal}"
    attributes["prov:label"] = label
    return attributes


def _literal(value: Any) -> Any:
    """A cell value as a PROV literal: numbers, text and booleans as they are,
    anything else (and NaN, infinities) as text; None for a null cell."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, default=str)


def _add_derivations(doc: Any, edges: list[tuple[int, int, int]]) -> None:
    used: set[tuple[int, int]] = set()
    generated: set[tuple[int, int]] = set()
    for src, dst, op in edges:
        doc.wasDerivedFrom(f"ppv:{dst}", f"ppv:{src}", f"ppo:{op}")
        if (op, src) not in used:
            used.add((op, src))
            doc.used(f"ppo:{op}", f"ppv:{src}")
        if (op, dst) not in generated:
            generated.add((op, dst))
            doc.wasGeneratedBy(f"ppv:{dst}", f"ppo:{op}")
