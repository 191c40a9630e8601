"""From value ids to what a user reads: table, column, row and value.

Captured ids carry table and column in their bits (:mod:`provplug.ids`);
imported ids are looked up in the store's ``values`` mapping. Rows come from
``runs/RUN/rows/TABLE_ID/`` when the run stored them (else ``row`` and
``value`` are null).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from provplug import ids, schema, sortedints
from provplug.errors import LineageQueryError
from provplug.plugin.protocols import Store
from provplug.query.coarse import CoarseGraph
from provplug.query.index_reader import arrow_ids, cached, caches_of
from provplug.store import files as storefiles
from provplug.store.catalogue import StoreCatalogue, TableEntry
from provplug.store.runs import describe_run, describe_runs, run_summary, run_used, select_run
from provplug.store.versions import LinkedRead, RunVersions, versions_of


def jsonable(value: Any) -> Any:
    """A cell value as JSON can carry it (dates as ISO text, decimals as
    text). Floats stay floats, NaN and infinities too: the tree shows them,
    and :meth:`LineageAnswer.to_dict` turns them into null."""
    if value is None or isinstance(value, (bool, int, str, float)):
        return value
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, bytes)):
        return str(value) if isinstance(value, decimal.Decimal) else value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)


# A long-lived process keeps the whole imported-value mapping when it is at
# most this large (value_id, table_id, column_id as int64, sorted copies).
MAPPING_CACHE_BYTES = 512 << 20
MAPPING_ROW_BYTES = 48


class Catalog:
    """Tables, ops and imported value mappings of a store's committed runs."""

    def __init__(self, store: Store, manifests: list[dict[str, Any]]) -> None:
        self.store = store
        catalogue = StoreCatalogue.of(store, manifests)
        self.manifests = list(catalogue.runs)  # by run number: the last is the latest
        self.run_ids = tuple(m["run_id"] for m in manifests)
        self.tables: dict[int, TableEntry] = catalogue.tables
        self.ops: dict[int, str] = {o["op_id"]: o["name"] for o in catalogue.ops}
        self.op_records = list(catalogue.ops)
        self._coarse: CoarseGraph | None = None
        self._mapping: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._groups: list[_ValueGroup] | None = None  # the value mappings' row groups, once read
        self._versions: list[RunVersions] | None = None  # the runs' versions.json, once read
        self.queries = 0  # queries served by this (per-process) catalogue

    # -- tables ----------------------------------------------------------------
    def table_named(self, name: str, run: str | None = None) -> TableEntry:
        """The table called ``name``: of run ``run`` (anything :func:`select_run`
        takes), else of the latest run that wrote a table of that name."""
        return self.table_choice(name, run)[0]

    def table_choice(self, name: str, run: str | None = None) -> tuple[TableEntry, dict[str, Any]]:
        """:meth:`table_named`, and the answer's ``run`` object saying which
        run it is and how many runs wrote a table of that name
        (:func:`~provplug.store.runs.run_used`)."""
        matches = [t for t in self.tables.values() if t.name == name]
        if not matches:
            known = sorted({t.name for t in self.tables.values()})
            raise LineageQueryError(f"unknown table {name!r} (tables: {', '.join(known) or 'none'})")
        writers = [m for m in self.manifests if any(t.run_id == m["run_id"] for t in self._written(matches))]
        chosen = select_run(self.manifests, run) if run is not None else writers[-1]  # manifests: by number
        matches = [t for t in matches if t.run_id == chosen["run_id"]]
        if not matches:
            raise LineageQueryError(
                f"{describe_run(chosen)} wrote no table {name!r} (it was written by {describe_runs(writers)})"
            )
        return max(matches, key=lambda t: t.table_id), run_used(chosen, writers, name, run is not None)

    def run_of_values(self, values: Iterable[int], given: bool = False) -> dict[str, Any] | None:
        """The ``run`` object of an answer about ``values``: the run whose
        tables hold them (the first such run when they span several), the
        table it is named for, and how many runs wrote a table of that name;
        None when no value names a known table."""
        table, _, _ = self.locate(np.fromiter(values, dtype=np.int64))
        known = [t for t in dict.fromkeys(table.tolist()) if t in self.tables]
        return self.run_of_table(known[0], given) if known else None

    def run_of_table(self, table_id: int, given: bool = False) -> dict[str, Any]:
        """The ``run`` object of an answer about table ``table_id``: its run,
        and how many runs wrote a table of its name."""
        entry = self.tables[table_id]
        wrote = {t.run_id for t in self._written([t for t in self.tables.values() if t.name == entry.name])}
        writers = [m for m in self.manifests if m["run_id"] in wrote]
        manifest = next(m for m in self.manifests if m["run_id"] == entry.run_id)
        return run_used(manifest, writers, entry.name, given)

    # -- runs over time (provplug.store.versions) -----------------------------------
    @property
    def versions(self) -> list[RunVersions]:
        """What each run wrote and read of datasets other runs see (read once per catalogue)."""
        if self._versions is None:
            self._versions = versions_of(self.store, self.run_ids)
        return self._versions

    def linked_reads(self) -> dict[int, LinkedRead]:
        """The source tables that are versions other runs wrote, by table id."""
        return {read.table: read for run in self.versions for read in run.reads}

    def _written(self, tables: list[TableEntry]) -> list[TableEntry]:
        """``tables`` without the versions a run read from another run (a
        run that only read a dataset did not write it); all of them when
        every one is such a read."""
        linked = self.linked_reads()
        return [t for t in tables if t.table_id not in linked] or tables

    def run_mark(self, table_id: int) -> dict[str, Any] | None:
        """``{id, number, label}`` of the run of table ``table_id`` (None when unknown)."""
        entry = self.tables.get(table_id)
        if entry is None:
            return None
        return run_summary(next(m for m in self.manifests if m["run_id"] == entry.run_id))

    def run_boundaries(self, src: np.ndarray, dst: np.ndarray, op: np.ndarray) -> list[dict[str, Any]]:
        """Where triples ``(src, dst, op)`` go from a table of one run to a
        table of another: one record per (op, table, table), with both runs
        (``{table, id, number, label}``) and the number of triples."""
        packed = (np.asarray(src) >= ids.IMPORTED_ID_LIMIT) & (np.asarray(dst) >= ids.IMPORTED_ID_LIMIT)
        found: dict[tuple[int, int, int], int] = {}
        for s, d, o in zip(
            (np.asarray(src)[packed] >> ids.TABLE_SHIFT).tolist(),
            (np.asarray(dst)[packed] >> ids.TABLE_SHIFT).tolist(),
            np.asarray(op)[packed].tolist(),
            strict=True,
        ):
            a, b = self.tables.get(s), self.tables.get(d)
            if a is not None and b is not None and a.run_id != b.run_id:
                found[(o, s, d)] = found.get((o, s, d), 0) + 1
        return [
            {
                "op": self.op_name(o),
                "from": {"table": self.tables[s].name, **(self.run_mark(s) or {})},
                "to": {"table": self.tables[d].name, **(self.run_mark(d) or {})},
                "triples": n,
            }
            for (o, s, d), n in sorted(found.items())
        ]

    def missing_versions(self, values: np.ndarray) -> list[dict[str, Any]]:
        """The tables of ``values`` that are versions another run wrote and
        that run was deleted since (``delete-run --force``): lineage stops there."""
        tables = set((np.asarray(values)[np.asarray(values) >= ids.IMPORTED_ID_LIMIT] >> ids.TABLE_SHIFT).tolist())
        return [
            {
                "table": self.tables[t].name,
                **(self.run_mark(t) or {}),
                "dataset": f"{read.namespace}:{read.dataset}",
                "version_of": dict(read.missing),
            }
            for t, read in sorted(self.linked_reads().items())
            if t in tables and t in self.tables and read.missing is not None
        ]

    @property
    def coarse(self) -> CoarseGraph:
        """The coarse steps of the store's runs (read once per catalogue)."""
        if self._coarse is None:
            self._coarse = CoarseGraph(self.store, self.run_ids, self.tables, self.op_records)
        return self._coarse

    def op_name(self, op_id: int) -> str:
        return self.ops.get(op_id, str(op_id))

    # -- value ids -------------------------------------------------------------
    def locate(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(table_id, column index, row)`` of each id; -1 where unknown
        (column -1 / row -1 also for imported ids without one)."""
        values = np.asarray(values, dtype=np.int64)
        table = values >> ids.TABLE_SHIFT
        column = (values >> ids.COLUMN_SHIFT) & (ids.MAX_COLUMNS - 1)
        row = values & (ids.MAX_ROWS - 1)
        imported = values < ids.IMPORTED_ID_LIMIT
        row[imported] = -1
        table[imported] = -1
        column[imported] = -1
        if imported.any():
            at = np.flatnonzero(imported)
            value_ids, value_tables, value_columns = self._imported_mapping(values[at])
            if len(value_ids):
                pos = np.minimum(np.searchsorted(value_ids, values[at]), len(value_ids) - 1)
                hit = value_ids[pos] == values[at]
                table[at[hit]] = value_tables[pos[hit]]
                column[at[hit]] = value_columns[pos[hit]]
        return table, column, row

    def _imported_mapping(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sorted ``(value_id, table_id, column_id)`` covering ``wanted``.

        A query reads only the row groups that may hold the wanted ids
        (cheap for a one-off CLI query; kept in the query cache for the next). From an opened store's second query on, a mapping
        of at most :data:`MAPPING_CACHE_BYTES` is loaded whole once and kept
        (a long-lived process); a larger one (109M values at the paper's 24x
        scale: 7.5 GiB) keeps being read filtered."""
        if self._mapping is None:
            if self.queries <= 1 or self._mapping_rows() * MAPPING_ROW_BYTES > MAPPING_CACHE_BYTES:
                return self._read_mapping(sortedints.unique(wanted))
            self._mapping = self._read_mapping(None)
        return self._mapping

    def _mapping_rows(self) -> int:
        return sum(int(m.get("counts", {}).get("values", 0)) for m in self.manifests)

    def _read_mapping(self, wanted: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The mapping rows of ``wanted`` (all rows when None). Wanted ids
        are read from the row groups whose statistics may hold them, each
        group decoded once and kept in the query cache: a query pays for the
        groups of its own values, whatever the number of runs and values."""
        if wanted is None:
            paths = self.store.run_paths("values.parquet")
            if not paths:
                return _EMPTY_MAPPING
            data = storefiles.scan(self.store.fs, paths, f"value mapping of {self.store.uri}", schema=schema.VALUES)
            return _sorted_mapping(
                data.column("value_id").to_numpy(),
                data.column("table_id").to_numpy(),
                data.column("column_id").fill_null(-1).to_numpy(),
            )
        found = [_rows_of(self._value_group(group), wanted) for group in self._groups_holding(wanted)]
        if not found:
            return _EMPTY_MAPPING
        return _sorted_mapping(*(np.concatenate(c) for c in zip(*found, strict=True)))

    def _groups_holding(self, wanted: np.ndarray) -> list[_ValueGroup]:
        """The row groups of the runs' value mappings whose value_id range
        holds one of ``wanted`` (sorted)."""
        groups = self._value_groups()
        if not groups:
            return []
        lows = np.array([g.low for g in groups], dtype=np.int64)
        highs = np.array([g.high for g in groups], dtype=np.int64)
        first = np.searchsorted(wanted, lows, side="left")  # the first wanted id >= each group's low
        holds = (first < len(wanted)) & (wanted[np.minimum(first, len(wanted) - 1)] <= highs)
        return [g for g, h in zip(groups, holds.tolist(), strict=True) if h]

    def _value_groups(self) -> list[_ValueGroup]:
        """Every row group of every run's ``values.parquet`` with its value_id
        range (footers read once per opened store)."""
        if self._groups is None:
            self._groups = [
                group for path in self.store.run_paths("values.parquet") for group in _row_groups(self.store.fs, path)
            ]
        return self._groups

    def _value_group(self, group: _ValueGroup) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        def load() -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int]:
            with storefiles.damage_reported(group.path), self.store.fs.open_input_file(group.path) as source:
                data = pq.ParquetFile(source, metadata=group.metadata).read_row_group(group.index)
            arrays = _sorted_mapping(
                data.column("value_id").to_numpy().astype(np.int64, copy=False),
                data.column("table_id").to_numpy().astype(np.int64, copy=False),
                data.column("column_id").fill_null(-1).to_numpy().astype(np.int64, copy=False),
            )
            return arrays, sum(a.nbytes for a in arrays)

        return cached(self.store, ("values", group.path, group.index), load)

    def check_known(self, values: Iterable[int]) -> None:
        """Raise unless every id names a cell of a known table.

        A captured id's row must be one the table stored: row numbers are
        sparse (Spark numbers rows ``(partition << bits) | index``), so they
        are looked up among the stored row numbers, never compared with the
        row count. A table stored without rows cannot tell; its column is
        checked only."""
        arr = np.fromiter(values, dtype=np.int64)
        table, column, row = self.locate(arr)
        for v, t, c in zip(arr.tolist(), table.tolist(), column.tolist(), strict=True):
            entry = self.tables.get(t)
            if entry is None or (ids.is_packed(v) and c >= len(entry.columns)):
                raise _unknown(v)
        packed = np.array([ids.is_packed(v) for v in arr.tolist()], dtype=bool)
        for t in sortedints.unique(table[packed]).tolist():
            entry = self.tables[t]
            if not entry.stored_rows:
                continue
            wanted = sortedints.unique(row[packed & (table == t)])
            found = self.read_rows(entry, pc.field(schema.ROW_COLUMN).isin(arrow_ids(wanted)))
            missing = np.setdiff1d(wanted, found.column(schema.ROW_COLUMN).to_numpy())
            if len(missing):
                first = arr[packed & (table == t) & (row == missing[0])][0]
                raise _unknown(int(first))

    def records(self, values: np.ndarray) -> list[dict[str, Any]]:
        """A value record per id: ``{value_id, table, column, row, value}``."""
        values = np.asarray(values, dtype=np.int64)
        table, column, row = self.locate(values)
        rows = self._rows(table, row)
        out = []
        for v, t, c, r in zip(values.tolist(), table.tolist(), column.tolist(), row.tolist(), strict=True):
            entry = self.tables.get(t)
            name = entry.name if entry else schema.UNKNOWN_TABLE
            col = entry.columns[c] if entry and 0 <= c < len(entry.columns) else None
            cells = rows.get((t, r))
            out.append(
                {
                    "value_id": v,
                    "table": name,
                    "column": col,
                    "row": cells,
                    "value": cells.get(col) if cells is not None and col is not None else None,
                }
            )
        return out

    def _rows(self, table: np.ndarray, row: np.ndarray) -> dict[tuple[int, int], dict[str, Any]]:
        found: dict[tuple[int, int], dict[str, Any]] = {}
        for t in sortedints.unique(table[row >= 0]).tolist():
            entry = self.tables.get(t)
            if entry is None or not entry.stored_rows:
                continue
            wanted = sortedints.unique(row[(table == t) & (row >= 0)])
            data = self.read_rows(entry, pc.field(schema.ROW_COLUMN).isin(arrow_ids(wanted)))
            numbers = data.column(schema.ROW_COLUMN).to_pylist()
            cells = data.drop_columns([schema.ROW_COLUMN]).to_pylist()
            for n, cell in zip(numbers, cells, strict=True):
                found[(t, int(n))] = {k: jsonable(x) for k, x in cell.items()}
        return found

    def read_rows(self, entry: TableEntry, where: pc.Expression | None = None) -> pa.Table:
        rows = self.store.read_rows(entry.run_id, entry.table_id, where)
        return pa.table({schema.ROW_COLUMN: pa.array([], pa.int64())}) if rows is None else rows


@dataclass(frozen=True)
class _ValueGroup:
    """A row group of a run's ``values.parquet`` and its value_id range."""

    path: str
    index: int
    low: int
    high: int
    metadata: pq.FileMetaData


_EMPTY_MAPPING = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))


