"""The ``provplug`` command line."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence

from .errors import ProvplugError
from .progress import Progress

Command = Callable[[argparse.Namespace], int]

COMMAND_MODULES = ("provplug.index.cli", "provplug.query.cli", "provplug.demo")


def _cmd_plugins(args: argparse.Namespace) -> int:
    from .plugins import get_plugins

    rows = get_plugins().describe()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        print(f"{row['name']:<28} {row['distribution']:<28} {row['hooks']}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from .importer import import_provenance
    from .store import open_store

    result = import_provenance(
        open_store(args.store), args.triples, args.values, progress=Progress(enabled=not args.quiet)
    )
    print(f"imported {result['triples']:,} triples into {args.store} (run {result['run_id']})")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from .store import open_store

    from .index.stats import index_stats

    store = open_store(args.store)
    stats: dict[str, object] = {**store.stats(), **index_stats(store)}
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        for key, value in stats.items():
            print(f"{key:<18} {_plain(value)}")
    return 0


def _plain(value: object) -> str:
    """One stats value as text: counts with thousands separators, rows of a
    list (such as ``per_split``) on lines of their own."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "".join("\n  " + json.dumps(v) for v in value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="provplug",
        description="Attribute-level provenance for PySpark and Beam pipelines, with fast lineage queries.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plugins", help="list loaded plugins and the distribution providing each")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_plugins)

    p = sub.add_parser("import", help="import provenance triples captured by another system")
    p.add_argument("store", metavar="STORE", help="store directory or URI (created if missing)")
    p.add_argument("--triples", required=True, metavar="FILE", help="Parquet or CSV with src, dst, op")
    p.add_argument("--values", metavar="FILE", help="Parquet or CSV with value_id, table[, column]")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd_import)

    p = sub.add_parser("stats", help="counts of runs, tables, ops, values, triples (and index sizes)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_stats)

    # Commands owned by their packages: each module adds its own sub-parser.
    for module in COMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ProvplugError as exc:
        print(f"provplug: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"provplug: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("provplug: interrupted; the store is unchanged", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
