"""Lineage queries over one store: the cells a query starts from (a value id,
or ``TABLE.COLUMN`` cells of the rows a ``--where`` selects), the query
method that answers, and the answer with its records, statistics, the run it
answered from and the reductions behind it. :class:`provplug.api.ProvenanceStore`
is the facade users call; features (diff, export) use this class directly."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from provplug import ids, schema, sortedints
from provplug.errors import LineageQueryError
from provplug.plugin.manager import Plugins, get_plugins
from provplug.plugin.protocols import Store
from provplug.plugin.query_results import DIRECTIONS
from provplug.query.answer import LineageAnswer
from provplug.query.catalog import Catalog, catalog_for
from provplug.query.methods import DEFAULT_TAU, QueryContext
from provplug.query.where import select_rows
from provplug.store.runs import select_run

ALL_COLUMNS = "*"  # column "*": every column of the selected rows


class LineageQueries:
    """Lineage queries over ``store`` with the query methods ``plugins`` register."""

    def __init__(self, store: Store, plugins: Plugins | None = None) -> None:
        self.store = store
        self.plugins = plugins or get_plugins()

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
        """The lineage query :meth:`provplug.api.ProvenanceStore.lineage` documents."""
        if subgraph or zoom_out:
            query = {
                "value_id": value_id,
                "table": table,
                "column": column,
                "where": where,
                "method": method,
                "tau": tau,
                "spark": spark,
                "run": run,
            }
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
            lineage=records[len(seeds) :],
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
        answer.coarse = catalog.coarse.crossings(np.concatenate([seeds, result.walk.lineage]), direction)
        _mark_runs(catalog, answer, np.concatenate([seeds, result.walk.lineage]), edges)
        reduced = _reductions(catalog, np.concatenate([seeds, result.walk.lineage]))
        if reduced:
            answer.stats["reduction"] = reduced
        used = catalog.run_of_values(seeds.tolist(), given=run is not None)  # the run answered from
        if used is not None:
            answer.stats["run"] = used
        answer.stats["seconds"] = round(time.perf_counter() - started, 6)
        return answer

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
            return sortedints.unique(np.array(values, dtype=np.int64))
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
            raise LineageQueryError(f"table {table!r} has no stored rows to select from: query a value with --value-id")
        rows = catalog.read_rows(entry)
        selected = select_rows(rows, where, schema.ROW_COLUMN) if where else rows.column(schema.ROW_COLUMN).to_pylist()
        if not selected:
            raise LineageQueryError(f"no row of {table} satisfies {where!r}" if where else f"table {table} has no rows")
        columns = range(len(entry.columns)) if column == ALL_COLUMNS else [entry.columns.index(column)]
        return sortedints.unique(
            np.array([ids.value_id(entry.table_id, c, int(r)) for r in selected for c in columns], dtype=np.int64)
        )

    def zoom_out(self, answer: LineageAnswer, modules: Iterable[str]) -> LineageAnswer:
        """``answer`` at module level for ``modules`` (see :mod:`provplug.query.zoom`)."""
        from provplug.query.zoom import Modules, zoom_out

        return zoom_out(answer, Modules(self.store), [modules] if isinstance(modules, str) else modules)


def _subgraph(store: LineageQueries, query: dict[str, Any]) -> LineageAnswer:
    from provplug.query.subgraph import subgraph

    return subgraph(store, query)


def _reductions(catalog: Catalog, values: np.ndarray) -> dict[str, Any]:
    """The reductions of the runs the answer's captured values belong to
    (run id -> the manifest's ``reduction``): their provenance is partial."""
    tables = sortedints.unique(np.asarray(values, dtype=np.int64)[values >= ids.IMPORTED_ID_LIMIT] >> ids.TABLE_SHIFT)
    runs = {catalog.tables[t].run_id for t in tables.tolist() if t in catalog.tables}
    return {m["run_id"]: m["reduction"] for m in catalog.manifests if m["run_id"] in runs and m.get("reduction")}


def _mark_runs(catalog: Catalog, answer: LineageAnswer, values: np.ndarray, edges: Any) -> None:
    """Mark where the answer crosses from one run to another (a run read a
    dataset an earlier run wrote, :mod:`provplug.store.versions`): the
    crossings, each cell's run when the answer spans several, and the
    versions read whose writing run was deleted since."""
    answer.run_boundaries = catalog.run_boundaries(edges.src, edges.dst, edges.op)
    answer.missing_versions = catalog.missing_versions(values)
    tables = sortedints.unique(values[values >= ids.IMPORTED_ID_LIMIT] >> ids.TABLE_SHIFT).tolist()
    runs = {t: catalog.run_mark(t) for t in tables}
    if len({r["id"] for r in runs.values() if r is not None}) < 2:
        return
    for record in [*answer.query, *answer.lineage]:
        if ids.is_packed(record["value_id"]):
            record["run"] = runs.get(record["value_id"] >> ids.TABLE_SHIFT)
