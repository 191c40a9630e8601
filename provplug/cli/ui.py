"""``provplug ui STORE``: the parser (nothing heavy imported) and the command."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from provplug.errors import MissingExtraError as MissingExtraError

EXTRA_HINT = "pip install 'provplug[ui]'"


def add_parser(sub: Any) -> None:
    from provplug.cli.output import whole_number

    p = sub.add_parser(
        "ui",
        help="browse the store in a web browser: runs, tables, rows, lineage graphs, what-if, diff",
        description="Serve a local, read-only lineage explorer over STORE (needs the ui extra: "
        f"{EXTRA_HINT}). Pages and their JSON API (/api/...) are described in docs/ui.md.",
        epilog="Bound to loopback unless --host says otherwise; nothing is fetched from the network.",
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument(
        "--port",
        type=whole_number(0, "a port"),
        default=8765,
        help="port to listen on (default 8765; 0: any free port)",
    )
    p.add_argument("--open", action="store_true", help="open the explorer in the default web browser")
    p.set_defaults(func=_cmd_ui)


def check_extra() -> None:
    """One line naming the extra when Starlette or uvicorn is missing."""
    import importlib.util

    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(f"provplug ui needs {' and '.join(missing)}: {EXTRA_HINT}")


def _cmd_ui(args: argparse.Namespace) -> int:
    check_extra()
    from provplug.api import open as open_store
    from provplug.ui.server import bind, serve, url_of

    store = open_store(args.store)
    sock = bind(args.host, args.port)
    url = url_of(sock)
    print(f"provplug ui: serving {store.uri} at {url} (Ctrl-C stops)", file=sys.stderr, flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(url)
    try:
        serve(store, sock)
    finally:
        sock.close()
    return 0
