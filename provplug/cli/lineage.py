"""``provplug lineage``: ancestors or descendants of a value, with their rows."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from provplug.errors import LineageQueryError
from provplug.query.targets import TARGET_HELP, parse_target

if TYPE_CHECKING:
    from provplug.query.answer import LineageAnswer

FORMATS = ("text", "json", "svg", "html")


def add_parser(sub: Any) -> None:
    from provplug.cli.output import whole_number

    p = sub.add_parser(
        "lineage",
        help="ancestors (or descendants) of a value, with their rows",
        description="Trace a value's lineage. Give TABLE.COLUMN with --where, or --value-id.",
        epilog="With --json the answer is one JSON object on stdout (NaN and infinities as null; each "
        "stored row once, in rows, cells naming it by key); "
        'an error is one JSON object {"error": MESSAGE, "type": KIND} on stderr, exit code 2.',
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument("target", metavar="TABLE.COLUMN", nargs="?", help=TARGET_HELP)
    p.add_argument(
        "--where",
        metavar="PREDICATE",
        action="append",
        help="an SQL boolean expression over TABLE's columns selecting its rows, e.g. \"City = 'NY'\" "
        "(repeatable: the rows where all hold)",
    )
    p.add_argument("--value-id", metavar="N", type=int, action="append", help="a value id (repeatable)")
    p.add_argument(
        "--direction", choices=("up", "down"), default="up", help="up: ancestors (default); down: descendants"
    )
    p.add_argument("--method", default="auto", help="auto (default), csprov, ccprov, rq, or a plugin's method")
    p.add_argument(
        "--tau",
        type=whole_number(0, "triples"),
        metavar="TRIPLES",
        help="recurse on the driver below this many triples, on Spark above (0: always Spark); "
        "default: on the driver whenever the query's triples fit its memory "
        "(half the available memory, or PROVPLUG_QUERY_DRIVER_MB)",
    )
    p.add_argument(
        "--run",
        metavar="RUN",
        help="query the tables of run RUN: a number, latest, latest~N, a label "
        "or an id prefix (default: the latest run that wrote the table)",
    )
    p.add_argument(
        "--subgraph",
        action="store_true",
        help="ancestors, descendants and the other parents of each descendant, as one answer",
    )
    zoom = p.add_argument_group("modules (a view: stored triples never change)")
    zoom.add_argument(
        "--zoom-out",
        metavar="MODULE",
        action="append",
        default=[],
        help="see MODULE as one step: its intermediate tables vanish, its outputs link to its "
        "inputs (repeatable; * = every module)",
    )
    zoom.add_argument(
        "--zoom-in",
        metavar="MODULE",
        action="append",
        default=[],
        help="see MODULE's steps again (undoes --zoom-out MODULE, or one module of --zoom-out '*')",
    )
    view = p.add_argument_group("what to show (applied in this order)")
    view.add_argument(
        "--depth",
        type=whole_number(0, "triples"),
        metavar="N",
        help="only the lineage within N triples of the queried values",
    )
    view.add_argument(
        "--sources-only",
        action="store_true",
        help="only the lineage's ends: the source cells (with --direction down: the final cells)",
    )
    view.add_argument(
        "--summary", action="store_true", help="counts per table, column and op, and the source rows once each"
    )
    out = p.add_argument_group("output")
    out.add_argument(
        "--format", choices=FORMATS, help="text (default), json, svg, html (svg/html need provplug[export])"
    )
    out.add_argument("--json", action="store_true", help="the answer as JSON (same as --format json)")
    out.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    out.add_argument(
        "--max-cells",
        type=whole_number(1, "cells"),
        metavar="N",
        help="svg/html: summarise (a box per table column) above N cells (default 2000)",
    )
    p.set_defaults(func=_cmd_lineage)


def _cmd_lineage(args: argparse.Namespace) -> int:
    from provplug.api import open as open_store
    from provplug.cli.output import combined_where, write_output

    if args.target is None and args.value_id is None:
        raise LineageQueryError("nothing to trace: give TABLE.COLUMN (with --where) or --value-id N")
    if args.target is not None and args.value_id is not None:
        raise LineageQueryError("give TABLE.COLUMN (with --where) or --value-id N, not both")
    if args.where is not None and args.target is None:
        raise LineageQueryError("--where needs TABLE.COLUMN")
    query: dict[str, Any] = {"method": args.method, "direction": args.direction, "tau": args.tau}
    if args.target is not None:
        table, column = parse_target(args.target)
        query.update(table=table, column=column, where=combined_where(args.where))
    else:
        query.update(value_id=args.value_id)
    if args.run is not None:
        query["run"] = args.run  # only when given: run selection is newer than the other parameters
    if args.subgraph:
        query["subgraph"] = True
    store = open_store(args.store)
    answer = store.lineage(**query)
    _say_run(store, answer, given=args.run is not None)
    if args.zoom_out:
        answer = store.zoom_in(store.zoom_out(answer, args.zoom_out), args.zoom_in)
    write_output(shown(answer, args, output_format(args)), args.output, quiet=args.quiet)
    return 0


def _say_run(store: Any, answer: LineageAnswer, given: bool) -> None:
    """Name the run the answer used (and how many others wrote its table),
    unless the answer names it already."""
    from provplug.query.catalog import catalog_for

    if "run" not in answer.stats:
        run = catalog_for(store.store).run_of_values((q["value_id"] for q in answer.query), given)
        if run is not None:
            answer.stats["run"] = run


def output_format(args: argparse.Namespace) -> str:
    if args.json and args.format not in (None, "json"):
        raise LineageQueryError(f"--json and --format {args.format} disagree: give one")
    return "json" if args.json else args.format or "text"


def shown(answer: LineageAnswer, args: argparse.Namespace, fmt: str) -> str:
    """The text to print: the answer narrowed by --depth, --sources-only,
    then as a summary or whole, in ``fmt``."""
    from provplug.cli.output import answer_text

    if args.depth is not None:
        answer = answer.within_depth(args.depth)
    if args.sources_only:
        answer = answer.sources_only()
    return answer_text(_Shown(answer, summarise=args.summary), fmt, args.max_cells)


class _Shown:
    """A lineage answer as the command prints it: whole (a box per cell in a
    picture), or with ``--summary`` its counts per table, column and op and
    its source rows once each (a box per table column)."""

    def __init__(self, answer: LineageAnswer, summarise: bool) -> None:
        self.answer, self.summarise = answer, summarise

    def to_dict(self) -> dict[str, Any]:
        return self.answer.summary() if self.summarise else self.answer.to_dict()

    def render(self) -> str:
        return self.answer.render_summary() if self.summarise else self.answer.render()

    def picture(self, fmt: str, max_cells: int | None = None) -> str:
        from provplug.query.picture import DEFAULT_MAX_CELLS, answer_picture

        return answer_picture(self.answer, fmt, max_cells or DEFAULT_MAX_CELLS, summarise=self.summarise)
