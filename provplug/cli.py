"""The ``provplug`` command line."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .errors import ProvplugError
from .progress import Progress

Command = Callable[[argparse.Namespace], int]

COMMAND_MODULES = ("provplug.index.cli", "provplug.query.cli", "provplug.demo", "provplug.explore.cli", "provplug.graph", "provplug.share", "provplug.runscript", "provplug.reduce.cli", "provplug.query.depends_cli", "provplug.whatif.cli", "provplug.ui.cli")


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
    from .plugins import open_store

    result = import_provenance(
        open_store(args.store), args.triples, args.values, progress=Progress(enabled=not args.quiet),
        row_lineage=args.row_lineage, row_rules=args.row_rules,
    )
    print(f"imported {result['triples']:,} triples into {args.store} (run {result['run_id']})")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from .explore.browse import store_stats
    from .plugins import open_store

    stats = store_stats(open_store(args.store))
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


def whole_number(minimum: int, unit: str) -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``minimum`` (else a usage error)."""
    kind = "positive" if minimum == 1 else "non-negative" if minimum == 0 else f">= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a {kind} number of {unit}, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a {kind} number of {unit}, not {value}")
        return value

    return parse


class UsageError(ProvplugError):
    """A malformed command line (what argparse would print and exit on)."""

    def __init__(self, message: str, parser: argparse.ArgumentParser) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """Raises usage errors instead of printing them, so that :func:`main`
    reports them in the output format asked for (``--json``)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self)


class _CommandParser(_Parser):
    """A command's parser: options and positionals in any order, so that
    ``lineage STORE --run R T.C`` finds ``T.C`` (plain argparse fills an
    optional positional before the first option, then rejects the rest).
    A command that passes the rest of its line on (``run script.py ARGS``)
    is parsed plainly."""

    _mixing = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        passes_rest_on = any(a.nargs in (argparse.REMAINDER, argparse.PARSER) for a in self._actions)
        if self._mixing or passes_rest_on:  # the intermixed parse calls back here for its plain passes
            return super().parse_known_args(args, namespace)
        self._mixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False


def _wants_json(argv: list[str]) -> bool:
    """Whether errors should be JSON: ``--json`` or ``--format json`` before any ``--``."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    pairs = zip(options, [*options[1:], ""], strict=True)
    return "--json" in options or "--format=json" in options or ("--format", "json") in pairs


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="provplug",
        description="Attribute-level provenance for PySpark and Beam pipelines, with fast lineage queries.",
        epilog="Errors are one line on stderr, exit code 2; with --json that line is a JSON object "
        '{"error": MESSAGE, "type": KIND}.',
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser)

    p = sub.add_parser("plugins", help="list loaded plugins and the distribution providing each")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_plugins)

    p = sub.add_parser("import", help="import provenance triples captured by another system")
    p.add_argument("store", metavar="STORE", help="store directory or URI (created if missing)")
    p.add_argument("--triples", required=True, metavar="FILE", help="Parquet or CSV with src, dst, op")
    p.add_argument("--values", metavar="FILE", help="Parquet or CSV with value_id, table[, column][, row]")
    p.add_argument("--row-lineage", metavar="FILE",
                   help="Parquet or CSV with op, out_table, out_row[, member], in_table, in_row[, optional] "
                   "(what-if and depends follow it; needs --row-rules)")
    p.add_argument("--row-rules", metavar="FILE", help="JSON list of the row rules of each op (see provplug.importer)")
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
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = _wants_json(argv)  # until the line is parsed: a usage error reports in the format asked for
    try:
        args = build_parser().parse_args(argv)
        # Parsed: only the command's own options count (a script's `--json` under `run` does not).
        as_json = bool(getattr(args, "json", False)) or getattr(args, "format", None) == "json"
        return int(args.func(args))
    except UsageError as exc:
        if not as_json:
            exc.parser.print_usage(sys.stderr)
        return _fail(f"{exc.parser.prog}: error:", str(exc), "UsageError", as_json)
    except ProvplugError as exc:
        return _fail("provplug: error:", str(exc), type(exc).__name__, as_json)
    except OSError as exc:
        message = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
        return _fail("provplug: error:", message, type(exc).__name__, as_json)
    except KeyboardInterrupt:
        return _fail("provplug:", "interrupted; the store is unchanged", "KeyboardInterrupt", as_json, code=130)


def _fail(prefix: str, message: str, kind: str, as_json: bool, code: int = 2) -> int:
    """Report an error on stderr: one line ``PREFIX MESSAGE``, or with
    ``--json`` one JSON object ``{"error": MESSAGE, "type": KIND}``."""
    print(json.dumps({"error": message, "type": kind}) if as_json else f"{prefix} {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
