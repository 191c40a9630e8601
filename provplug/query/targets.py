"""``TABLE.COLUMN`` arguments: how the commands name the cells to trace."""

from __future__ import annotations

import re

from provplug.errors import LineageQueryError

TARGET_HELP = (
    "the column whose cells to trace. Split at the last dot (sales.orders.amount is table "
    "sales.orders, column amount); a name holding a dot or a quote goes in double quotes, as in SQL, "
    'with "" for a quote inside: "a.b"."c.d", T."c.d", "say ""hi""".C'
)

# TABLE.COLUMN: each side a double-quoted name ("" escapes a quote) or bare
# text without quotes; a bare column holds no dot, so bare.bare splits at the last dot.
_QUOTED = r'"((?:[^"]|"")+)"'
_TARGET = re.compile(rf'(?:{_QUOTED}|([^"]+))\.(?:{_QUOTED}|([^".]+))')


def parse_target(text: str) -> tuple[str, str]:
    """``(table, column)`` of a ``TABLE.COLUMN`` argument (see :data:`TARGET_HELP`)."""
    match = _TARGET.fullmatch(text)
    if match is None:
        raise LineageQueryError(
            f'expected TABLE.COLUMN, got {text!r} (quote a name holding a dot or a quote: "a.b"."c.d")'
        )
    quoted_table, table, quoted_column, column = match.groups()
    if quoted_table is not None:
        table = quoted_table.replace('""', '"')
    if quoted_column is not None:
        column = quoted_column.replace('""', '"')
    return table, column
