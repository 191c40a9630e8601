"""The dependency query (Lipstick §4.3; docs/queries.md) and ``provplug depends``.

``provplug depends STORE A B``: does B depend on A, i.e. does B vanish or
change when A's rows are deleted? A and B are each a value id (or ids), or
``TABLE.COLUMN`` (``TABLE.*``: every column, a whole row) with the rows
chosen by ``--a-where`` / ``--b-where``. A names rows: its cells' rows are
deleted together; B names cells: B depends on A when a B cell's row vanishes
or the cell's value changes.

It is answered by one what-if (:mod:`provplug.whatif`): the deletion of A's
rows propagated over the row lineage, never by re-running or scanning the
store. The answer is ``yes`` with the chain of rows through which the
deletion reaches B (each row with what happens to it, and the op between
two rows), ``no``, or ``unknown`` when the what-if cannot tell (B's
existence depends on a changed key, an opaque op, or B's value is computed
from a changed cell).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

import numpy as np

from provplug.errors import LineageQueryError
from provplug.query.answer import Record, _label, _row_text, finite
from provplug.query.targets import parse_target
from provplug.whatif.answer import WhatIfAnswer
from provplug.whatif.engine import Propagation
from provplug.whatif.select import cell_rows
from provplug.whatif.values import UNKNOWN, shown

JSON_FORMAT = "provplug-depends"
JSON_VERSION = 2
Cells = int | Iterable[int] | str  # value id(s) or "TABLE.COLUMN"
Verdict = Literal["yes", "no", "unknown"]


class Queries(Protocol):
    """What the dependency query needs of :class:`~provplug.api.ProvenanceStore`."""

    def cells(self, *args: Any, **kwargs: Any) -> list[int]: ...

    def records(self, value_ids: Iterable[int]) -> list[Record]: ...

    def whatif(self, *args: Any, **kwargs: Any) -> WhatIfAnswer: ...


@dataclass
class DependsAnswer:
    """``answer``: yes, no or unknown (``depends``: True, False, None).
    ``path``: the rows from a deleted A row to B's row, each a record
    ``{table, row_number, row, effect}`` (``effect``: deleted, vanishes,
    changes — with ``cells`` old/new —, or unknown — with ``reason``), the
    last one also naming B's cell (``value_id``, ``column``, ``value``);
    ``ops[i]`` the op from ``path[i]`` to ``path[i+1]``. ``reason``: why."""

    answer: Verdict
    a: list[Record]
    b: list[Record]
    path: list[Record]
    ops: list[str]
    reason: str
    stats: dict[str, Any]

    @property
    def depends(self) -> bool | None:
        return {"yes": True, "no": False}.get(self.answer)

    def to_dict(self) -> dict[str, Any]:
        return cast(
            dict[str, Any],
            finite(
                {
                    "format": JSON_FORMAT,
                    "version": JSON_VERSION,
                    "depends": self.depends,
                    "answer": self.answer,
                    "reason": self.reason,
                    "a": self.a,
                    "b": self.b,
                    "path": self.path,
                    "ops": self.ops,
                    "stats": self.stats,
                }
            ),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def render(self) -> str:
        a, b = _cells_text(self.a), _cells_text(self.b)
        if self.answer == "no":
            return f"no: {b} does not depend on {a}\n({self.reason})"
        head = "yes" if self.answer == "yes" else "unknown"
        verb = "depends on" if self.answer == "yes" else "may depend on"
        lines = [f"{head}: {b} {verb} {a}", f"({self.reason}); the deletion's path:", f"  {_step_text(self.path[0])}"]
        lines += [f"  -> {op} -> {_step_text(step)}" for op, step in zip(self.ops, self.path[1:], strict=True)]
        return "\n".join(lines)


def _cells_text(records: list[Record]) -> str:
    if len(records) == 1:
        return _label(records[0])
    names = sorted({f"{r['table']}.{r['column']}" if r["column"] else str(r["table"]) for r in records})
    return f"{len(records)} cells of {', '.join(names)}"


def _step_text(step: Record) -> str:
    row = f"row {_row_text(step['row'])}" if step.get("row") else f"row {step['row_number']}"
    if step.get("column") is not None:
        where = f"{step['table']}.{step['column']} = {step['value']!r}  ({row})"
    else:
        where = f"{step['table']} {row}"
    effect = step["effect"]
    if effect == "changes":
        cells = step.get("cells", {})
        shown_cells = {step["column"]: cells[step["column"]]} if step.get("column") in cells else cells
        effect = "changes " + "; ".join(
            f"{c} to {v['new']!r}" if v["known"] else f"{c} (value unknown)" for c, v in shown_cells.items()
        )
    elif effect == "unknown":
        effect = f"unknown: {step.get('reason', '')}"
    return f"{where}: {effect}"


def depends(
    store: Queries,
    a: Cells,
    b: Cells,
    *,
    a_where: str | None = None,
    b_where: str | None = None,
    run: str | None = None,
) -> DependsAnswer:
    """See :meth:`ProvenanceStore.depends`."""
    a_ids = store.cells(**_selection(a, a_where, run, "A"))
    b_ids = store.cells(**_selection(b, b_where, run, "B"))
    shared = set(a_ids) & set(b_ids)
    if shared:
        raise LineageQueryError(
            f"A and B share {len(shared)} cell(s) (value {min(shared)}): a cell is not its own ancestor"
        )
    what = store.whatif(value_id=a_ids)
    b_records = store.records(b_ids)
    tables, columns, rows = cell_rows(what.propagation.catalog, np.array(b_ids, dtype=np.int64))
    cells = list(zip(tables.tolist(), columns.tolist(), rows.tolist(), strict=True))
    verdicts = [(_verdict(what.propagation, cell), cell, rec) for cell, rec in zip(cells, b_records, strict=True)]
    chosen = next((v for v in verdicts if v[0][0] == "yes"), None) or next(
        (v for v in verdicts if v[0][0] == "unknown"), None
    )
    stats = {**what.stats, "b_cells": len(b_ids)}
    a_records = store.records(a_ids)
    if chosen is None:
        reason = f"deleting A's {_rows_text(what)} neither removes nor changes any of B's {len(b_ids)} cell(s)"
        return DependsAnswer("no", a_records, b_records, [], [], reason, stats)
    (verdict, reason), cell, record = chosen
    path, ops = _path(what, cell, record)
    return DependsAnswer(verdict, a_records, b_records, path, ops, reason, stats)


def _rows_text(what: WhatIfAnswer) -> str:
    rows = sum(len(t.deleted) for t in what.tables)
    return "row" if rows == 1 else f"{rows} rows"


def _verdict(propagation: Propagation, cell: tuple[int, int, int]) -> tuple[Verdict, str]:
    """What deleting A does to the cell (table, column, row): yes (it
    vanishes, or a known value changes), unknown, or no."""
    table, column, row = cell
    state = propagation.states.get(table)
    if state is None:
        return "no", ""
    if row in state.dead:
        return "yes", "its row vanishes when A's rows are deleted"
    if state.whole:
        return "unknown", f"every row of its table is unknown: {state.whole}"
    if row in state.maybe:
        return "unknown", f"its row may vanish: {state.maybe[row][0]}"
    name = _column_name(propagation, table, column)
    if row in state.changed and name in state.changed[row]:
        if state.changed[row][name] is UNKNOWN:
            return "unknown", "its value is computed from a changed cell: it may change"
        return "yes", "its value changes when A's rows are deleted"
    return "no", ""


def _column_name(propagation: Propagation, table: int, column: int) -> str | None:
    """The name of ``column`` of ``table`` (from the rules, or the catalogue of the answer's tables)."""
    columns = propagation.columns.get(table, ())
    return columns[column] if 0 <= column < len(columns) else None


def _path(what: WhatIfAnswer, cell: tuple[int, int, int], record: Record) -> tuple[list[Record], list[str]]:
    """The chain of rows from a deleted A row to B's row (by each row's cause)."""
    propagation: Propagation = what.propagation
    table, _, row = cell
    steps: list[Record] = []
    ops: list[str] = []
    at: tuple[int, int] | None = (table, row)
    while at is not None:
        t, r = at
        state = propagation.states[t]
        step, cause = _step(what, t, r)
        steps.append(step)
        if cause is not None and state.op is not None:
            ops.append(propagation.ops[state.op].name)
        at = cause
    steps.reverse()
    ops.reverse()
    steps[-1].update({"value_id": record["value_id"], "column": record["column"], "value": record["value"]})
    return steps, ops


def _step(what: WhatIfAnswer, table: int, row: int) -> tuple[Record, tuple[int, int] | None]:
    state = what.propagation.states[table]
    old = what.propagation.old.get(table, {}).get(row)
    effect = next((t for t in what.tables if t.table_id == table), None)
    step: Record = {
        "table": effect.table if effect else str(table),
        "row_number": row,
        "row": None if old is None else {k: shown(v) for k, v in old.items()},
    }
    if row in state.dead:
        cause = state.dead[row]
        step["effect"] = "deleted" if cause is None else "vanishes"
    elif row in state.maybe:
        reason, cause = state.maybe[row]
        step.update(effect="unknown", reason=reason)
    else:
        cause = state.changed_cause.get(row)
        cells = state.changed.get(row, {})
        step.update(
            effect="changes",
            cells={
                c: {"old": shown((old or {}).get(c)), "new": shown(v), "known": v is not UNKNOWN}
                for c, v in cells.items()
            },
        )
    return step, cause


def _selection(cells: Cells, where: str | None, run: str | None, name: str) -> dict[str, Any]:
    """The :meth:`ProvenanceStore.cells` arguments of side ``name``."""
    if isinstance(cells, str):
        table, column = parse_target(cells)
        return {"table": table, "column": column, "where": where, "run": run}
    if where is not None:
        raise LineageQueryError(f"{name}: a where clause needs TABLE.COLUMN, not value ids")
    return {"value_id": cells, "run": run}
