"""``provplug run``: run an unmodified PySpark script with its writes captured
(see :mod:`provplug.scripts`). Nothing heavy is imported until it runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run an unmodified PySpark script, capturing every DataFrame write as a step",
        description="Runs SCRIPT like `python SCRIPT ARGS` and captures each DataFrame write it makes as a "
        "step (op write:NAME, output table NAME: the written table, or the path's last component without "
        "its extension) into STORE. The run commits when the script exits with status 0; otherwise the "
        "store is left as it was and provplug exits with the script's status.",
    )
    p.add_argument("--store", required=True, metavar="STORE", help="store directory or URI (created if missing)")
    p.add_argument("--no-rows", action="store_true", help="keep only value ids, not the rows of the tables")
    p.add_argument("--reduce", action="append", metavar="SPEC", default=[],
                   help="keep provenance for some rows of a source only: TABLE=TECHNIQUE:key=value,... "
                   "(e.g. flights=sample:ratio=0.33,seed=1; repeatable). Production mode: every row is "
                   "computed, only the kept rows' triples are stored")
    p.add_argument("--label", metavar="LABEL", help="name the run (see `provplug runs`; --run LABEL picks it)")
    p.add_argument("--tag", action="append", default=[], metavar="TAG", help="tag the run (repeatable)")
    p.add_argument("script", metavar="SCRIPT", help="the PySpark script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's own arguments")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    from .reduce.spec import parse_specs
    from .scripts import run_script

    reduce = parse_specs(args.reduce)  # a malformed spec fails before the script runs
    status, run = run_script(args.script, args.args, args.store, store_rows=not args.no_rows, reduce=reduce,
                             label=args.label, tags=args.tag)
    if status != 0:
        print(f"provplug: the script exited with status {status}; nothing captured", file=sys.stderr)
    elif run is None:
        print("provplug: the script wrote no DataFrame; nothing captured", file=sys.stderr)
    else:
        writes = sum(1 for op in run.txn.ops if op.name.startswith("write:"))
        tables = {t for op in run.txn.ops for t in (*op.inputs, *op.outputs)}
        number = getattr(run.txn, "number", None)
        print(f"provplug: captured run {number if number is not None else '?'} ({run.run_id}; {writes} writes, "
              f"{len(tables)} tables) "
              f"into {args.store}", file=sys.stderr)
    return status
