"""``provplug.open(STORE).lineage(...)``: the Python entry point of queries."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from provplug.errors import LineageQueryError
from provplug.plugin.manager import Plugins, get_plugins
from provplug.plugin.protocols import Store
from provplug.progress import SILENT, Progress
from provplug.query.answer import LineageAnswer
from provplug.query.catalog import catalog_for
from provplug.query.lineage import LineageQueries
from provplug.store.open import open_store

# ``TABLE.*``: every column of the selected rows (a row, not one cell).
if TYPE_CHECKING:
    from provplug.explore.browse import RunRecord, TableDetail, TableRecord
    from provplug.explore.manage import DeletedRun, GcReport
    from provplug.whatif.answer import WhatIfAnswer
    from provplug.whatif.depends import DependsAnswer


class ProvenanceStore:
    """A store opened for lineage queries."""

    def __init__(self, store: Store, plugins: Plugins | None = None) -> None:
        store.check()
        self.store = store
        self.plugins = plugins or get_plugins()
        self._queries = LineageQueries(store, self.plugins)

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
        ``run`` (a number, ``latest``, ``latest~N``, a label or an id prefix)
        says whose ``table`` is meant when several runs wrote one of that name
        (default: the latest that did; the answer's ``stats["run"]`` says which
        and how many others exist); a value id names one cell already, so with
        ``value_id`` the run is only checked.
        ``subgraph=True``: ancestors, descendants and the descendants' other
        parents as one answer (direction ``"both"``; ``direction`` is not
        used). ``zoom_out``: module names to see at module level (see
        :meth:`LineageAnswer.zoom_out`)."""
        return self._queries.lineage(
            value_id,
            table=table,
            column=column,
            where=where,
            method=method,
            direction=direction,
            tau=tau,
            spark=spark,
            run=run,
            subgraph=subgraph,
            zoom_out=zoom_out,
        )

    def depends(
        self,
        a: int | Iterable[int] | str,
        b: int | Iterable[int] | str,
        *,
        a_where: str | None = None,
        b_where: str | None = None,
        run: str | None = None,
    ) -> DependsAnswer:
        """Does ``b`` depend on ``a``: does a cell of ``b`` vanish or change
        when the rows of ``a`` are deleted (Lipstick §4.3)? Each a value id,
        ids, or ``"TABLE.COLUMN"`` (``"TABLE.*"``: every column) with its
        rows chosen by ``a_where`` / ``b_where``. The answer is yes (with the
        chain of rows through which the deletion reaches ``b``), no, or
        unknown (see :mod:`provplug.whatif.depends`)."""
        from provplug.whatif.depends import depends

        return depends(self, a, b, a_where=a_where, b_where=b_where, run=run)

    def whatif(
        self,
        table: str | None = None,
        where: str | None = None,
        *,
        value_id: int | Iterable[int] | None = None,
        deletions: Iterable[tuple[str, str | None]] = (),
        run: str | None = None,
    ) -> WhatIfAnswer:
        """What deleting rows would do downstream (docs/queries.md): the rows of
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
        return self._queries.cells(value_id, table=table, column=column, where=where, run=run)

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
    def index(
        self,
        theta: int | None = None,
        splits: Any = None,
        engine: str = "auto",
        spark: Any = None,
        progress: Progress = SILENT,
    ) -> dict[str, Any]:
        """Build the lineage index, as ``provplug index`` does; return its ``meta.json``."""
        from provplug.index.build import build_index

        options: dict[str, Any] = {} if theta is None else {"theta": theta}
        return build_index(
            self.store,
            splits=splits,
            spark=spark,
            engine=engine,  # type: ignore[arg-type]
            progress=progress,
            plugins=self.plugins,
            **options,
        )

    def import_(
        self,
        triples: str | os.PathLike[str],
        values: str | os.PathLike[str] | None = None,
        progress: Progress = SILENT,
        row_lineage: str | os.PathLike[str] | None = None,
        row_rules: str | os.PathLike[str] | None = None,
    ) -> dict[str, int | str]:
        """Import a triples file (its value mapping, its row lineage and
        rules) as one run, as ``provplug import`` does; return ``run_id``,
        ``triples``, ``duplicates``."""
        from provplug.ingest.importer import import_provenance

        return import_provenance(
            self.store,
            triples,
            values,
            progress=progress,
            plugins=self.plugins,
            row_lineage=row_lineage,
            row_rules=row_rules,
        )

    def delete_run(self, run: str) -> DeletedRun:
        """Delete run ``run`` (an id or a unique prefix), as ``provplug delete-run`` does."""
        from provplug.explore.manage import delete_run

        return delete_run(self.store, run)

    def gc(self, dry_run: bool = False) -> GcReport:
        """Remove (or with ``dry_run`` list) garbage, as ``provplug gc`` does."""
        from provplug.explore.manage import collect_garbage

        return collect_garbage(self.store, dry_run)


def open(store: str | os.PathLike[str]) -> ProvenanceStore:
    """Open ``store`` for lineage queries (it must exist), through the
    store-backend hook: any :class:`~provplug.plugin.protocols.Store` will do."""
    return ProvenanceStore(open_store(store))
