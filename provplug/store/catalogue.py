"""The one typed catalogue of a store: its committed runs (numbered, oldest
first), the tables each wrote and the ops each ran, read once from the
store's datasets. Every other view — the query catalogue of value ids
(:mod:`provplug.query.catalog`), the index's table codes and ``G_wf``
(:mod:`provplug.index.workflow`), what an export or a diff reads
(:mod:`provplug.export.scope`) and the workflow picture
(:mod:`provplug.explore.graph`) — is built from it, so that all of them agree
on what a run, a table and an op are, and choose runs the same way
(:func:`provplug.store.runs.select_run`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

from provplug.errors import LineageQueryError
from provplug.plugin.protocols import Store
from provplug.store.runs import Manifest, numbered, select_run


@dataclasses.dataclass(frozen=True)
class TableEntry:
    """One table of one run, as the store's catalogue records it."""

    table_id: int
    name: str
    run_id: str
    origin: str
    columns: tuple[str, ...]
    rows: int | None
    stored_rows: bool
    namespace: str | None = None  # the dataset it is (OpenLineage naming); None in older stores
    dataset: str | None = None

    @classmethod
    def of(cls, record: dict[str, Any]) -> TableEntry:
        """From a row of the store's ``tables`` dataset."""
        return cls(
            int(record["table_id"]),
            record["name"],
            record["run_id"],
            record["origin"],
            tuple(record["columns"] or ()),
            record["rows"],
            bool(record["stored_rows"]),
            record.get("namespace"),
            record.get("dataset"),
        )


@dataclasses.dataclass(frozen=True)
class StoreCatalogue:
    """Runs (manifests by run number: the last is the latest), tables by id
    and ops (records of the ``ops`` dataset, oldest first) of a store."""

    runs: tuple[dict[str, Any], ...]
    tables: dict[int, TableEntry]
    ops: tuple[dict[str, Any], ...]

    @classmethod
    def of(cls, store: Store[Any], manifests: list[dict[str, Any]] | None = None) -> StoreCatalogue:
        """The catalogue of ``store`` (of ``manifests``, when the caller has
        read them already: they are the runs it names)."""
        runs = numbered(store.runs() if manifests is None else manifests)
        tables = {t.table_id: t for t in map(TableEntry.of, store.tables().to_pylist())}
        ops = sorted(store.ops().to_pylist(), key=lambda o: (o["started"] is None, o["started"] or 0, o["op_id"]))
        return cls(tuple(runs), dict(sorted(tables.items())), tuple(ops))

    def run(self, selector: str) -> Manifest:
        """The run ``selector`` names: a number, ``latest``, ``latest~N``, a label or an id prefix."""
        return select_run(self.runs, selector)

    def tables_of(self, run_ids: Collection[str] | None = None) -> list[TableEntry]:
        """The tables of ``run_ids`` (every committed run when None), by table id."""
        return [t for t in self.tables.values() if run_ids is None or t.run_id in run_ids]

    def table_in_run(self, name: str, run_id: str) -> TableEntry:
        """The table called ``name`` that run ``run_id`` wrote."""
        tables = self.tables_of({run_id})
        for table in tables:
            if table.name == name:
                return table
        known = ", ".join(sorted({t.name for t in tables})) or "none"
        raise LineageQueryError(f"run {run_id} has no table {name!r} (its tables: {known})")

    def ops_of(self, run_ids: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The op records of ``run_ids`` (every run when None), oldest first."""
        return [o for o in self.ops if run_ids is None or o["run_id"] in run_ids]

    def table_names(self) -> tuple[str, ...]:
        """Every table name, sorted: a table is its name across runs (the index's nodes of ``G_wf``)."""
        return tuple(sorted({t.name for t in self.tables.values()}))
