"""``provplug depends STORE A B``: the command line of :mod:`provplug.whatif.depends`."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.query.targets import TARGET_HELP


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "depends",
        help="does B depend on A? yes (B vanishes or changes when A's rows are deleted) with the path, no, or unknown",
        description="Does B depend on A: does a cell of B vanish or change when the rows of A are deleted "
        "(a what-if over the row lineage)? A and B are each a value id or TABLE.COLUMN (TABLE.* for whole rows) "
        "with --a-where / --b-where.",
        epilog="Example: provplug depends STORE Person1.Age AvgAge.Age --a-where \"Name = 'Mark'\" "
        "--b-where \"City = 'NY'\". Exit code 0 for yes, no and unknown; errors exit 2.",
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument("a", metavar="A", help=f"the cells whose rows are deleted: a value id, or {TARGET_HELP}")
    p.add_argument("b", metavar="B", help="the later cells: a value id or TABLE.COLUMN, as A")
    p.add_argument(
        "--a-where",
        metavar="PREDICATE",
        action="append",
        help="A's rows: an SQL boolean expression over its table (repeatable: the rows where all hold)",
    )
    p.add_argument(
        "--b-where",
        metavar="PREDICATE",
        action="append",
        help="B's rows: an SQL boolean expression over its table (repeatable: the rows where all hold)",
    )
    p.add_argument("--run", metavar="RUN", help="the tables of run RUN (when several runs wrote a table name)")
    p.add_argument("--json", action="store_true", help="the answer as JSON")
    p.set_defaults(func=_cmd_depends)


def _side(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _cmd_depends(args: argparse.Namespace) -> int:
    from provplug.api import open as open_store
    from provplug.cli.output import combined_where, print_answer

    answer = open_store(args.store).depends(
        _side(args.a),
        _side(args.b),
        a_where=combined_where(args.a_where),
        b_where=combined_where(args.b_where),
        run=args.run,
    )
    print_answer(answer, args.json)
    return 0
