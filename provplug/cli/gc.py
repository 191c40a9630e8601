"""``provplug gc STORE``: remove crashed writers' staging, old index generations, interrupted deletions."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import emit, size_text
from provplug.cli.stores import opened


def add_parser(sub: Any) -> None:
    p = sub.add_parser("gc", help="remove crashed writers' staging, old index generations, interrupted deletions")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument("--now", action="store_true",
                   help="also the previous index generation, at once, unless a query holds it "
                        "(default: kept 10 min after a re-index)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_gc)


def _cmd_gc(args: argparse.Namespace) -> int:
    from provplug.explore.manage import collect_garbage

    report = collect_garbage(opened(args.store), dry_run=args.dry_run, now=args.now)
    verb = "would remove" if args.dry_run else "removed"
    lines = [f"{verb} {g['kind']} {g['name']} ({size_text(g['bytes'])})" for g in report["removed"]]
    lines += [f"skipped {s}" for s in report["skipped"]]
    total = f"{len(report['removed'])} item(s), {size_text(report['bytes'])}"
    lines.append(f"dry run: {total} would be freed" if args.dry_run else f"removed {total} freed")
    return emit(args, report, "\n".join(lines))
