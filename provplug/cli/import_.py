"""``provplug import STORE --triples FILE``: provenance triples captured by another system."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import print_json
from provplug.progress import Progress


def add_parser(sub: Any) -> None:
    p = sub.add_parser("import", help="import provenance triples captured by another system")
    p.add_argument("store", metavar="STORE", help="store directory or URI (created if missing)")
    p.add_argument("--triples", required=True, metavar="FILE", help="Parquet or CSV with src, dst, op")
    p.add_argument("--values", metavar="FILE", help="Parquet or CSV with value_id, table[, column][, row]")
    p.add_argument(
        "--row-lineage",
        metavar="FILE",
        help="Parquet or CSV with op, out_table, out_row[, member], in_table, in_row[, optional] "
        "(what-if and depends follow it; needs --row-rules)",
    )
    p.add_argument(
        "--row-rules", metavar="FILE", help="JSON list of the row rules of each op (see provplug.ingest.importer)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_import)


def _cmd_import(args: argparse.Namespace) -> int:
    from provplug.ingest.importer import import_provenance
    from provplug.store.open import open_store

    with Progress(enabled=not args.quiet) as progress:  # closed (a failed stage crossed) before the summary
        result = import_provenance(
            open_store(args.store),
            args.triples,
            args.values,
            progress=progress,
            row_lineage=args.row_lineage,
            row_rules=args.row_rules,
        )
    if args.json:
        print_json(result)
    else:
        print(f"imported {result['triples']:,} triples into {args.store} (run {result['run_id']})")
    return 0
