"""``whatif``: deleted rows -> the propagation -> the answer (see :mod:`provplug.whatif`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from provplug.plugin.protocols import Store
from provplug.query.catalog import Catalog, catalog_for
from provplug.whatif.answer import RowEffect, TableEffect, WhatIfAnswer
from provplug.whatif.engine import Engine, Propagation
from provplug.whatif.select import Deletion, deleted_rows

logger = logging.getLogger(__name__)  # what a what-if was asked and found


def whatif(
    store: Store[Any], deletions: Sequence[Deletion] = (), value_ids: Iterable[int] = (), run: str | None = None
) -> WhatIfAnswer:
    """What deleting the rows ``deletions`` and the rows of ``value_ids``
    would do downstream; nothing is re-run or written."""
    started = time.perf_counter()
    catalog = catalog_for(store)
    rows = deleted_rows(catalog, deletions, value_ids, run)
    logger.info(
        "what-if on %s: deleting %d rows of %d tables", store.uri, sum(len(r) for r in rows.values()), len(rows)
    )
    answer = answer_of(catalog, Engine(store, catalog).propagate(rows), rows, started)
    logger.info(
        "what-if on %s: %d tables affected in %.3f s (%s)",
        store.uri,
        len(answer.tables),
        answer.stats["seconds"],
        {k: v for k, v in answer.stats.items() if k != "seconds"},
    )
    return answer


def answer_of(
    catalog: Catalog, propagation: Propagation, deleted: dict[int, np.ndarray], started: float
) -> WhatIfAnswer:
    tables = []
    for table_id, state in propagation.states.items():
        entry = catalog.tables.get(table_id)
        op = propagation.ops.get(state.op) if state.op is not None else None
        old = propagation.old.get(table_id, {})
        effect = TableEffect(
            entry.name if entry else str(table_id),
            table_id,
            entry.run_id if entry else "",
            op.name if op else None,
            entry.rows if entry else None,
            every_row_unknown=state.whole,
            rows_may_appear=state.may_appear,
        )
        seeds = set(deleted.get(table_id, np.empty(0, np.int64)).tolist())
        for r in sorted(state.dead):
            (effect.deleted if r in seeds else effect.vanished).append(RowEffect(r, old.get(r)))
        for r, (reason, _) in sorted(state.maybe.items()):
            effect.unknown.append(RowEffect(r, old.get(r), reason=reason))
        for r, cells in sorted(state.changed.items()):
            values = old.get(r)
            before = values or {}
            effect.changed.append(RowEffect(r, values, {c: (before.get(c), new) for c, new in cells.items()}))
        if effect.deleted or effect.vanished or effect.changed or effect.unknown or state.whole or state.may_appear:
            tables.append(effect)
    stats = {
        **propagation.stats,
        "seconds": round(time.perf_counter() - started, 6),
        "rows_deleted": int(sum(len(r) for r in deleted.values())),
    }
    return WhatIfAnswer(tables, stats, propagation)


def run_used(store: Any, answer: Any, run: str | None) -> dict[str, Any] | None:
    """The run whose rows were deleted (the first deleted table's), and how many runs wrote that table."""
    deleted = next((t for t in answer.tables if t.deleted), None)
    if deleted is None:
        return None
    return catalog_for(store.store).run_of_table(deleted.table_id, run is not None)
