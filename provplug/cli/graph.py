"""``provplug graph STORE``: the inferred workflow graph ``G_wf`` of a store
(:mod:`provplug.explore.graph`) as a picture or text; ``--run`` draws one run."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from provplug.explore.graph import FORMATS, LEGEND, as_graph, as_text, workflow_of

if TYPE_CHECKING:
    from provplug.plugin.protocols import Store


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "graph",
        help="the inferred workflow graph: tables with row counts, ops with triple counts",
        description="Draw the store's workflow graph (G_wf, inferred from the ops and triples).",
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument(
        "--run",
        metavar="RUN",
        help="only the tables and ops of run RUN (a number, latest, latest~N, "
        "a label or an id prefix; default: every run)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), svg, html or dot (svg/html need provplug[export])",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    p.set_defaults(func=_cmd_graph)


def _run_chosen(store: Store, run: str | None) -> str | None:
    """``run 2 (label L) of 3 runs``: the run --run drew, as the graph names it."""
    if run is None:
        return None
    from provplug.store.runs import select_run

    runs = store.runs()
    chosen = select_run(runs, run)
    label = f" (label {chosen['label']})" if chosen.get("label") else ""
    return f"run {chosen['number']}{label} of {len(runs)} run{'s' if len(runs) != 1 else ''}"


def _cmd_graph(args: argparse.Namespace) -> int:
    from provplug.cli.output import write_output
    from provplug.query.picture import render
    from provplug.store.open import open_store

    store = open_store(args.store)
    store.check()
    wf = workflow_of(store, args.run)
    chosen = _run_chosen(store, args.run)
    if args.format == "text":
        text = as_text(wf) if chosen is None else f"{chosen}\n{as_text(wf)}"
    else:
        title = f"Workflow of {args.store}" + (f", {chosen}" if chosen else "")
        text = render(as_graph(wf, title), args.format, title, LEGEND)
    write_output(text, args.output, quiet=args.quiet)
    return 0
