"""The JSON documents the explorer's ``/api/...`` serves, built by the same
functions as the CLI's ``--json`` (so both always agree): runs, tables and
show (:mod:`provplug.explore.browse`), lineage and its views
(:class:`~provplug.query.answer.LineageAnswer`), what-if, diff. Three
documents the CLI has no ``--json`` for are defined here: a table's rows
(paged, filtered), the workflow graph, and a slice of a lineage answer (one
table's cells, for a large answer opened summarised)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from provplug import ids, schema
from provplug.api import ProvenanceStore
from provplug.errors import LineageQueryError
from provplug.query.answer import LineageAnswer, finite
from provplug.query.catalog import catalog_for, jsonable
from provplug.query.where import select_rows

ROWS_FORMAT = "provplug-rows"
WORKFLOW_FORMAT = "provplug-workflow"
SLICE_FORMAT = "provplug-lineage-slice"
VERSION = 1
MAX_PAGE = 1000  # rows or cells per page at most


@dataclass(frozen=True)
class LineageQuestion:
    """One lineage question as ``provplug lineage`` takes it (its options by name)."""

    table: str | None = None
    column: str | None = None
    where: str | None = None
    value_ids: tuple[int, ...] = ()
    direction: str = "up"
    run: str | None = None
    method: str = "auto"

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`ProvenanceStore.lineage`, checked as the CLI checks its line."""
        if self.table is None and not self.value_ids:
            raise LineageQueryError("nothing to trace: give table and column (with where), or value_id")
        if self.table is not None and self.value_ids:
            raise LineageQueryError("give table and column (with where) or value_id, not both")
        if self.where is not None and self.table is None:
            raise LineageQueryError("where needs table and column")
        query: dict[str, Any] = {"method": self.method, "direction": self.direction}
        if self.table is not None:
            query.update(table=self.table, column=self.column, where=self.where)
        else:
            query.update(value_id=list(self.value_ids))
        if self.run is not None:
            query["run"] = self.run
        return query


class Memo:
    """The last few results of a costly function by key (lineage answers, and
    the documents made from them), so that expanding one table of a large
    answer, or opening its link again, does not compute it again.
    Thread-safe; a key being computed by one request is computed once (the
    others wait for it)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            pending = self._pending.setdefault(key, threading.Lock())
        with pending:
            with self._lock:
                if key in self._values:
                    return self._values[key]
            value = compute()
            with self._lock:
                self._values[key] = value
                self._pending.pop(key, None)
                while len(self._values) > self.size:
                    self._values.popitem(last=False)
            return value


@dataclass
class Caches:
    """What one explorer keeps between requests: answers, and their documents."""

    answers: Memo = field(default_factory=Memo)
    documents: Memo = field(default_factory=lambda: Memo(16))


def lineage_answer(store: ProvenanceStore, question: LineageQuestion, caches: Caches) -> LineageAnswer:
    answer: LineageAnswer = caches.answers.get(question, lambda: store.lineage(**question.arguments()))
    return answer


def lineage_document(answer: LineageAnswer, depth: int | None, sources_only: bool, summary: bool) -> dict[str, Any]:
    """What ``provplug lineage ... --json`` prints, with ``--depth``,
    ``--sources-only`` and ``--summary`` applied in the CLI's order."""
    if depth is not None:
        answer = answer.within_depth(depth)
    if sources_only:
        answer = answer.sources_only()
    return answer.summary() if summary else answer.to_dict()


def lineage_slice(answer: LineageAnswer, table: str, column: str | None, offset: int, limit: int) -> dict[str, Any]:
    """The cells of ``table`` (of its ``column`` when given) in ``answer``,
    ``limit`` from ``offset``, as the answer's own document holds them (the
    query, those cells, their stored rows and the triples that touch them)."""
    chosen = [r for r in answer.lineage if r["table"] == table and (column is None or r["column"] == column)]
    page = chosen[offset : offset + _page(limit)]
    kept = {r["value_id"] for r in page}
    # The page as an answer of its own: its cells and rows serialise exactly as the whole answer's would.
    part = LineageAnswer(
        answer.query,
        answer.method,
        answer.direction,
        page,
        [e for e in answer.edges if e["src"] in kept or e["dst"] in kept],
        answer.stats,
    )
    document = part.to_dict()
    return {
        "format": SLICE_FORMAT,
        "version": VERSION,
        "table": table,
        "column": column,
        "total": len(chosen),
        "offset": offset,
        "limit": _page(limit),
        "query": document["query"],
        "lineage": document["lineage"],
        "edges": document["edges"],
        "rows": document["rows"],
    }


