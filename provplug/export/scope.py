"""What an export or a diff reads: committed runs named by a unique prefix,
one run's table by name, and a run's ops — straight from the store API, so
that a run's tables are read even where another run wrote the same name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import LineageQueryError

if TYPE_CHECKING:
    import pyarrow as pa

    from ..protocols import Store


class RunSelectionError(LineageQueryError):
    """A run id (or prefix) names no committed run, or more than one."""


@dataclass(frozen=True)
class Table:
    """One table of one run, as the store's catalogue records it."""

    table_id: int
    name: str
    run_id: str
    origin: str
    columns: tuple[str, ...]
    rows: int | None
    stored_rows: bool


def resolve_run(store: Store, prefix: str) -> str:
    """The committed run whose id is ``prefix`` or starts with it."""
    run_ids = [m["run_id"] for m in store.runs()]
    if prefix in run_ids:
        return prefix
    matches = [r for r in run_ids if r.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunSelectionError(f"no run {prefix!r} in {store.uri} (runs: {', '.join(run_ids) or 'none'})")
    raise RunSelectionError(f"run prefix {prefix!r} is ambiguous: {', '.join(matches)}")


def tables_of(store: Store, run_ids: set[str] | None = None) -> list[Table]:
    """The tables of ``run_ids`` (every committed run when None), by table id."""
    rows = store.tables().to_pylist()
    return sorted(
        (
            Table(t["table_id"], t["name"], t["run_id"], t["origin"], tuple(t["columns"]), t["rows"], t["stored_rows"])
            for t in rows
            if run_ids is None or t["run_id"] in run_ids
        ),
        key=lambda t: t.table_id,
    )


def table_in_run(store: Store, name: str, run_id: str) -> Table:
    """The table called ``name`` that run ``run_id`` wrote."""
    tables = tables_of(store, {run_id})
    for table in tables:
        if table.name == name:
            return table
    known = ", ".join(sorted({t.name for t in tables})) or "none"
    raise LineageQueryError(f"run {run_id} has no table {name!r} (its tables: {known})")


def ops_of(store: Store, run_ids: set[str] | None = None) -> list[dict[str, Any]]:
    """The op records of ``run_ids`` (every run when None), oldest first."""
    ops = [o for o in store.ops().to_pylist() if run_ids is None or o["run_id"] in run_ids]
    return sorted(ops, key=lambda o: (o["started"] is None, o["started"] or 0, o["op_id"]))


def stored_rows(store: Store, table: Table) -> pa.Table:
    """The table's stored rows with their row numbers (empty when none are stored)."""
    import pyarrow as pa

    from .. import schema

    rows = store.read_rows(table.run_id, table.table_id) if table.stored_rows else None
    return pa.table({schema.ROW_COLUMN: pa.array([], pa.int64())}) if rows is None else rows


def value_count(store: Store, run_ids: set[str] | None) -> int:
    """Values (cells) of the runs, as their manifests count them."""
    return sum(int(m["counts"].get("values", 0)) for m in store.runs() if run_ids is None or m["run_id"] in run_ids)
