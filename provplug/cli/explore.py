"""``provplug runs``, ``tables``, ``show``, ``delete-run`` and ``gc``.

Parsers only here; the work is imported when a command runs (no pyarrow at
start-up).
"""

from __future__ import annotations

import argparse
from typing import Any

RUN_HELP = "the run: its number, latest, latest~N, its label or an id prefix (see `provplug runs`)"


def add_parser(sub: Any) -> None:
    from provplug.cli.main import whole_number

    p = sub.add_parser("runs", help="list the committed runs (captures and imports) by number: label, entry point, "
                       "git commit, status, start time, counts")
    _store_and_json(p)
    p.set_defaults(func=_cmd_runs)

    p = sub.add_parser("tables", help="list the tables of every run (or of one run)")
    _store_and_json(p)
    p.add_argument("--run", metavar="RUN", help=RUN_HELP)
    p.set_defaults(func=_cmd_tables)

    p = sub.add_parser("show", help="one table: columns, rows, run, the op that wrote it, its first rows")
    p.add_argument("store", metavar="STORE")
    p.add_argument("table", metavar="TABLE")
    p.add_argument("--run", metavar="RUN", help=f"{RUN_HELP}; default: the latest run that wrote TABLE")
    p.add_argument("--limit", type=whole_number(0, "rows"), default=10, metavar="N", help="rows to show (default 10)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("delete-run", help="delete one run atomically (re-index afterwards)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("run", metavar="RUN", help=RUN_HELP)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_delete_run)

    p = sub.add_parser("gc", help="remove crashed writers' staging, old index generations, interrupted deletions")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument("--now", action="store_true",
                   help="also the previous index generation, at once, unless a query holds it "
                        "(default: kept 10 min after a re-index)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_gc)


def _store_and_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _open(uri: str) -> Any:
    from provplug.store.open import open_store

    store = open_store(uri)
    store.check()
    return store


def _emit(args: argparse.Namespace, data: Any, text: str) -> int:
    from provplug.cli.main import print_json

    if args.json:
        print_json(data)
    else:
        print(text)
    return 0


def _cmd_runs(args: argparse.Namespace) -> int:
    from provplug.explore.browse import render_runs, run_records

    runs = run_records(_open(args.store))
    return _emit(args, runs, render_runs(runs))


def _cmd_tables(args: argparse.Namespace) -> int:
    from provplug.explore.browse import render_tables, table_records

    tables = table_records(_open(args.store), args.run)
    return _emit(args, tables, render_tables(tables))


def _cmd_show(args: argparse.Namespace) -> int:
    from provplug.explore.browse import render_detail, table_detail

    detail = table_detail(_open(args.store), args.table, args.run, args.limit)
    return _emit(args, detail, render_detail(detail))


def _cmd_delete_run(args: argparse.Namespace) -> int:
    from provplug.explore.manage import delete_run

    done = delete_run(_open(args.store), args.run)
    c = done["counts"]
    text = (
        f"deleted run {done['run_id']} ({done['kind']}, {done['committed']}): {c.get('tables', 0):,} tables, "
        f"{c.get('ops', 0):,} ops, {c.get('triples', 0):,} triples; {_size(done['bytes'])} freed"
    )
    if done["index_stale"]:
        text += f"\nthe index still holds its triples: queries refuse it until `provplug index {args.store}`"
    return _emit(args, done, text)


def _cmd_gc(args: argparse.Namespace) -> int:
    from provplug.explore.manage import collect_garbage

    report = collect_garbage(_open(args.store), dry_run=args.dry_run, now=args.now)
    verb = "would remove" if args.dry_run else "removed"
    lines = [f"{verb} {g['kind']} {g['name']} ({_size(g['bytes'])})" for g in report["removed"]]
    lines += [f"skipped {s}" for s in report["skipped"]]
    total = f"{len(report['removed'])} item(s), {_size(report['bytes'])}"
    lines.append(f"dry run: {total} would be freed" if args.dry_run else f"removed {total} freed")
    return _emit(args, report, "\n".join(lines))


def _size(n: int) -> str:
    """Bytes as people read them: 812 bytes, 14.2 KB, 3.1 MB (powers of 1,024)."""
    if n < 1024:
        return f"{n:,} bytes"
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            break
    return f"{value:.1f} {unit} ({n:,} bytes)"
