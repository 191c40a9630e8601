"""``provplug diff STORE [RUN_A RUN_B] [TABLE[.COLUMN]]``: which output cells
differ between two runs, and which source cells explain each."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.errors import LineageQueryError


def add_parser(sub: Any) -> None:
    from provplug.query.targets import TARGET_HELP

    p: argparse.ArgumentParser = sub.add_parser(
        "diff",
        help="which output cells differ between two runs, and which source cells explain each",
        description="Compare the tables both runs wrote (or TABLE), matching rows by --key, else by the "
        "table's non-numeric columns (equal keys in row order), else by row position; for every changed "
        "cell, the source cells of its lineage that differ. Without runs, TABLE in the two latest runs "
        "that wrote it.",
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument(
        "operands",
        nargs="*",
        metavar="[RUN_A RUN_B] [TABLE[.COLUMN]]",
        help="the earlier and the later run (a number, latest, latest~N, a label or an id prefix; "
        "default: the two latest runs that wrote TABLE), and the cells to compare. " + TARGET_HELP,
    )
    p.add_argument(
        "--where",
        metavar="PREDICATE",
        action="append",
        help="an SQL boolean expression over TABLE's columns (repeatable: the rows where all hold)",
    )
    p.add_argument(
        "--key",
        metavar="COLUMN",
        action="append",
        help="a column that identifies a row (repeatable; default: see above). "
        "Deprecated: several columns in one --key, comma-separated",
    )
    p.add_argument("--json", action="store_true", help="the differences as one JSON object")
    p.set_defaults(func=_cmd_diff)


def _cmd_diff(args: argparse.Namespace) -> int:
    from provplug.cli.output import Printed, combined_where, print_answer
    from provplug.diff import diff_runs, render
    from provplug.query.targets import parse_target
    from provplug.store.open import open_store

    if len(args.operands) > 3:
        raise LineageQueryError("diff takes at most two runs and one TABLE[.COLUMN]")
    runs, target = (args.operands[:2], args.operands[2:]) if len(args.operands) >= 2 else ([], args.operands)
    if args.where is not None and not target:
        raise LineageQueryError("--where needs TABLE.COLUMN")
    table = column = None
    if target:
        table, column = parse_target(target[0]) if "." in target[0] else (target[0], None)
    run_a, run_b = runs or (None, None)
    result = diff_runs(
        open_store(args.store),
        run_a,
        run_b,
        table=table,
        column=column,
        where=combined_where(args.where),
        key=_key_columns(args),
    )
    print_answer(Printed(result, lambda: render(result)), args.json)
    return 0


def _key_columns(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The --key columns; a comma inside one still splits it (the
    deprecated syntax ``--key a,b``, still accepted)."""
    if not args.key:
        return None
    return tuple(k.strip() for key in args.key for k in key.split(",") if k.strip())
