"""Index statistics for ``provplug stats`` (empty until the store is indexed).

Besides totals, ``per_split`` gives the paper's Table 9 for every large
component (at least theta values) and every split that holds sets of it:
number of sets, sets with at least 1,000 nodes, nodes of the largest set.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from provplug.errors import DamagedIndexError
from provplug.index import integrity, layout
from provplug.index.generation import check_generation, current_generation, generation_meta
from provplug.plugin.protocols import Store
from provplug.store import files as storefiles

BIG_SET = 1_000


def index_stats(store: Store) -> dict[str, Any]:
    """The live index's statistics; for a damaged index, what is damaged
    (``index_intact`` false and ``index_damage``: stats reports what it
    finds, while queries refuse a damaged index)."""
    name = current_generation(store)
    if name is None:
        return {}
    try:
        return _stats(store, name)
    except DamagedIndexError as exc:
        return {"indexed": True, "index_generation": name, "index_intact": False, "index_damage": str(exc)}


def _stats(store: Store, name: str) -> dict[str, Any]:
    meta = generation_meta(store, name)
    check_generation(store, name, meta)
    folder = store.path(layout.INDEX_DIR, name)
    with integrity.index_damage(store.uri, name):
        sets = storefiles.read_parquet(store.fs, f"{folder}/sets.parquet")
        components = storefiles.read_parquet(store.fs, f"{folder}/components.parquet")
    counts = meta["counts"]
    indexed_runs = set(meta["runs"])
    return {
        "indexed": True,
        "index_intact": True,
        "index_current": indexed_runs == {m["run_id"] for m in store.runs()},
        "index_generation": meta["generation"],
        "theta": meta["theta"],
        "splits": meta["splits"],
        "components": counts["components"],
        "sets": counts["sets"],
        "set_dependencies": counts["set_dependencies"],
        "largest_component": _max(components, "nodes"),
        "largest_set": _max(sets, "nodes"),
        "large_components": int(pc.sum(pc.greater_equal(components["nodes"], meta["theta"])).as_py() or 0),
        "per_split": table9(sets, components, meta["theta"]),
    }


def _max(t: pa.Table, column: str) -> int:
    return int(pc.max(t[column]).as_py() or 0) if t.num_rows else 0


def table9(sets: pa.Table, components: pa.Table, theta: int) -> list[dict[str, Any]]:
    """One row per (large component, split): sets, sets >= 1,000 nodes, largest set."""
    large = components.filter(pc.greater_equal(components["nodes"], theta))
    sizes = dict(zip(large["ccid"].to_pylist(), large["nodes"].to_pylist(), strict=True))
    part = sets.filter(pc.is_in(sets["ccid"], value_set=large["ccid"])) if large.num_rows else sets.slice(0, 0)
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for ccid, split, nodes in zip(
        part["ccid"].to_pylist(), part["split"].to_pylist(), part["nodes"].to_pylist(), strict=True
    ):
        row = rows.setdefault(
            (ccid, split or ""),
            {
                "ccid": ccid,
                "component_nodes": sizes[ccid],
                "split": split,
                "sets": 0,
                "sets_ge_1000": 0,
                "largest_set": 0,
            },
        )
        row["sets"] += 1
        row["sets_ge_1000"] += nodes >= BIG_SET
        row["largest_set"] = max(row["largest_set"], nodes)
    return sorted(rows.values(), key=lambda r: (-r["component_nodes"], r["ccid"], _split_key(r["split"] or "")))


def _split_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.removeprefix("sp").split(".") if p.isdigit())
