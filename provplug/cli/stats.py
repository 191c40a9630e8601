"""``provplug stats STORE``: counts of runs, tables, ops, values, triples (and index sizes)."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import Printed, print_answer


def add_parser(sub: Any) -> None:
    p = sub.add_parser("stats", help="counts of runs, tables, ops, values, triples (and index sizes)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_stats)


def _cmd_stats(args: argparse.Namespace) -> int:
    from provplug.explore.browse import store_stats
    from provplug.store.open import open_store

    stats = store_stats(open_store(args.store))
    print_answer(Printed(stats, lambda: _stats_text(stats)), args.json)
    return 0


def _stats_text(stats: dict[str, Any]) -> str:
    return "\n".join(f"{key:<18} {_plain(key, value)}".rstrip() for key, value in stats.items())


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