def _row_groups(fs: Any, path: str) -> list[_ValueGroup]:
    """``path``'s row groups with the value_id range of each (the whole id
    range when a group has no statistics: it is then read for every query)."""
    metadata = storefiles.parquet_metadata(fs, path)
    column = metadata.schema.to_arrow_schema().get_field_index("value_id")
    groups = []
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(column).statistics
        low, high = (stats.min, stats.max) if stats is not None and stats.has_min_max else (-(1 << 63), (1 << 63) - 1)
        groups.append(_ValueGroup(path, i, int(low), int(high), metadata))
    return groups


def _rows_of(
    group: tuple[np.ndarray, np.ndarray, np.ndarray], wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of a (sorted) group whose value_id is in ``wanted``."""
    ids_ = group[0]
    if len(ids_) == 0:
        return group
    pos = np.minimum(np.searchsorted(ids_, wanted), len(ids_) - 1)
    at = pos[ids_[pos] == wanted]
    return ids_[at], group[1][at], group[2][at]


def _sorted_mapping(
    ids_: np.ndarray, tables: np.ndarray, columns: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.argsort(ids_, kind="stable")
    return ids_[order], tables[order], columns[order]


def _unknown(value: int) -> LineageQueryError:
    return LineageQueryError(f"unknown value id {value}: it names no cell of this store")


def catalog_for(store: Store) -> Catalog:
    """The store's catalogue, kept by the opened store until a run is added or deleted."""
    manifests = store.runs()
    key = tuple(m["run_id"] for m in manifests)
    caches = caches_of(store)
    with caches.lock:
        hit: Catalog | None = caches.catalogs.get(key)
    if hit is None:
        hit = Catalog(store, manifests)
        with caches.lock:
            caches.catalogs.clear()  # the catalogue of other runs is stale
            caches.catalogs[key] = hit
    return hit
