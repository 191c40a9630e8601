"""``provplug run``: run an unmodified PySpark script with its writes captured
(see :mod:`provplug.ingest.scripts`). Nothing heavy is imported until it runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run an unmodified PySpark script, capturing every DataFrame write as a step",
        description="Runs SCRIPT like `python SCRIPT ARGS` and captures each DataFrame write it makes as a "
        "step (op write:NAME, output table NAME: the written table, or a readable name of its path, see "
        "docs/capture-semantics.md) into STORE. The run commits when the script exits with status 0; otherwise the "
        "store is left as it was and provplug exits with the script's status. provplug's options go before "
        "SCRIPT (between STORE and SCRIPT, or before STORE); everything after SCRIPT is the script's.",
        epilog="Deprecated form, still accepted: provplug run --store STORE SCRIPT [ARGS].",
    )
    p.add_argument("store", metavar="STORE", help="store directory or URI (created if missing)")
    p.add_argument(
        "--store",
        dest="store_option",
        metavar="STORE",
        help="deprecated: the store as an option (provplug run --store STORE SCRIPT [ARGS])",
    )
    p.add_argument("--no-rows", action="store_true", help="keep only value ids, not the rows of the tables")
    p.add_argument(
        "--reduce",
        action="append",
        metavar="SPEC",
        default=[],
        help="keep provenance for some rows of a source only: TABLE=TECHNIQUE:key=value,... "
        "(e.g. flights=sample:ratio=0.33,seed=1; repeatable). Production mode: every row is "
        "computed, only the kept rows' triples are stored",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail the run (and the script, before its write) on a step provplug cannot capture cell by cell, "
        "instead of storing it as a coarse step",
    )
    p.add_argument(
        "--index",
        choices=("auto", "always"),
        help="index the run as it commits: auto (when it is small, see PROVPLUG_AUTO_INDEX_TRIPLES) or always",
    )
    p.add_argument("--label", metavar="LABEL", help="name the run (see `provplug runs`; --run LABEL picks it)")
    p.add_argument("--tag", action="append", default=[], metavar="TAG", help="tag the run (repeatable)")
    p.add_argument(
        "script_line",
        nargs=argparse.REMAINDER,
        action=_ScriptLine,
        metavar="SCRIPT [ARGS]",
        help="the PySpark script to run and its own arguments",
    )
    p.set_defaults(func=_cmd_run)


class _ScriptLine(argparse.Action):
    """What follows STORE: provplug's own options, if any, then SCRIPT and
    the script's arguments. (argparse hands a REMAINDER everything after the
    first positional, options included, so those options are parsed here.)"""

    _reparsing = False

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        line = list(values)
        if self._reparsing:  # SCRIPT is in namespace.store; these are its arguments
            setattr(namespace, self.dest, line)
            return
        if namespace.store_option is None and line[:1] != ["--"] and line and line[0].startswith("-"):
            line = self._options_then_script(parser, namespace, line)
        line = line[1:] if line[:1] == ["--"] else line
        if namespace.store_option is None and not line:
            parser.error("SCRIPT is missing: provplug run STORE SCRIPT [ARGS]")
        setattr(namespace, self.dest, line)

    def _options_then_script(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, line: list[str]
    ) -> list[str]:
        """Parse ``OPTIONS SCRIPT ARGS`` into ``namespace``; return ``[SCRIPT, *ARGS]``."""
        store = namespace.store
        self._reparsing = True
        try:
            parser.parse_args(line, namespace)  # the first positional, SCRIPT, lands in store
        finally:
            self._reparsing = False
        if namespace.store_option is not None:
            parser.error("give the store once: provplug run STORE SCRIPT [ARGS]")
        script, namespace.store = namespace.store, store
        return [script, *getattr(namespace, self.dest)]


def _store_script_args(args: argparse.Namespace) -> tuple[str, str, list[str]]:
    """STORE, SCRIPT and the script's arguments, from ``run STORE SCRIPT
    ARGS`` or the deprecated ``run --store STORE SCRIPT ARGS`` (where the
    first positional is the script; accepted without a word, so that
    scripts written for it keep their output)."""
    if args.store_option is not None:
        return args.store_option, args.store, list(args.script_line)
    return args.store, args.script_line[0], list(args.script_line[1:])


def _cmd_run(args: argparse.Namespace) -> int:
    from provplug.cli.output import note
    from provplug.ingest.capture import run_summary
    from provplug.ingest.scripts import run_script
    from provplug.reduce.spec import parse_specs

    store, script, script_args = _store_script_args(args)
    reduce = parse_specs(args.reduce)  # a malformed spec fails before the script runs
    status, run = run_script(
        script,
        script_args,
        store,
        store_rows=not args.no_rows,
        reduce=reduce,
        label=args.label,
        tags=args.tag,
        strict=args.strict,
        index=args.index,
    )
    if status != 0:
        print(f"provplug: the script exited with status {status}; nothing captured", file=sys.stderr)
    elif run is None:
        print("provplug: the script wrote no DataFrame; nothing captured", file=sys.stderr)
    else:
        note(args, f"provplug: {run_summary(run)}")
    return status
