"""``provplug plugins``: the loaded plugins and the distribution providing each."""

from __future__ import annotations

import argparse
from typing import Any

from provplug.cli.output import print_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plugins", help="list loaded plugins and the distribution providing each")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_plugins)


def _cmd_plugins(args: argparse.Namespace) -> int:
    from provplug.plugin.manager import get_plugins

    rows = get_plugins().describe()
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        print(f"{row['name']:<28} {row['distribution']:<28} {row['hooks']}")
    return 0
