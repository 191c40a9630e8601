"""``provplug show STORE TABLE``: one table, its run, the op that wrote it, its first rows."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import emit
from provplug.cli.stores import RUN_HELP, opened


def add_parser(sub: Any) -> None:
    from provplug.cli.output import whole_number

    p = sub.add_parser("show", help="one table: columns, rows, run, the op that wrote it, its first rows")
    p.add_argument("store", metavar="STORE")
    p.add_argument("table", metavar="TABLE")
    p.add_argument("--run", metavar="RUN", help=f"{RUN_HELP}; default: the latest run that wrote TABLE")
    p.add_argument("--limit", type=whole_number(0, "rows"), default=10, metavar="N", help="rows to show (default 10)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_show)


def _cmd_show(args: argparse.Namespace) -> int:
    from provplug.explore.browse import render_detail, table_detail

    detail = table_detail(opened(args.store), args.table, args.run, args.limit)
    return emit(args, detail, render_detail(detail))