def _page(limit: int) -> int:
    if limit < 1:
        raise LineageQueryError(f"limit must be a positive number of rows, not {limit}")
    return min(limit, MAX_PAGE)


def rows_document(
    store: ProvenanceStore, table: str, run: str | None, where: str | None, offset: int, limit: int
) -> dict[str, Any]:
    """A page of the stored rows of ``table`` where ``where`` holds (the
    ``--where`` of the CLI), each with the value id of each of its cells."""
    catalog = catalog_for(store.store)
    entry = catalog.table_named(table, run)
    if not entry.stored_rows:
        raise LineageQueryError(f"table {table!r} has no stored rows (its cells are only known by value id)")
    if offset < 0:
        raise LineageQueryError(f"offset must be a non-negative number of rows, not {offset}")
    rows = catalog.read_rows(entry)
    numbers = (
        select_rows(rows, where, schema.ROW_COLUMN) if where else sorted(rows.column(schema.ROW_COLUMN).to_pylist())
    )
    page = numbers[offset : offset + _page(limit)]
    by_number = _rows_by_number(rows, set(page))
    columns = list(entry.columns)
    packed = entry.origin != "imported"
    return {
        "format": ROWS_FORMAT,
        "version": VERSION,
        "table": entry.name,
        "run_id": entry.run_id,
        "table_id": entry.table_id,
        "columns": columns,
        "where": where,
        "total": len(numbers),
        "offset": offset,
        "limit": _page(limit),
        "rows": [
            {
                "row": n,
                "values": by_number.get(n, {}),
                "value_ids": {c: ids.value_id(entry.table_id, i, n) for i, c in enumerate(columns)} if packed else None,
            }
            for n in page
        ],
    }


def _rows_by_number(rows: Any, wanted: set[int]) -> dict[int, dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    chosen = rows.filter(pc.is_in(rows.column(schema.ROW_COLUMN), pa.array(sorted(wanted), pa.int64())))
    numbers = chosen.column(schema.ROW_COLUMN).to_pylist()
    cells = chosen.drop_columns([schema.ROW_COLUMN]).to_pylist()
    return {int(n): finite({k: jsonable(v) for k, v in c.items()}) for n, c in zip(numbers, cells, strict=True)}


def workflow_document(store: ProvenanceStore, run: str | None) -> dict[str, Any]:
    """The workflow graph ``provplug graph`` draws, as data: tables with their
    rows per run, ops with their triples and runs, and each read and write."""
    from provplug.explore.graph import workflow_of

    wf = workflow_of(store.store, run)
    return {
        "format": WORKFLOW_FORMAT,
        "version": VERSION,
        "run": run,
        "tables": [{"name": t, "rows": list(wf.tables[t]), "rows_text": wf.rows_text(t)} for t in sorted(wf.tables)],
        "ops": [
            {"name": o, "triples": wf.op_triples[o], "runs": sorted(wf.op_runs.get(o, ()))}
            for o in sorted(wf.op_triples)
        ],
        "reads": [{"table": t, "op": o, "triples": n} for (t, o), n in sorted(wf.reads.items())],
        "writes": [{"op": o, "table": t, "triples": n} for (o, t), n in sorted(wf.writes.items())],
    }


def whatif_document(
    store: ProvenanceStore, deletions: list[tuple[str, str | None]], value_ids: list[int], run: str | None
) -> dict[str, Any]:
    """What ``provplug whatif ... --json`` prints (with the run deleted from, as the CLI finds it)."""
    from provplug.whatif.query import run_used  # the CLI's function too, so that both name the same run

    if not deletions and not value_ids:
        raise LineageQueryError("nothing to delete: choose rows (a table with a where, or value ids)")
    answer = store.whatif(deletions=deletions, value_id=value_ids, run=run)
    return {**answer.to_dict(), "run": run_used(store, answer, run)}


def diff_document(
    store: ProvenanceStore, run_a: str, run_b: str, target: Mapping[str, str | None], key: tuple[str, ...] | None
) -> dict[str, Any]:
    """What ``provplug diff ... --json`` prints."""
    from provplug.diff import diff_runs

    if target.get("where") is not None and target.get("table") is None:
        raise LineageQueryError("where needs table and column")
    result = diff_runs(
        store.store,
        run_a,
        run_b,
        table=target.get("table"),
        column=target.get("column"),
        where=target.get("where"),
        key=key,
    )
    return cast(dict[str, Any], finite(result))
