"""``provplug lineage``."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lineage", help="ancestors (or descendants) of a value, with their rows")
    p.add_argument("store", metavar="STORE")
    p.set_defaults(func=_cmd_lineage)


def _cmd_lineage(args: argparse.Namespace) -> int:
    from ..errors import ProvplugError

    raise ProvplugError("lineage queries are not available yet")
