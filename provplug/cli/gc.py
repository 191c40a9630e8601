"""``provplug gc STORE [--keep-last N] [--older-than DAYS]``: delete runs a retention rule lets go, then
remove crashed writers' staging, old index generations, interrupted deletions."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import emit, size_text
from provplug.cli.stores import opened


def add_parser(sub: Any) -> None:
    p = sub.add_parser("gc", help="remove crashed writers' staging, old index generations, interrupted deletions")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument(
        "--now",
        action="store_true",
        help="also the previous index generation, at once, unless a query holds it "
        "(default: kept 10 min after a re-index)",
    )
    p.add_argument(
        "--keep-last",
        type=int,
        metavar="N",
        help="first delete every run but the N latest (with --older-than: a run goes when both let it)",
    )
    p.add_argument(
        "--older-than", type=float, metavar="DAYS", help="first delete the runs committed more than DAYS days ago"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="delete the runs the rules let go even when a kept run read a dataset one wrote "
        "(its answers then mark the version missing)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_gc)


def _cmd_gc(args: argparse.Namespace) -> int:
    from provplug.cli.delete_run import orphaned_lines
    from provplug.explore.manage import collect_garbage
    from provplug.explore.retention import retire

    store = opened(args.store)
    runs = retire(store, args.keep_last, args.older_than, dry_run=args.dry_run, force=args.force)
    garbage = collect_garbage(store, dry_run=args.dry_run, now=args.now)
    verb = "would remove" if args.dry_run else "removed"
    lines = [
        f"{'would delete' if args.dry_run else 'deleted'} run {r['number']} ({r['run_id']}, committed {r['committed']})"
        for r in runs
    ]
    lines += [line for r in runs for line in orphaned_lines(r.get("orphaned", []))]
    if any(r.get("index_stale") for r in runs):
        lines.append(
            f"the index still holds deleted runs' triples: queries refuse it until `provplug index {args.store}`"
        )
    lines += [f"{verb} {g['kind']} {g['name']} ({size_text(g['bytes'])})" for g in garbage["removed"]]
    lines += [f"skipped {s}" for s in garbage["skipped"]]
    total = f"{len(garbage['removed'])} item(s), {size_text(garbage['bytes'])}"
    lines.append(f"dry run: {total} would be freed" if args.dry_run else f"removed {total} freed")
    return emit(args, {**garbage, "runs": runs}, "\n".join(lines))
