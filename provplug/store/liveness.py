"""Who holds part of a store: the owner records (a staged run's
``_owner.json``, the index build lock) that name a process, and whether that
process is gone (so what it left may be taken over or removed)."""

from __future__ import annotations

import json
import os
import socket
from typing import Any


def process_record(**extra: Any) -> str:
    """A JSON record naming this process (``pid``, ``host``, then ``extra``),
    for a file that says who holds part of the store."""
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), **extra})


def process_gone(host: str, pid: int) -> bool:
    """True when ``host``/``pid`` (as :func:`process_record` wrote them) is a
    process of this host that no longer runs; a process of another host is
    never known to be gone."""
    return host == socket.gethostname() and not _pid_alive(pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True
