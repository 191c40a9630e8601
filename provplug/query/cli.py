"""``provplug lineage``: ancestors or descendants of a value, with their rows."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from ..errors import LineageQueryError

TARGET_HELP = (
    "the column whose cells to trace. Split at the last dot (sales.orders.amount is table "
    'sales.orders, column amount); a name holding a dot or a quote goes in double quotes, as in SQL, '
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


def add_parser(sub: Any) -> None:
    from ..cli import whole_number

    p = sub.add_parser(
        "lineage",
        help="ancestors (or descendants) of a value, with their rows",
        description="Trace a value's lineage. Give TABLE.COLUMN with --where, or --value-id.",
        epilog="With --json the answer is one JSON object on stdout (NaN and infinities as null); "
        'an error is one JSON object {"error": MESSAGE, "type": KIND} on stderr, exit code 2.',
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument("target", metavar="TABLE.COLUMN", nargs="?", help=TARGET_HELP)
    p.add_argument(
        "--where", metavar="PREDICATE",
        help="one SQL boolean expression over TABLE's columns selecting its rows, e.g. \"City = 'NY'\"",
    )
    p.add_argument("--value-id", metavar="N", type=int, action="append", help="a value id (repeatable)")
    p.add_argument("--direction", choices=("up", "down"), default="up", help="up: ancestors (default); down: descendants")
    p.add_argument("--method", default="auto", help="auto (default), csprov, ccprov, rq, or a plugin's method")
    p.add_argument("--tau", type=whole_number(0, "triples"), metavar="TRIPLES",
                   help="recurse on the driver below this many triples, on Spark above")
    p.add_argument("--json", action="store_true", help="the answer as JSON")
    p.set_defaults(func=_cmd_lineage)


def _cmd_lineage(args: argparse.Namespace) -> int:
    from .api import open as open_store

    if args.target is None and args.value_id is None:
        raise LineageQueryError("nothing to trace: give TABLE.COLUMN (with --where) or --value-id N")
    if args.target is not None and args.value_id is not None:
        raise LineageQueryError("give TABLE.COLUMN (with --where) or --value-id N, not both")
    if args.where is not None and args.target is None:
        raise LineageQueryError("--where needs TABLE.COLUMN")
    query: dict[str, Any] = {"method": args.method, "direction": args.direction, "tau": args.tau}
    if args.target is not None:
        table, column = parse_target(args.target)
        query.update(table=table, column=column, where=args.where)
    else:
        query.update(value_id=args.value_id)
    answer = open_store(args.store).lineage(**query)
    print(json.dumps(answer.to_dict(), indent=1) if args.json else answer.render())
    return 0
