"""What an export or a diff reads: committed runs named by a unique prefix,
one run's table by name, and a run's ops — straight from the store API, so
that a run's tables are read even where another run wrote the same name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provplug.model import CoarseEdge
from provplug.store.catalogue import StoreCatalogue, TableEntry
from provplug.store.coarse import coarse_of

# One table of one run, as the store's catalogue records it (the catalogue's own record).
Table = TableEntry

if TYPE_CHECKING:
    import pyarrow as pa

    from provplug.plugin.protocols import Store


def resolve_run(store: Store, prefix: str) -> str:
    """The committed run whose id is ``prefix`` or the one run whose id starts with it."""
    from provplug.store.runs import select_run

    return str(select_run(store.runs(), prefix)["run_id"])  # no table or op read


def tables_of(store: Store, run_ids: set[str] | None = None) -> list[Table]:
    """The tables of ``run_ids`` (every committed run when None), by table id."""
    return StoreCatalogue.of(store).tables_of(run_ids)


def table_in_run(store: Store, name: str, run_id: str) -> Table:
    """The table called ``name`` that run ``run_id`` wrote."""
    return StoreCatalogue.of(store).table_in_run(name, run_id)


def ops_of(store: Store, run_ids: set[str] | None = None) -> list[dict[str, Any]]:
    """The op records of ``run_ids`` (every run when None), oldest first."""
    return StoreCatalogue.of(store).ops_of(run_ids)


def stored_rows(store: Store, table: Table) -> pa.Table:
    """The table's stored rows with their row numbers (empty when none are stored)."""
    import pyarrow as pa

    from provplug import schema

    rows = store.read_rows(table.run_id, table.table_id) if table.stored_rows else None
    return pa.table({schema.ROW_COLUMN: pa.array([], pa.int64())}) if rows is None else rows


def value_count(store: Store, run_ids: set[str] | None) -> int:
    """Values (cells) of the runs, as their manifests count them."""
    return sum(int(m["counts"].get("values", 0)) for m in store.runs() if run_ids is None or m["run_id"] in run_ids)


def coarse_edges_of(store: Store, ops: list[dict[str, Any]]) -> list[CoarseEdge]:
    """The coarse edges of the coarse ops among ``ops``."""
    coarse = {int(o["op_id"]): o["run_id"] for o in ops if o.get("kind") == "coarse"}
    if not coarse:
        return []
    return [e for e in coarse_of(store, set(coarse.values())) if e.op in coarse]
