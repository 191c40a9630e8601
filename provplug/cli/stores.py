"""What the store-browsing commands (``runs``, ``tables``, ``show``,
``delete-run``, ``gc``) share: the RUN help, STORE and --json, the checked
store. No heavy import here (parsers are built at start-up)."""

from __future__ import annotations

import argparse
from typing import Any

RUN_HELP = "the run: its number, latest, latest~N, its label or an id prefix (see `provplug runs`)"


def store_and_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def opened(uri: str) -> Any:
    """The store at ``uri``, checked (a missing or malformed store is an error here)."""
    from provplug.store.open import open_store

    store = open_store(uri)
    store.check()
    return store
