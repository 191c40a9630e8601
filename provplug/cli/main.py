"""The ``provplug`` command line: parsing and dispatch. Each command is a
module of :data:`COMMAND_MODULES`; how answers are printed is
:mod:`provplug.cli.output`."""

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

from provplug.errors import ProvplugError
from provplug.errors import UsageError as UsageError
from provplug.progress import handler_attached, silenced

Command = Callable[[argparse.Namespace], int]

# One module per command, in the order ``provplug --help`` lists them; each adds its own sub-parser.
COMMAND_MODULES = (
    "provplug.cli.plugins",
    "provplug.cli.import_",
    "provplug.cli.stats",
    "provplug.cli.index",
    "provplug.cli.lineage",
    "provplug.cli.demo",
    "provplug.cli.runs",
    "provplug.cli.tables",
    "provplug.cli.show",
    "provplug.cli.delete_run",
    "provplug.cli.gc",
    "provplug.cli.graph",
    "provplug.cli.export",
    "provplug.cli.diff",
    "provplug.cli.run",
    "provplug.cli.metrics",
    "provplug.cli.depends",
    "provplug.cli.whatif",
    "provplug.cli.ui",
)


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
        group.add_argument(
            "--quiet",
            action="store_true",
            help="no progress display and no notes on stderr (results and errors still print)",
        )
    if "--verbose" not in taken:
        group.add_argument(
            "--verbose",
            action="store_true",
            help="also log what provplug does (INFO messages of the provplug.* loggers) to stderr",
        )


class _Version(argparse.Action):
    """``--version``: the installed distribution's version (read only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
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
        with _logging_for(args), silenced() if getattr(args, "quiet", False) else nullcontext():
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


def _fail(prefix: str, message: str, kind: str, as_json: bool, code: int = 2) -> int:
    """Report an error on stderr: one line ``PREFIX MESSAGE``, or with
    ``--json`` one JSON object ``{"error": MESSAGE, "type": KIND}``."""
    print(json.dumps({"error": message, "type": kind}) if as_json else f"{prefix} {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
