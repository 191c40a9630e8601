"""``provplug.open(STORE).lineage(...)``: the Python entry point of queries."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from provplug import ids, schema
from provplug.errors import LineageQueryError
from provplug.plugin.manager import Plugins, get_plugins, open_store
from provplug.plugin.protocols import Store
from provplug.progress import SILENT, Progress
from provplug.query.answer import LineageAnswer
from provplug.query.catalog import Catalog, catalog_for
from provplug.query.methods import DEFAULT_TAU, QueryContext
from provplug.query.model import DIRECTIONS
from provplug.query.where import select_rows
from provplug.store.runs import select_run

# ``TABLE.*``: every column of the selected rows (a row, not one cell).
ALL_COLUMNS = "*"

if TYPE_CHECKING:
    from provplug.explore.browse import RunRecord, TableDetail, TableRecord
    from provplug.explore.manage import DeletedRun, GcReport
    from provplug.whatif.depends import DependsAnswer
    from provplug.whatif.model import WhatIfAnswer


class ProvenanceStore:
    """A store opened for lineage queries."""

    def __init__(self, store: Store, plugins: Plugins | None = None) -> None:
        store.check()
        self.store = store
        self.plugins = plugins or get_plugins()

    @property
    def uri(self) -> str:
        return self.store.uri

    def lineage(
        self,
        value_id: int | Iterable[int] | None = None,
        *,
        table: str | None = None,
        column: str | None = None,
        where: str | None = None,
        method: str = "auto",
        direction: str = "up",
        tau: int | None = None,
        spark: Any = None,
        run: str | None = None,
        subgraph: bool = False,
        zoom_out: Iterable[str] = (),
    ) -> LineageAnswer:
        """Ancestors (``direction="up"``) or descendants (``"down"``) of the
        value ``value_id``, or of the ``table.column`` cells of the rows where
        ``where`` holds. ``tau``: triples below which the recursion runs on the
        driver; None (the default): on the driver whenever the query's triples
        fit the driver's memory budget (``PROVPLUG_QUERY_DRIVER_MB``, else half
        the memory available), on Spark otherwise; ``spark``: the session for
        the Spark path (else a local one).
        ``run`` (an id or a unique prefix) says whose ``table`` is meant when
        several runs wrote one of that name (then it is required); a value id
        names one cell already, so with ``value_id`` the run is only checked.
        ``subgraph=True``: ancestors, descendants and the descendants' other
        parents as one answer (direction ``"both"``; ``direction`` is not
        used). ``zoom_out``: module names to see at module level (see
        :meth:`LineageAnswer.zoom_out`)."""
        if subgraph or zoom_out:
            query = {"value_id": value_id, "table": table, "column": column, "where": where, "method": method,
                     "tau": tau, "spark": spark, "run": run}
            answer = _subgraph(self, query) if subgraph else self.lineage(**query, direction=direction)
            return self.zoom_out(answer, zoom_out) if zoom_out else answer
        started = time.perf_counter()
        if tau is not None and (not isinstance(tau, (int, np.integer)) or isinstance(tau, bool) or tau < 0):
            raise LineageQueryError(f"tau must be a non-negative number of triples, not {tau!r}")
        if direction not in DIRECTIONS:
            raise LineageQueryError(f"unknown direction {direction!r} (use up or down)")
        methods = self.plugins.query_methods()
        if method not in methods:
            raise LineageQueryError(f"unknown query method {method!r} (methods: {', '.join(sorted(methods))})")
        catalog = catalog_for(self.store)
        catalog.queries += 1
        if run is not None and table is None:
            select_run(catalog.manifests, run)  # an unknown run is an error all the same
        seeds = self._seeds(catalog, value_id, table, column, where, run)
        context = QueryContext(self.store, DEFAULT_TAU if tau is None else int(tau), spark)
        result = methods[method].run(context, seeds, direction)
        edges = result.walk.edges
        # One catalogue lookup for query and lineage values together (one scan when cold).
        records = catalog.records(np.concatenate([seeds, result.walk.lineage]))
        answer = LineageAnswer(
            query=records[: len(seeds)],
            method=method,
            direction=direction,
            lineage=records[len(seeds):],
            edges=[
                {"src": s, "dst": d, "op": catalog.op_name(o)}
                for s, d, o in zip(edges.src.tolist(), edges.dst.tolist(), edges.op.tolist(), strict=True)
            ],
            stats={
                "sets_read": int(result.sets_read),
                "triples_scanned": int(result.triples_scanned),
                "seconds": 0.0,
                "path": result.path,
                **result.extra,
            },
        )
        reduced = _reductions(catalog, np.concatenate([seeds, result.walk.lineage]))
        if reduced:
            answer.stats["reduction"] = reduced
        used = catalog.run_of_values(seeds.tolist(), given=run is not None)  # the run answered from
        if used is not None:
            answer.stats["run"] = used
        answer.stats["seconds"] = round(time.perf_counter() - started, 6)
        return answer

    def depends(self, a: int | Iterable[int] | str, b: int | Iterable[int] | str, *, a_where: str | None = None,
                b_where: str | None = None, run: str | None = None) -> DependsAnswer:
        """Does ``b`` depend on ``a``: does a cell of ``b`` vanish or change
        when the rows of ``a`` are deleted (Lipstick §4.3)? Each a value id,
        ids, or ``"TABLE.COLUMN"`` (``"TABLE.*"``: every column) with its
        rows chosen by ``a_where`` / ``b_where``. The answer is yes (with the
        chain of rows through which the deletion reaches ``b``), no, or
        unknown (see :mod:`provplug.whatif.depends`)."""
        from provplug.whatif.depends import depends

        return depends(self, a, b, a_where=a_where, b_where=b_where, run=run)

    def whatif(self, table: str | None = None, where: str | None = None, *,
               value_id: int | Iterable[int] | None = None,
               deletions: Iterable[tuple[str, str | None]] = (), run: str | None = None) -> WhatIfAnswer:
        """What deleting rows would do downstream (DESIGN §9): the rows of
        ``table`` where ``where`` holds (every row without it), the rows of
        the cells ``value_id`` and every ``(table, where)`` of ``deletions``.
        Per downstream table: rows that vanish, cells that change (old ->
        new), rows whose fate is unknown, untouched rows. Nothing is re-run
        and the store is only read (see :mod:`provplug.whatif`)."""
        from provplug.whatif.query import whatif
        from provplug.whatif.select import Deletion

        chosen = [Deletion(t, w) for t, w in deletions]
        if table is not None:
            chosen.insert(0, Deletion(table, where))
        elif where is not None:
            raise LineageQueryError("a where clause needs the table whose rows it selects")
        values = [] if value_id is None else [value_id] if isinstance(value_id, (int, np.integer)) else list(value_id)
        return whatif(self.store, chosen, [int(v) for v in values], run)

    def records(self, value_ids: Iterable[int]) -> list[dict[str, Any]]:
        """A record per value id: ``{value_id, table, column, row, value}``."""
        return catalog_for(self.store).records(np.array(list(value_ids), dtype=np.int64))

    def zoom_out(self, answer: LineageAnswer, modules: Iterable[str]) -> LineageAnswer:
        """``answer`` at module level for ``modules`` (``"*"``: every module):
        their intermediate tables' cells vanish and their outputs link
        straight to their inputs. A view: see :mod:`provplug.query.zoom`."""
        from provplug.query.zoom import Modules, zoom_out

        return zoom_out(answer, Modules(self.store), [modules] if isinstance(modules, str) else modules)

    def zoom_in(self, answer: LineageAnswer, modules: Iterable[str]) -> LineageAnswer:
        """The exact inverse of :meth:`zoom_out` for ``modules`` (``"*"``: all zoomed out)."""
        from provplug.query.zoom import Modules, zoom_in

        return zoom_in(answer, Modules(self.store), [modules] if isinstance(modules, str) else modules)

    def cells(
        self,
        value_id: int | Iterable[int] | None = None,
        *,
        table: str | None = None,
        column: str | None = None,
        where: str | None = None,
        run: str | None = None,
    ) -> list[int]:
        """The value ids a query with these arguments would start from
        (``column="*"``: every column of the selected rows)."""
        catalog = catalog_for(self.store)
        if run is not None and table is None:
            select_run(catalog.manifests, run)
        return [int(v) for v in self._seeds(catalog, value_id, table, column, where, run).tolist()]

    # -- which values are queried ----------------------------------------------
    def _seeds(
        self,
        catalog: Catalog,
        value_id: int | Iterable[int] | None,
        table: str | None,
        column: str | None,
        where: str | None,
        run: str | None = None,
    ) -> np.ndarray:
        if table is None:
            if value_id is None:
                raise LineageQueryError("nothing to trace: give a value id, or a table and column")
            values = [value_id] if isinstance(value_id, (int, np.integer)) else list(value_id)
            if not values:
                raise LineageQueryError("no value id given")
            for v in values:
                if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                    raise LineageQueryError(f"value id {v!r} is not a non-negative integer")
            catalog.check_known(int(v) for v in values)
            return np.unique(np.array(values, dtype=np.int64))
        if value_id is not None:
            raise LineageQueryError("give a value id or a table and column, not both")
        if column is None:
            raise LineageQueryError("a table query needs a column: TABLE.COLUMN")
        return self._cells_where(catalog, table, column, where, run)

    def _cells_where(
        self, catalog: Catalog, table: str, column: str, where: str | None, run: str | None = None
    ) -> np.ndarray:
        entry = catalog.table_named(table, run)
        if column not in entry.columns and column != ALL_COLUMNS:
            raise LineageQueryError(
                f"table {table!r} has no column {column!r} (columns: {', '.join(entry.columns) or 'none recorded'})"
            )
        if entry.origin == "imported" or not entry.stored_rows:
            raise LineageQueryError(
                f"table {table!r} has no stored rows to select from: query a value with --value-id"
            )
        rows = catalog.read_rows(entry)
        selected = select_rows(rows, where, schema.ROW_COLUMN) if where else rows.column(schema.ROW_COLUMN).to_pylist()
        if not selected:
            raise LineageQueryError(f"no row of {table} satisfies {where!r}" if where else f"table {table} has no rows")
        columns = range(len(entry.columns)) if column == ALL_COLUMNS else [entry.columns.index(column)]
        return np.unique(np.array([ids.value_id(entry.table_id, c, int(r)) for r in selected for c in columns],
                                  dtype=np.int64))

    # -- what the store holds ------------------------------------------------------
    def runs(self) -> list[RunRecord]:
        """The committed runs (captures and imports), oldest first."""
        from provplug.explore.browse import run_records

        return run_records(self.store)

    def tables(self, run: str | None = None) -> list[TableRecord]:
        """The tables of every run, or of run ``run`` (an id or a unique prefix)."""
        from provplug.explore.browse import table_records

        return table_records(self.store, run)

    def show(self, table: str, run: str | None = None, limit: int = 10) -> TableDetail:
        """Table ``table`` (of ``run`` when several runs wrote one): columns,
        rows, run, the ops that wrote it with their inputs, its first ``limit`` rows."""
        from provplug.explore.browse import table_detail

        return table_detail(self.store, table, run, limit)

    def stats(self) -> dict[str, Any]:
        """What ``provplug stats`` prints: the store's counts (every file
        checked), then its index's."""
        from provplug.explore.browse import store_stats

        return store_stats(self.store)

    # -- changing it ---------------------------------------------------------------
    def index(self, theta: int | None = None, splits: Any = None, engine: str = "auto",
              spark: Any = None, progress: Progress = SILENT) -> dict[str, Any]:
        """Build the lineage index, as ``provplug index`` does; return its ``meta.json``."""
        from provplug.index.build import build_index

        options: dict[str, Any] = {} if theta is None else {"theta": theta}
        return build_index(self.store, splits=splits, spark=spark, engine=engine,  # type: ignore[arg-type]
                           progress=progress, plugins=self.plugins, **options)

    def import_(self, triples: str | os.PathLike[str], values: str | os.PathLike[str] | None = None,
                progress: Progress = SILENT, row_lineage: str | os.PathLike[str] | None = None,
                row_rules: str | os.PathLike[str] | None = None) -> dict[str, int | str]:
        """Import a triples file (its value mapping, its row lineage and
        rules) as one run, as ``provplug import`` does; return ``run_id``,
        ``triples``, ``duplicates``."""
        from provplug.ingest.importer import import_provenance

        return import_provenance(self.store, triples, values, progress=progress, plugins=self.plugins,
                                 row_lineage=row_lineage, row_rules=row_rules)

    def delete_run(self, run: str) -> DeletedRun:
        """Delete run ``run`` (an id or a unique prefix), as ``provplug delete-run`` does."""
        from provplug.explore.manage import delete_run

        return delete_run(self.store, run)

    def gc(self, dry_run: bool = False) -> GcReport:
        """Remove (or with ``dry_run`` list) garbage, as ``provplug gc`` does."""
        from provplug.explore.manage import collect_garbage

        return collect_garbage(self.store, dry_run)


def _subgraph(store: ProvenanceStore, query: dict[str, Any]) -> LineageAnswer:
    from provplug.query.subgraph import subgraph

    return subgraph(store, query)


def _reductions(catalog: Catalog, values: np.ndarray) -> dict[str, Any]:
    """The reductions of the runs the answer's captured values belong to
    (run id -> the manifest's ``reduction``): their provenance is partial."""
    tables = np.unique(np.asarray(values, dtype=np.int64)[values >= ids.IMPORTED_ID_LIMIT] >> ids.TABLE_SHIFT)
    runs = {catalog.tables[t].run_id for t in tables.tolist() if t in catalog.tables}
    return {m["run_id"]: m["reduction"] for m in catalog.manifests if m["run_id"] in runs and m.get("reduction")}


def open(store: str | os.PathLike[str]) -> ProvenanceStore:
    """Open ``store`` for lineage queries (it must exist), through the
    store-backend hook: any :class:`~provplug.plugin.protocols.Store` will do."""
    return ProvenanceStore(open_store(store))
