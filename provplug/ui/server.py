"""Serving the explorer: a socket bound first (so that port 0 gets a free
port and the address is known before the first request), then uvicorn."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from provplug.api import ProvenanceStore

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def allowed_hosts(host: str) -> list[str]:
    """Host headers to accept: the loopback names on loopback; any when bound
    to every interface or to a named one (the user chose to share it)."""
    if host in LOOPBACK:
        return ["127.0.0.1", "localhost", "::1", "[::1]"]
    return ["*"]


def make_server(store: ProvenanceStore, host: str) -> Any:
    import uvicorn

    from provplug.ui.app import create_app

    # Starlette runs each (plain function) endpoint in anyio's worker threads
    # (40 at once by default): a slow query holds one of them, not the loop.
    app = create_app(store, allowed_hosts(host))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config)


def serve(store: ProvenanceStore, sock: socket.socket) -> None:
    """Serve until interrupted (Ctrl-C)."""
    make_server(store, sock.getsockname()[0]).run(sockets=[sock])


@contextmanager
def running(store: ProvenanceStore, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """The explorer served from a thread of this process while the block
    runs; yields its URL (for tests and benchmarks)."""
    sock = bind(host, port)
    server = make_server(store, host)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the explorer's server stopped while starting")
            threading.Event().wait(0.02)
        yield url_of(sock)
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
