"""``provplug runs STORE``: the committed runs by number."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import emit
from provplug.cli.stores import opened, store_and_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "runs",
        help="list the committed runs (captures and imports) by number: label, entry point, "
        "git commit, status, start time, counts",
    )
    store_and_json(p)
    p.set_defaults(func=_cmd_runs)


def _cmd_runs(args: argparse.Namespace) -> int:
    from provplug.explore.browse import render_runs, run_records

    runs = run_records(opened(args.store))
    return emit(args, runs, render_runs(runs))
