"""The answer of a what-if: per table, rows deleted, rows that vanish,
cells that change (old -> new), rows whose fate is unknown, and the number of
untouched rows; as text (bounded) and JSON (everything)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, cast

from provplug.query.answer import finite
from provplug.whatif.values import UNKNOWN, shown

JSON_FORMAT = "provplug-whatif"
JSON_VERSION = 1
MAX_ROWS_SHOWN = 10  # rows listed per table and kind in the text


@dataclasses.dataclass
class RowEffect:
    """One row: its number, its stored values (None when not stored), and for
    a changed row its changed cells ``column -> (old, new)`` (new
    ``UNKNOWN``: changed, value unknown); for an unknown row, why."""

    row: int
    values: dict[str, Any] | None
    changes: dict[str, tuple[Any, Any]] = dataclasses.field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "row": self.row,
            "values": None if self.values is None else {k: shown(v) for k, v in self.values.items()},
        }
        if self.changes:
            out["cells"] = {
                c: {"old": shown(old), "new": shown(new), "known": new is not UNKNOWN}
                for c, (old, new) in self.changes.items()
            }
        if self.reason:
            out["reason"] = self.reason
        return out

    def text(self) -> str:
        row = _row_text(self.values) if self.values is not None else f"row {self.row}"
        if self.changes:
            cells = "; ".join(f"{c} {_value(old)} -> {_value(new)}" for c, (old, new) in self.changes.items())
            return f"{row}: {cells}"
        return f"{row}: {self.reason}" if self.reason else row


@dataclasses.dataclass
class TableEffect:
    """What the deletion does to one table (``op``: the op that wrote it;
    ``rows``: its row count when known). ``every_row_unknown``: why no row
    of it can be told; ``rows_may_appear``: why rows absent now may appear."""

    table: str
    table_id: int
    run_id: str
    op: str | None
    rows: int | None
    deleted: list[RowEffect] = dataclasses.field(default_factory=list)
    vanished: list[RowEffect] = dataclasses.field(default_factory=list)
    changed: list[RowEffect] = dataclasses.field(default_factory=list)
    unknown: list[RowEffect] = dataclasses.field(default_factory=list)
    every_row_unknown: str | None = None
    rows_may_appear: str | None = None

    @property
    def untouched(self) -> int | None:
        if self.rows is None or self.every_row_unknown:
            return None
        return self.rows - len(self.deleted) - len(self.vanished) - len(self.changed) - len(self.unknown)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "table_id": self.table_id,
            "run_id": self.run_id,
            "op": self.op,
            "rows": self.rows,
            "untouched": self.untouched,
            **{
                kind: [r.to_dict() for r in getattr(self, kind)]
                for kind in ("deleted", "vanished", "changed", "unknown")
            },
            "every_row_unknown": self.every_row_unknown,
            "rows_may_appear": self.rows_may_appear,
        }

    def render(self, limit: int) -> list[str]:
        name = f"{self.table} ({self.op})" if self.op else self.table
        if self.every_row_unknown:
            return [f"{name}: every row unknown: {self.every_row_unknown}"]
        counts = [
            f"{len(rows)} {_plural(len(rows), verb)}"
            for verb, rows in (
                ("deleted", self.deleted),
                ("vanishes", self.vanished),
                ("changes", self.changed),
                ("unknown", self.unknown),
            )
            if rows
        ]
        if self.untouched is not None:
            counts.append(f"{self.untouched:,} untouched")
        lines = [f"{name}: {', '.join(counts) or 'nothing changes'}"]
        for mark, rows in (("-", self.deleted), ("-", self.vanished), ("~", self.changed), ("?", self.unknown)):
            lines += [f"  {mark} {r.text()}" for r in rows[:limit]]
            if len(rows) > limit:
                lines.append(f"  ... {len(rows) - limit:,} more (all: --json)")
        if self.rows_may_appear:
            lines.append(f"  + rows may appear: {self.rows_may_appear}")
        return lines


@dataclasses.dataclass
class WhatIfAnswer:
    """The tables a deletion reaches, in the order it reaches them."""

    tables: list[TableEffect]
    stats: dict[str, Any]
    # The propagation itself (per table state, causes): what `depends` walks.
    propagation: Any = dataclasses.field(default=None, repr=False, compare=False)

    def table(self, name: str) -> TableEffect | None:
        return next((t for t in self.tables if t.table == name), None)

    def to_dict(self) -> dict[str, Any]:
        return cast(
            dict[str, Any],
            finite(
                {
                    "format": JSON_FORMAT,
                    "version": JSON_VERSION,
                    "tables": [t.to_dict() for t in self.tables],
                    "stats": self.stats,
                }
            ),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def render(self, limit: int = MAX_ROWS_SHOWN) -> str:
        deleted = [t for t in self.tables if t.deleted]
        what = " and ".join(f"{len(t.deleted):,} {_plural(len(t.deleted), 'row')} of {t.table}" for t in deleted)
        lines = [f"what if {what} were deleted:"]
        for t in self.tables:
            lines += ["  " + line for line in t.render(limit)]
        if len(self.tables) == len(deleted):
            lines.append("  nothing downstream changes")
        return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    forms = {"row": "rows", "vanishes": "vanish", "changes": "change"}
    return word if n == 1 else forms.get(word, word)


def _value(value: Any) -> str:
    return "?" if value is UNKNOWN else repr(value)


def _row_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
