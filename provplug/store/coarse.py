"""A run's coarse edges on disk: one small JSON file, ``coarse.json``.

Like ``locations.json`` it sits in the run's directory, is listed among the
run's datasets in its manifest and is committed (and deleted) with the run::

    {"format": "provplug-coarse", "version": 1, "edges": [
      {"op": 7, "src_table": 3, "dst_table": 4, "reason": "...",
       "columns": [[0, [0, 2]], [1, [1]]]}, ...]}

``columns: null``: every output column on every input column. One record
per (op, input table, output table) whatever the rows: a coarse step costs
no triple.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import Any

from provplug.errors import DamagedStoreError
from provplug.model import CoarseEdge
from provplug.plugin.protocols import Store
from provplug.plugin.writers import Destination
from provplug.store import files as storefiles

COARSE = "coarse.json"  # the dataset name in a run's manifest, and the file's name
FORMAT = "provplug-coarse"
VERSION = 1


def coarse_json(edges: Iterable[CoarseEdge]) -> str:
    return json.dumps({"format": FORMAT, "version": VERSION, "edges": [_record(e) for e in edges]})


def _record(edge: CoarseEdge) -> dict[str, Any]:
    return {
        "op": edge.op,
        "src_table": edge.src_table,
        "dst_table": edge.dst_table,
        "reason": edge.reason,
        "columns": None if edge.columns is None else [[out, list(ins)] for out, ins in edge.columns],
    }


def parse_coarse(text: str, what: str) -> list[CoarseEdge]:
    """The edges of a ``coarse.json`` text; anything else is damage to ``what``."""
    try:
        record = json.loads(text)
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise ValueError("not a provplug coarse-edges file")
        if record.get("version") != VERSION:
            raise ValueError(f"unsupported version {record.get('version')!r}")
        return [_edge(e) for e in record["edges"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DamagedStoreError(f"damaged store file {what}: {exc}") from None


def _edge(record: dict[str, Any]) -> CoarseEdge:
    columns = record["columns"]
    return CoarseEdge(
        int(record["op"]),
        int(record["src_table"]),
        int(record["dst_table"]),
        str(record["reason"]),
        None if columns is None else tuple((int(out), tuple(int(i) for i in ins)) for out, ins in columns),
    )


def write_coarse(directory: Destination, edges: Iterable[CoarseEdge]) -> None:
    """Write ``coarse.json`` into a run's directory (the recorder marks the dataset)."""
    directory.write_text(COARSE, coarse_json(edges))


def coarse_of(store: Store[Any], run_ids: Collection[str] | None = None) -> list[CoarseEdge]:
    """The coarse edges of every committed run of ``store`` (of ``run_ids``
    only, when given), oldest run first."""
    return storefiles.run_text_datasets(store, COARSE, parse_coarse, run_ids)
