"""``provplug tables STORE [--run RUN]``: the tables of every run (or of one)."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import emit
from provplug.cli.stores import RUN_HELP, opened, store_and_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tables", help="list the tables of every run (or of one run)")
    store_and_json(p)
    p.add_argument("--run", metavar="RUN", help=RUN_HELP)
    p.set_defaults(func=_cmd_tables)


def _cmd_tables(args: argparse.Namespace) -> int:
    from provplug.explore.browse import render_tables, table_records

    tables = table_records(opened(args.store), args.run)
    return emit(args, tables, render_tables(tables))
