"""``provplug metrics FULL_STORE REDUCED_STORE [T ...]``: the three metrics of
paper 001 for a reduced run against a full one (see
:mod:`provplug.reduce.metrics`). Nothing heavy is imported until it runs."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "metrics",
        help="compare a reduced run with a full one: size, full/partial/no provenance, PPM",
        description="Metric 1 (triples and bytes of each run), Metric 2 (result rows and cells with full, "
        "partial and no provenance) and Metric 3 (the partial provenance metric, PPM) of paper 001, per output "
        "table. prov(t) of a result row is the set of source rows among the ancestors of its cells; rows of "
        "the two runs are matched by their key columns (--key; default: the non-floating-point columns). "
        "A full-run row without a match has no provenance.",
    )
    p.add_argument("full", metavar="FULL_STORE", help="the store of the run with full provenance")
    p.add_argument("reduced", metavar="REDUCED_STORE", help="the store of the reduced run (may be FULL_STORE)")
    p.add_argument("tables", nargs="*", metavar="T", help="output tables (default: every output of the full run)")
    p.add_argument(
        "--run-full",
        metavar="RUN",
        help="run of FULL_STORE: a number, latest~N, a label or an id prefix (default: its latest capture)",
    )
    p.add_argument(
        "--run-reduced", metavar="RUN", help="run of REDUCED_STORE (the same forms; default: its latest capture)"
    )
    p.add_argument("--key", action="append", metavar="COLUMN", help="a column rows are matched by (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_metrics)


def _cmd_metrics(args: argparse.Namespace) -> int:
    from provplug.cli.output import Printed, print_answer
    from provplug.reduce.metrics import compare, render
    from provplug.store.open import open_store

    full = open_store(args.full)
    full.check()
    reduced = open_store(args.reduced)
    reduced.check()
    result = compare(full, reduced, args.tables, run_full=args.run_full, run_reduced=args.run_reduced, keys=args.key)
    lines = [
        _say_run(result["full"], full, "full", args.run_full),
        _say_run(result["reduced"], reduced, "reduced", args.run_reduced),
    ]
    print_answer(Printed(result, lambda: "\n".join([*lines, render(result)])), args.json)
    return 0


def _say_run(side: dict[str, Any], store: Any, name: str, given: str | None) -> str:
    """Add ``run_number``/``run_label``/``run_of`` (its store's captures) to one
    side of the metrics; the line naming that run."""
    manifests = store.runs()
    used = next(m for m in manifests if m["run_id"] == side["run"])
    captures = sum(1 for m in manifests if m.get("kind") == "capture")
    side.update(run_number=used["number"], run_label=used.get("label"), run_of=captures)
    label = f" (label {used['label']})" if used.get("label") else ""
    how = "chosen with --run-" + name if given is not None else f"the latest of {captures} captures"
    return f"{name}: run {used['number']}{label}, {how}"
