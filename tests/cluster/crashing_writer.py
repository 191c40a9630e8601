"""A writer of one run to a store that kills itself (SIGKILL: no cleanup,
no finally) just before its N-th write to the store, for the crash test:
``python crashing_writer.py STORE_URI N``. Exits 0 when the run committed
in fewer writes."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq

from provplug.store.open import open_store
from provplug.store.parquet import ParquetStore

# The store's writes: every object the commit protocol puts or deletes passes through one of these.
WRITES: list[tuple[Any, str]] = [
    (ParquetStore, "write_text"),
    (ParquetStore, "create_exclusive"),
    (ParquetStore, "release_id"),
    (pq, "write_table"),
]


def _dying_at(n: int) -> None:
    done = [0]

    def counted(real: Callable[..., Any]) -> Callable[..., Any]:
        def write(*args: Any, **kwargs: Any) -> Any:
            done[0] += 1
            if done[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        return write

    for owner, name in WRITES:
        setattr(owner, name, counted(getattr(owner, name)))


if __name__ == "__main__":
    from tests.cluster.test_s3_store import write_paper_run

    uri, step = sys.argv[1], int(sys.argv[2])
    store = open_store(uri)
    _dying_at(step)
    write_paper_run(store)
