"""A store transaction observed by the run hooks: the one place that decides
when ``provplug_run_started`` / ``provplug_run_finished`` fire."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal, TypeVar

from provplug.model import RunInfo, utc_now
from provplug.plugin.manager import Plugins
from provplug.plugin.protocols import Store, Transaction

TransactionT = TypeVar("TransactionT", bound=Transaction)


@contextlib.contextmanager
def observed_run(
    store: Store[TransactionT], plugins: Plugins, kind: Literal["capture", "import"], engine: str
) -> Iterator[tuple[TransactionT, RunInfo]]:
    """Stage a run in ``store``; fire ``run_started`` once it is open and
    ``run_finished`` after it is committed, or after it is rolled back."""
    info: RunInfo | None = None
    try:
        with store.transaction(kind) as txn:
            info = RunInfo(txn.run_id, store.uri, kind, engine, txn.started)
            plugins.run_started(info)
            yield txn, info
    except BaseException as exc:
        if info is not None:
            info.status, info.finished = "failed", utc_now()
            plugins.run_finished(info, exc)
        raise
    assert info is not None
    info.status, info.finished = "committed", utc_now()
    info.number = getattr(txn, "number", None)  # given by the store's commit (see ParquetStore.reserve_run_number)
    plugins.run_finished(info, None)
