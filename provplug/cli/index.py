"""``provplug index STORE [--theta N] [--splits FILE] [--local|--spark|--engine E] [--memory-budget SIZE] [--full]``."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    from provplug.cli.output import whole_number
    from provplug.index import DEFAULT_THETA

    p = sub.add_parser("index", help="build the lineage index (components, splits, connected sets)")
    p.add_argument("store", metavar="STORE")
    p.add_argument(
        "--theta",
        type=whole_number(1, "values"),
        default=DEFAULT_THETA,
        metavar="N",
        help=f"components of at least N values are partitioned into sets (default {DEFAULT_THETA:,})",
    )
    p.add_argument(
        "--splits",
        metavar="FILE",
        help="JSON list of splits, each a list of table names; a nested list is a sub-split "
        "(default: chosen automatically from the workflow graph)",
    )
    engine = p.add_mutually_exclusive_group()
    engine.add_argument(
        "--engine",
        choices=("auto", "local", "spark"),
        default="auto",
        help="local (NumPy, out of core) or spark (default auto: local when the memory budget "
        "holds its per-value arrays, spark otherwise)",
    )
    engine.add_argument("--local", dest="engine", action="store_const", const="local", help="same as --engine local")
    engine.add_argument("--spark", dest="engine", action="store_const", const="spark", help="same as --engine spark")
    p.add_argument(
        "--memory-budget",
        type=_size,
        metavar="SIZE",
        help="memory the local engine's data may use, e.g. 6G or 512M (default: 3/4 of the memory "
        "available; the interpreter's ~0.25 GiB come on top)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="rebuild from all triples (default: when only runs were added since the live index, or "
        "runs it added incrementally deleted, extend it with them; the answers are the same)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output (the new generation's metadata)")
    p.set_defaults(func=_cmd_index)


def _size(text: str) -> int:
    from provplug.index.budget import MemoryBudgetError, parse_size

    try:
        return parse_size(text)
    except MemoryBudgetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _cmd_index(args: argparse.Namespace) -> int:
    from provplug.cli.output import print_json
    from provplug.index.build import build_index
    from provplug.progress import Progress
    from provplug.store.open import open_store

    with Progress(enabled=not args.quiet) as progress:  # closed (a failed stage crossed) before the summary
        meta = build_index(
            open_store(args.store),
            theta=args.theta,
            splits=args.splits,
            engine=args.engine,
            progress=progress,
            memory_budget=args.memory_budget,
            full=args.full,
        )
    if args.json:
        print_json(meta)
        return 0
    c = meta["counts"]
    if "incremental" in meta:
        inc = meta["incremental"]
        print(
            f"indexed {len(inc['added_runs'])} new run(s) incrementally ({inc['added_triples']:,} "
            f"triples, {inc['components_touched']:,} components touched, {len(inc['dropped_layers'])} layer(s) dropped): "
            f"{c['triples']:,} triples in all ({meta['seconds']:.1f}s, generation {meta['generation']})"
        )
        return 0
    print(
        f"indexed {c['triples']:,} triples, {c['values']:,} values: {c['components']:,} components, "
        f"{c['sets']:,} sets, {c['set_dependencies']:,} set dependencies "
        f"({meta['engine']}, {meta['seconds']:.1f}s, generation {meta['generation']})"
    )
    return 0
