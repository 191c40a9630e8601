"""``provplug delete-run STORE RUN``: delete one run atomically."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import emit, size_text
from provplug.cli.stores import RUN_HELP, opened


def add_parser(sub: Any) -> None:
    p = sub.add_parser("delete-run", help="delete one run atomically (re-index afterwards)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("run", metavar="RUN", help=RUN_HELP)
    p.add_argument(
        "--force",
        action="store_true",
        help="delete it even when another run read a dataset it wrote (that run's answers then mark the version missing)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_delete_run)


def _cmd_delete_run(args: argparse.Namespace) -> int:
    from provplug.explore.manage import delete_run

    done = delete_run(opened(args.store), args.run, force=args.force)
    c = done["counts"]
    text = (
        f"deleted run {done['run_id']} ({done['kind']}, {done['committed']}): {c.get('tables', 0):,} tables, "
        f"{c.get('ops', 0):,} ops, {c.get('triples', 0):,} triples; {size_text(done['bytes'])} freed"
    )
    text += "".join(f"\n{line}" for line in orphaned_lines(done["orphaned"]))
    if done["index_stale"]:
        text += f"\nthe index still holds its triples: queries refuse it until `provplug index {args.store}`"
    return emit(args, done, text)


def orphaned_lines(orphaned: list[dict[str, Any]]) -> list[str]:
    """A line per dataset version a remaining run read from a deleted run."""
    return [
        f"run {o['run']['number']}{_label(o['run'])} read {o['dataset']} from it: "
        "its answers now mark that version missing"
        for o in orphaned
    ]


def _label(run: dict[str, Any]) -> str:
    return f" ({run['label']})" if run.get("label") else ""
