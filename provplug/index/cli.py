"""``provplug index``."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("index", help="build the lineage index (components, splits, connected sets)")
    p.add_argument("store", metavar="STORE")
    p.set_defaults(func=_cmd_index)


def _cmd_index(args: argparse.Namespace) -> int:
    from ..errors import ProvplugError

    raise ProvplugError("indexing is not available yet")
