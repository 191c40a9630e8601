"""Plain-text tables, as every command's text output lays them out: columns
as wide as their widest cell, numbers right-aligned with separators."""

from __future__ import annotations

from collections.abc import Sequence


def aligned(headers: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[bool] | None = None) -> str:
    """Rows under their headers, each column as wide as its widest cell;
    columns flagged in ``right`` (numbers) are right-aligned."""
    text = [[str(h) for h in headers], *[[cell_text(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in text) for i in range(len(headers))]
    flags = list(right) if right is not None else [False] * len(headers)
    lines = [
        "  ".join(c.rjust(w) if flag else c.ljust(w) for c, w, flag in zip(r, widths, flags, strict=True)).rstrip()
        for r in text
    ]
    return "\n".join(lines)


def cell_text(value: object) -> str:
    """One value in a text table: numbers with separators, yes/no, ``-`` for nothing."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
