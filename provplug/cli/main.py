"""The ``provplug`` command line."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, NoReturn

from provplug.errors import LineageQueryError, ProvplugError
from provplug.errors import UsageError as UsageError
from provplug.progress import Progress, handler_attached, silenced

Command = Callable[[argparse.Namespace], int]

COMMAND_MODULES = ("provplug.cli.index", "provplug.cli.lineage", "provplug.cli.demo", "provplug.cli.explore", "provplug.cli.graph", "provplug.cli.share", "provplug.cli.run", "provplug.cli.metrics", "provplug.cli.depends", "provplug.cli.whatif", "provplug.cli.ui")


def _cmd_plugins(args: argparse.Namespace) -> int:
    from provplug.plugin.manager import get_plugins

    rows = get_plugins().describe()
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        print(f"{row['name']:<28} {row['distribution']:<28} {row['hooks']}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from provplug.ingest.importer import import_provenance
    from provplug.store.open import open_store

    with Progress(enabled=not args.quiet) as progress:  # closed (a failed stage crossed) before the summary
        result = import_provenance(
            open_store(args.store), args.triples, args.values, progress=progress,
            row_lineage=args.row_lineage, row_rules=args.row_rules,
        )
    if args.json:
        print_json(result)
    else:
        print(f"imported {result['triples']:,} triples into {args.store} (run {result['run_id']})")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from provplug.explore.browse import store_stats
    from provplug.store.open import open_store

    stats = store_stats(open_store(args.store))
    if args.json:
        print_json(stats)
    else:
        for key, value in stats.items():
            print(f"{key:<18} {_plain(key, value)}".rstrip())
    return 0


STATS_INDENT = " " * 19  # under the values of `provplug stats`: past the 18-wide key and a space


def _plain(key: str, value: object) -> str:
    """One stats value as text: counts with thousands separators, yes/no,
    the index splits one per line, a list of records (``per_split``,
    ``reduced_runs``) as a table under the key; never JSON."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if key == "splits" and isinstance(value, list):
        return f"\n{STATS_INDENT}".join(_split_text(split) for split in value) or "none"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "\n" + _indented(_record_table(value), "  ")
    return _scalar_text(value)


def _split_text(split: object) -> str:
    """One index split: its tables by name, sub-splits in parentheses
    separated by ``|`` (``[["A"], [["B"], ["C"]]]`` is ``A`` and ``(B) | (C)``)."""
    if not isinstance(split, list):
        return str(split)
    if all(isinstance(part, list) for part in split):
        return " | ".join(f"({_split_text(part)})" for part in split)
    return ", ".join(_split_text(part) for part in split)


def _record_table(records: list[dict[str, Any]]) -> str:
    from provplug.texttable import aligned

    headers = list(dict.fromkeys(k for record in records for k in record))
    rows = [[_scalar_text(record.get(h)) for h in headers] for record in records]
    numeric = [all(isinstance(r.get(h), int) and not isinstance(r.get(h), bool) for r in records) for h in headers]
    return aligned([h.upper() for h in headers], rows, numeric)


def _scalar_text(value: object) -> str:
    """A value in a text table: numbers with separators, lists joined by
    commas, mappings as ``key=value`` pairs, nothing as ``-``."""
    from provplug.texttable import cell_text

    if isinstance(value, dict):
        return ", ".join(f"{k}={_scalar_text(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_scalar_text(v) for v in value) or "none"
    return cell_text(value)


def _indented(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


# -- the convention every command shares (docs/cli.md) ---------------------------------


def print_json(data: object) -> None:
    """Print ``data`` as every ``--json`` output is printed: :func:`json_text`."""
    print(json_text(data))


def json_text(data: object) -> str:
    """``data`` as the one JSON layout of the command line: valid JSON (NaN
    and infinities as null) with a record per line. A top-level list has an
    item per line; a top-level object has a member per line, and a member
    that is a list or object has an item per line, indented two more
    spaces. Anything deeper stays compact on its line: greppable, and a
    large answer is not mostly indentation."""
    from provplug.query.answer import finite

    return _json_lines(finite(data), 0, 2 if isinstance(data, dict) else 1)


def _json_lines(value: object, depth: int, levels: int) -> str:
    """``value`` with its items on lines of their own for ``levels`` levels."""
    if levels == 0 or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, allow_nan=False)
    pad = "  " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(str(k))}: {_json_lines(v, depth + 1, levels - 1)}" for k, v in value.items()]
        opening, closing = "{", "}"
    else:
        items = [pad + _json_lines(v, depth + 1, levels - 1) for v in value]
        opening, closing = "[", "]"
    return opening + "\n" + ",\n".join(items) + "\n" + "  " * depth + closing


def combined_where(predicates: Sequence[str] | None) -> str | None:
    """Repeated ``--where`` predicates as one: each in parentheses, joined
    with AND (one predicate stays as written, so errors quote it as given).
    A predicate whose parentheses do not pair up could reach across the
    join (``a) OR (b``), so it is refused."""
    if not predicates:
        return None
    if len(predicates) == 1:
        return predicates[0]
    for predicate in predicates:
        _check_parentheses(predicate)
    return " AND ".join(f"({_line_comment_ended(predicate)})" for predicate in predicates)


