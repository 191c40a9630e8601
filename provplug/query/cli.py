"""``provplug lineage``: ancestors or descendants of a value, with their rows."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "lineage",
        help="ancestors (or descendants) of a value, with their rows",
        description="Trace a value's lineage. Give TABLE.COLUMN with --where, or --value-id.",
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument("target", metavar="TABLE.COLUMN", nargs="?", help="the column whose cells to trace")
    p.add_argument("--where", metavar="PREDICATE", help="SQL predicate selecting rows of TABLE, e.g. \"City = 'NY'\"")
    p.add_argument("--value-id", metavar="N", type=int, action="append", help="a value id (repeatable)")
    p.add_argument("--direction", choices=("up", "down"), default="up", help="up: ancestors (default); down: descendants")
    p.add_argument("--method", default="auto", help="auto (default), csprov, ccprov, rq, or a plugin's method")
    p.add_argument("--tau", type=int, metavar="TRIPLES", help="recurse on the driver below this many triples, on Spark above")
    p.add_argument("--json", action="store_true", help="the answer as JSON")
    p.set_defaults(func=_cmd_lineage)


def _cmd_lineage(args: argparse.Namespace) -> int:
    from ..errors import LineageQueryError
    from .api import open as open_store

    if args.target is None and args.value_id is None:
        raise LineageQueryError("nothing to trace: give TABLE.COLUMN (with --where) or --value-id N")
    if args.target is not None and args.value_id is not None:
        raise LineageQueryError("give TABLE.COLUMN (with --where) or --value-id N, not both")
    if args.where is not None and args.target is None:
        raise LineageQueryError("--where needs TABLE.COLUMN")
    query: dict[str, Any] = {"method": args.method, "direction": args.direction, "tau": args.tau}
    if args.target is not None:
        table, dot, column = args.target.rpartition(".")
        if not dot or not table or not column:
            raise LineageQueryError(f"expected TABLE.COLUMN, got {args.target!r}")
        query.update(table=table, column=column, where=args.where)
    else:
        query.update(value_id=args.value_id)
    answer = open_store(args.store).lineage(**query)
    print(json.dumps(answer.to_dict(), indent=1) if args.json else answer.render())
    return 0
