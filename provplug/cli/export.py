"""``provplug export STORE [--run R] [T.C --where P | --value-id N] --format F``:
a run, the store or a lineage answer in a registered export format
(:mod:`provplug.export`; a plugin adds one through
``provplug_register_export_formats``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from provplug.errors import LineageQueryError


class _FormatOption(argparse.Action):
    """``--format FORMAT``: its choices and their help are the registered
    export formats. They are read when asked for (``--help``, parsing a
    format), not when the parser is built: reading the registry loads the
    plugins, which every other command's start-up must not pay for."""

    @property
    def choices(self) -> list[str]:
        from provplug.export import format_names

        return format_names()

    @choices.setter
    def choices(self, value: object) -> None:
        """Ignored: the choices are always the registry's."""

    @property
    def help(self) -> str:
        from provplug.plugin.manager import get_plugins

        formats = get_plugins().export_formats().values()
        return "; ".join(f"{f.name}: {f.description}" for f in formats)

    @help.setter
    def help(self, value: object) -> None:
        """Ignored: the help is always the registry's."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)


def add_parser(sub: Any) -> None:
    from provplug.query.targets import TARGET_HELP

    p: argparse.ArgumentParser = sub.add_parser(
        "export",
        help="export a run, the store or a lineage answer as W3C PROV or OpenLineage",
        description="Without a target: the whole run (--run) or store. With TABLE.COLUMN --where P or "
        "--value-id N: that lineage answer. PROV lists every value only for runs of at most 100,000 values.",
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument(
        "target", metavar="TABLE.COLUMN", nargs="?", help=f"export the lineage of these cells. {TARGET_HELP}"
    )
    p.add_argument(
        "--where",
        metavar="PREDICATE",
        action="append",
        help="an SQL boolean expression over TABLE's columns (repeatable: the rows where all hold)",
    )
    p.add_argument(
        "--value-id", metavar="N", type=int, action="append", help="export this value's lineage (repeatable)"
    )
    p.add_argument(
        "--run",
        metavar="RUN",
        help="one run (a number, latest, latest~N, a label or an id prefix); "
        "default: the whole store, or for TABLE the latest run that wrote it",
    )
    p.add_argument(
        "--direction", choices=("up", "down"), default="up", help="with a target: ancestors (default) or descendants"
    )
    p.add_argument("--format", required=True, metavar="FORMAT", action=_FormatOption)
    p.add_argument("--namespace", help="OpenLineage namespace (default: provplug:// and the store's path)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (whole, or not at all) instead of stdout")
    p.set_defaults(func=_cmd_export)


def _cmd_export(args: argparse.Namespace) -> int:
    from provplug.cli.output import combined_where, note, write_whole
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
    document = export(store, args.format, run=args.run, target=target, namespace=args.namespace)
    if target is not None and target.table is not None:
        _say_run(store, target.table, args.run)
    # A text document ends with a line break, as printed text does; bytes are written as they are.
    data = document + "\n" if isinstance(document, str) else document
    if args.output is None:
        _print_document(data)
    else:
        write_whole(args.output, data)
        note(args, f"wrote {args.output} ({len(data.encode() if isinstance(data, str) else data):,} bytes)")
    return 0


def _print_document(data: str | bytes) -> None:
    if isinstance(data, str):
        sys.stdout.write(data)
    else:
        sys.stdout.flush()  # text printed before must come first
        sys.stdout.buffer.write(data)


def _say_run(store: Any, table: str, run: str | None) -> None:
    """On stderr (stdout is the document): the run whose TABLE was exported, when there was one to choose."""
    from provplug.query.catalog import catalog_for
    from provplug.store.runs import run_note

    note = run_note(catalog_for(store).table_choice(table, run)[1])
    if note:
        print(f"provplug: {note}", file=sys.stderr)
