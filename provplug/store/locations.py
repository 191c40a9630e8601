"""A run's location edges on disk: one small JSON file, ``locations.json``.

The file sits in the run's directory beside ``tables.parquet`` and is listed
among the run's datasets in its manifest, so it is committed (and deleted)
with the run, atomically. It holds every edge of the run::

    {"format": "provplug-locations", "version": 1, "edges": [
      {"op": 7, "src_table": 3, "dst_table": 4,
       "rates": {"consumption": 1, "production": 1, "buffer": null, "dynamic": false},
       "columns": [[0, [0]], [2, [1, 2]]],
       "dst_rows": {"firsts": [0, 67108864], "counts": [500, 498]},
       "src_rows": null}, ...]}

``src_rows: null`` is an aligned edge (output row r from input row r). The
file is small: two integers per partition per edge, whatever the rows.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from provplug.errors import DamagedStoreError, IdSpaceError, LocationError
from provplug.location.edges import LocationEdge, location_edge
from provplug.location.rates import Rates
from provplug.location.rows import RowRuns
from provplug.plugin.protocols import Store
from provplug.plugin.writers import Destination
from provplug.store import files as storefiles

LOCATIONS = "locations.json"  # the dataset name in a run's manifest, and the file's name
FORMAT = "provplug-locations"
VERSION = 1


def edges_json(edges: Iterable[LocationEdge]) -> str:
    return json.dumps({"format": FORMAT, "version": VERSION, "edges": [_edge_record(e) for e in edges]})


def _edge_record(edge: LocationEdge) -> dict[str, Any]:
    r = edge.rates
    return {
        "op": edge.op,
        "src_table": edge.src_table,
        "dst_table": edge.dst_table,
        "rates": {"consumption": r.consumption, "production": r.production, "buffer": r.buffer, "dynamic": r.dynamic},
        "columns": [[out, list(sources)] for out, sources in edge.columns],
        "dst_rows": edge.dst_rows.to_json(),
        "src_rows": None if edge.src_rows is None else edge.src_rows.to_json(),
    }


def parse_edges(text: str, what: str) -> list[LocationEdge]:
    """The edges of a ``locations.json`` text; anything else is damage to ``what``."""
    try:
        record = json.loads(text)
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise ValueError("not a provplug locations file")
        if record.get("version") != VERSION:
            raise ValueError(f"unsupported version {record.get('version')!r}")
        return [_edge(e) for e in record["edges"]]
    except (ValueError, KeyError, TypeError, AttributeError, LocationError, IdSpaceError) as exc:
        raise DamagedStoreError(f"damaged store file {what}: {exc}") from None


def _edge(record: dict[str, Any]) -> LocationEdge:
    rates = Rates(**record["rates"])
    src = record["src_rows"]
    return location_edge(
        record["op"],
        record["src_table"],
        record["dst_table"],
        {out: sources for out, sources in record["columns"]},
        _runs(record["dst_rows"]),
        None if src is None else _runs(src),
        rates,
    )


def _runs(record: dict[str, Sequence[int]]) -> RowRuns:
    return RowRuns(tuple(record["firsts"]), tuple(record["counts"]))


def write_locations(directory: Destination, edges: Iterable[LocationEdge]) -> None:
    """Write ``locations.json`` into a run's directory (the recorder marks the dataset)."""
    directory.write_text(LOCATIONS, edges_json(edges))


def read_locations(fs: Any, path: str) -> list[LocationEdge]:
    """The edges of one ``locations.json`` file."""
    return parse_edges(storefiles.read_text(fs, path), path)


def locations_of(store: Store[Any], run_ids: Collection[str] | None = None) -> list[LocationEdge]:
    """The location edges of every committed run of ``store`` (of the runs
    ``run_ids`` only, when given), oldest run first."""
    return storefiles.run_text_datasets(store, LOCATIONS, parse_edges, run_ids)
