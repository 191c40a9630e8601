"""``provplug export`` and ``provplug diff``: share a store in standard
formats, and compare two runs of a pipeline cell by cell."""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

from provplug.errors import LineageQueryError

EXPORT_FORMATS = ("prov-json", "prov-n", "openlineage")


def add_parser(sub: Any) -> None:
    _add_export(sub)
    _add_diff(sub)


def _add_target(p: argparse.ArgumentParser, what: str) -> None:
    from provplug.query.targets import TARGET_HELP

    p.add_argument("target", metavar="TABLE.COLUMN", nargs="?", help=f"{what}. {TARGET_HELP}")
    p.add_argument("--where", metavar="PREDICATE", action="append",
                   help="an SQL boolean expression over TABLE's columns (repeatable: the rows where all hold)")


def _add_export(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "export",
        help="export a run, the store or a lineage answer as W3C PROV or OpenLineage",
        description="Without a target: the whole run (--run) or store. With TABLE.COLUMN --where P or "
        "--value-id N: that lineage answer. PROV lists every value only for runs of at most 100,000 values.",
    )
    p.add_argument("store", metavar="STORE")
    _add_target(p, "export the lineage of these cells")
    p.add_argument("--value-id", metavar="N", type=int, action="append", help="export this value's lineage (repeatable)")
    p.add_argument("--run", metavar="RUN", help="one run (a number, latest, latest~N, a label or an id prefix); "
                   "default: the whole store, or for TABLE the latest run that wrote it")
    p.add_argument("--direction", choices=("up", "down"), default="up", help="with a target: ancestors (default) or descendants")
    p.add_argument("--format", required=True, choices=EXPORT_FORMATS, help="prov-json, prov-n or openlineage (a JSON array of RunEvents)")
    p.add_argument("--namespace", help="OpenLineage namespace (default: provplug:// and the store's path)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (whole, or not at all) instead of stdout")
    p.set_defaults(func=_cmd_export)
    return p


def _cmd_export(args: argparse.Namespace) -> int:
    from provplug.cli.main import combined_where, note
    from provplug.export import Target, export
    from provplug.query.targets import parse_target
    from provplug.store.open import open_store

    if args.target is not None and args.value_id is not None:
        raise LineageQueryError("give TABLE.COLUMN (with --where) or --value-id N, not both")
    if args.where is not None and args.target is None:
        raise LineageQueryError("--where needs TABLE.COLUMN")
    target = None
    if args.target is not None:
        table, column = parse_target(args.target)
        target = Target(table=table, column=column, where=combined_where(args.where), direction=args.direction)
    elif args.value_id is not None:
        target = Target(value_ids=tuple(args.value_id), direction=args.direction)
    store = open_store(args.store)
    text = export(store, args.format, run=args.run, target=target, namespace=args.namespace)
    if target is not None and target.table is not None:
        _say_run(store, target.table, args.run)
    if args.output is None:
        print(text)
    else:
        _write_whole(args.output, text + "\n")
        note(args, f"wrote {args.output} ({len(text.encode()) + 1:,} bytes)")
    return 0


def _say_run(store: Any, table: str, run: str | None) -> None:
    """On stderr (stdout is the document): the run whose TABLE was exported, when there was one to choose."""
    import sys

    from provplug.query.catalog import catalog_for
    from provplug.store.runs import run_note

    note = run_note(catalog_for(store).table_choice(table, run)[1])
    if note:
        print(f"provplug: {note}", file=sys.stderr)


def _write_whole(path: str, text: str) -> None:
    """Write ``path`` through a file beside it and a rename: never half written."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".provplug-export-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _add_diff(sub: Any) -> argparse.ArgumentParser:
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
    p.add_argument("operands", nargs="*", metavar="[RUN_A RUN_B] [TABLE[.COLUMN]]",
                   help="the earlier and the later run (a number, latest, latest~N, a label or an id prefix; "
                   "default: the two latest runs that wrote TABLE), and the cells to compare. " + TARGET_HELP)
    p.add_argument("--where", metavar="PREDICATE", action="append",
                   help="an SQL boolean expression over TABLE's columns (repeatable: the rows where all hold)")
    p.add_argument("--key", metavar="COLUMN", action="append",
                   help="a column that identifies a row (repeatable; default: see above). "
                   "Deprecated: several columns in one --key, comma-separated")
    p.add_argument("--json", action="store_true", help="the differences as one JSON object")
    p.set_defaults(func=_cmd_diff)
    return p


def _cmd_diff(args: argparse.Namespace) -> int:
    from provplug.cli.main import combined_where, print_json
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
    result = diff_runs(open_store(args.store), run_a, run_b, table=table, column=column,
                       where=combined_where(args.where), key=_key_columns(args))
    if args.json:
        print_json(result)
    else:
        print(render(result))
    return 0


def _key_columns(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The --key columns; a comma inside one still splits it (the
    deprecated syntax ``--key a,b``, still accepted)."""
    if not args.key:
        return None
    return tuple(k.strip() for key in args.key for k in key.split(",") if k.strip())