def _line_comment_ended(predicate: str) -> str:
    """``predicate``, with a line break after it if it may end in a ``--``
    comment (which would otherwise swallow the closing parenthesis)."""
    return f"{predicate}\n" if "--" in predicate else predicate


def _check_parentheses(predicate: str) -> None:
    """Refuse ``predicate`` unless its parentheses pair up outside quoted
    strings and comments, and its strings and block comments close."""
    depth, i, closed = 0, 0, True
    while i < len(predicate) and closed and depth >= 0:
        char, pair = predicate[i], predicate[i : i + 2]
        if char in "'\"":  # a doubled quote inside a string scans as two strings back to back
            end = predicate.find(char, i + 1)
            closed, i = end >= 0, end
        elif pair == "--":  # a line comment: to the end of the line (the join adds one)
            end = predicate.find("\n", i)
            i = len(predicate) if end < 0 else end
        elif pair == "/*":
            end = predicate.find("*/", i + 2)
            closed, i = end >= 0, end + 1
        elif char in "()":
            depth += 1 if char == "(" else -1
        i += 1
    if depth != 0 or not closed:
        raise LineageQueryError(
            f"--where {predicate!r}: its parentheses, quotes or comments do not close, so it cannot be "
            "joined with the other --where predicates (they are combined with AND)"
        )


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
        epilog="Every command takes STORE first, --quiet and --verbose; see docs/cli.md. "
        "Errors are one line on stderr, exit code 2; with --json that line is a JSON object "
        '{"error": MESSAGE, "type": KIND}. Output into a closed pipe (`| head`) stops quietly, exit code 141.',
    )
    parser.add_argument("--version", action=_Version, help="print the installed provplug version and exit")
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
    p.add_argument("--row-rules", metavar="FILE", help="JSON list of the row rules of each op (see provplug.ingest.importer)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_import)

    p = sub.add_parser("stats", help="counts of runs, tables, ops, values, triples (and index sizes)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_stats)

    # Commands owned by their packages: each module adds its own sub-parser.
    for module in COMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    for command in sub.choices.values():
        _add_common_options(command)
    return parser


STORE_HELP = "the store: a directory or URI"


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    """--quiet and --verbose, on every command (added here, once, after the
    commands' own options; one a command already has is left to it), and
    the same help for every STORE that has none of its own."""
    for action in parser._actions:
        if action.metavar == "STORE" and not action.help:
            action.help = STORE_HELP
    taken = parser._option_string_actions  # argparse keeps no public list of option strings
    group = parser.add_argument_group("common options").add_mutually_exclusive_group()
    if "--quiet" not in taken:
        group.add_argument("--quiet", action="store_true",
                           help="no progress display and no notes on stderr (results and errors still print)")
    if "--verbose" not in taken:
        group.add_argument("--verbose", action="store_true",
                           help="also log what provplug does (INFO messages of the provplug.* loggers) to stderr")


class _Version(argparse.Action):
    """``--version``: the installed distribution's version (read only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from importlib.metadata import version

        print(f"provplug {version('provplug')}")
        parser.exit()


CLOSED_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer stopped by `| head`


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = _wants_json(argv)  # until the line is parsed: a usage error reports in the format asked for
    try:
        args = build_parser().parse_args(argv)
        # Parsed: only the command's own options count (a script's `--json` under `run` does not).
        as_json = bool(getattr(args, "json", False)) or getattr(args, "format", None) == "json"
        with _logging_for(args), (silenced() if getattr(args, "quiet", False) else nullcontext()):
            status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below, not at exit
        return status
    except BrokenPipeError:
        return _closed_pipe()
    except SystemExit as exc:  # argparse's --help/--version: printed into stdout's buffer, now flushed
        return _exit_after_flush(exc)
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


@contextmanager
def _logging_for(args: argparse.Namespace) -> Iterator[None]:
    """With --verbose, the provplug.* loggers' INFO messages on stderr while
    the command runs (the handler goes again: main may run many times in one
    process)."""
    if not getattr(args, "verbose", False):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("provplug: %(name)s: %(message)s"))
    with handler_attached(logging.getLogger("provplug"), handler):
        yield


def _exit_after_flush(exc: SystemExit) -> int:
    """argparse exits after printing help or the version; flush here, where a
    closed pipe can still be told apart (quietly), not at interpreter exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _closed_pipe()
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)  # what the interpreter does with sys.exit("message")
    return 1


def _closed_pipe() -> int:
    """Whoever read standard output has gone (``provplug ... | head``): stop
    without a word. What is still buffered goes to /dev/null, or the
    interpreter's last flush at exit would fail on the closed pipe again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError):  # io.UnsupportedOperation is a ValueError: stdout is captured, no fd
        return CLOSED_PIPE
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return CLOSED_PIPE


def note(args: argparse.Namespace, text: str) -> None:
    """An informational line on stderr (what was written, what to run next),
    left out under --quiet."""
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr)


def _fail(prefix: str, message: str, kind: str, as_json: bool, code: int = 2) -> int:
    """Report an error on stderr: one line ``PREFIX MESSAGE``, or with
    ``--json`` one JSON object ``{"error": MESSAGE, "type": KIND}``."""
    print(json.dumps({"error": message, "type": kind}) if as_json else f"{prefix} {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
