"""Index generations: written aside, published by an atomic switch of ``CURRENT``.

A build writes ``STORE/index/GEN/`` completely (data, then ``meta.json``)
and only then replaces ``STORE/index/CURRENT`` (write ``CURRENT.tmp``,
rename over: atomic on local/POSIX filesystems). A crash before the rename
leaves the old index live; the unfinished generation is removed by the next
build. The previous generation is kept (a query that resolved ``CURRENT``
just before the switch may still read it); older ones are deleted.
One build at a time per store is enforced with an exclusive lock file.

A generation records the runs it indexed (``meta.json`` ``runs``). Queries
refuse it once the store lacks a run it indexed (a deleted run,
:func:`check_covers`); runs committed after it do not stop it answering for
the runs it covers (the answer says newer runs are not indexed yet, and a
query about a newer run's table is refused). ``provplug index`` then adds
the new runs incrementally (:mod:`provplug.index.incremental`). ``provplug gc``
removes every generation but the live one (:func:`garbage_generations`),
the previous one only once it has been replaced for ``PREVIOUS_GRACE_S``.

Readers hold the generation they read (:func:`hold`): a shared ``flock`` on
its ``meta.json``, opened read-only, for as long as the reader lives (it
writes nothing). ``provplug gc --now`` drops the previous generation at once
when it can take that lock exclusively (no reader holds it), and removes it
while holding it; a reader that resolved ``CURRENT`` just before finds its
generation gone once it gets the lock, and resolves ``CURRENT`` again. Off
local disk readers cannot be seen, and ``--now`` keeps the grace period.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow.fs as pafs

from provplug.errors import DamagedStoreError, NotIndexedError, StoreError
from provplug.index import integrity, layout
from provplug.model import utc_now
from provplug.plugin.protocols import Store
from provplug.store import files as storefiles

LOCK = "_building.lock"
PREVIOUS = "PREVIOUS"
# gc keeps the previous generation this long after the switch: a query that
# resolved CURRENT just before may still be reading it.
PREVIOUS_GRACE_S = 600.0


def index_root(store: Store) -> str:
    return store.path(layout.INDEX_DIR)


def current_generation(store: Store) -> str | None:
    """Name of the live generation, or ``None`` if the store was never indexed."""
    return (current_pointer(store) or "").strip() or None


def current_pointer(store: Store) -> str | None:
    """The text of ``CURRENT``, None if there is none (read without asking
    first whether it exists: on an object store that is a request more)."""
    path = store.path(layout.INDEX_DIR, layout.CURRENT)
    try:
        return storefiles.read_text(store.fs, path)
    except (FileNotFoundError, IsADirectoryError):
        return None


def current_dir(store: Store) -> str:
    """Path of the live generation; :class:`NotIndexedError` if there is none."""
    name = current_generation(store)
    if name is None:
        raise NotIndexedError(f"{store.uri} has no lineage index (run: provplug index {store.uri})")
    return store.path(layout.INDEX_DIR, name)


def read_meta(store: Store) -> dict[str, Any] | None:
    """The live generation's ``meta.json`` (None if the store was never
    indexed; :class:`DamagedIndexError` if it is missing or unreadable)."""
    name = current_generation(store)
    if name is None:
        return None
    return generation_meta(store, name)


def generation_meta(store: Store, name: str) -> dict[str, Any]:
    with integrity.index_damage(store.uri, name):
        meta = storefiles.read_json(store.fs, store.path(layout.INDEX_DIR, name, layout.META))
    if not isinstance(meta, dict):
        raise integrity.damaged(store.uri, name, f"{layout.META} is not a JSON object")
    return meta


def check_generation(store: Store, name: str, meta: dict[str, Any]) -> None:
    """:class:`DamagedIndexError` unless generation ``name`` holds the files its meta records."""
    integrity.check(store.fs, store.path(layout.INDEX_DIR, name), meta, store.uri)


def new_generation_name() -> str:
    now = utc_now()
    return f"gen-{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def build_lock(store: Store) -> Iterator[None]:
    root = index_root(store)
    store.fs.create_dir(root, recursive=True)
    path = f"{root}/{LOCK}"
    if not _take_lock(store, path):
        raise StoreError(f"another provplug index build is running on {store.uri} (lock {path})")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            store.fs.delete_file(path)


def _take_lock(store: Store, path: str) -> bool:
    """The lock file is created as the store creates its id reservations
    (:meth:`~provplug.plugin.protocols.Store.create_exclusive`), holding its builder."""
    record = storefiles.process_record()
    for _ in range(2):
        if store.create_exclusive(path, record):
            return True
        if not _stale(store, path):
            return False
        store.fs.delete_file(path)  # its builder died: take over
    return False


def build_running(store: Store) -> bool:
    """True if a live builder holds the build lock (read, never taken)."""
    path = f"{index_root(store)}/{LOCK}"
    return store.fs.get_file_info(path).type == pafs.FileType.File and not _stale(store, path)


def _stale(store: Store, path: str) -> bool:
    try:
        # A lock written in place (off local disk, or by an older provplug) may be
        # seen empty: its builder is writing it now; unreadable: it died doing so.
        owner = json.loads(store.read_text(path) or "{}")
    except (OSError, ValueError, DamagedStoreError):
        return True
    return "host" in owner and storefiles.process_gone(str(owner["host"]), int(owner.get("pid", -1)))


def publish(store: Store, name: str) -> None:
    """Make generation ``name`` live, then drop generations older than the previous one."""
    root = index_root(store)
    old = current_generation(store)
    tmp = f"{root}/{layout.CURRENT}.tmp"
    store.write_text(tmp, name + "\n")
    if store.local:
        os.replace(tmp, f"{root}/{layout.CURRENT}")  # the switch
    else:
        store.fs.move(tmp, f"{root}/{layout.CURRENT}")
    if old is not None and old != name:
        store.write_text(f"{root}/{PREVIOUS}", old + "\n")
    remove_stale_generations(store, keep={name, old} - {None})


def remove_stale_generations(store: Store, keep: set[str | None]) -> None:
    for info in store.fs.get_file_info(pafs.FileSelector(index_root(store))):
        if info.type == pafs.FileType.Directory and info.base_name.startswith("gen-") and info.base_name not in keep:
            store.fs.delete_dir(info.path)


# -- staleness -----------------------------------------------------------------------


def check_covers(store: Store, indexed: set[str], runs: Iterable[dict[str, Any]]) -> list[str]:
    """:class:`NotIndexedError` unless a generation that indexed the runs
    ``indexed`` answers for the committed ``runs``: every indexed run still
    in the store (a deleted run's triples are in the index until it is
    updated). Runs committed since are allowed: the generation answers for
    the runs it covers (a query about a table of a newer run is refused
    where its values are looked up, :func:`pending_runs`). Returns the
    committed runs with triples the generation lacks, in commit order."""
    manifests = list(runs)
    present = {m["run_id"] for m in manifests}
    added = pending_runs(indexed, manifests)
    deleted = indexed - present
    if not deleted:
        return added
    changes = ([f"the index predates {len(added)} run(s)"] if added else []) + [
        f"{len(deleted)} indexed run(s) were deleted"
    ]
    raise NotIndexedError(
        f"the store changed since it was indexed ({', '.join(changes)}): run `provplug index {store.uri}`"
    )


def pending_runs(indexed: set[str], manifests: Iterable[dict[str, Any]]) -> list[str]:
    """The committed runs with triples that a generation indexing ``indexed`` lacks."""
    return [m["run_id"] for m in manifests if m["run_id"] not in indexed and "triples" in m.get("datasets", ())]


def not_indexed_note(pending: list[str]) -> str:
    """The one line an answer from a generation that lacks ``pending`` carries."""
    return (
        f"{len(pending)} newer run(s) are not indexed yet (the answer covers the runs indexed); "
        "run `provplug index STORE` to include them"
    )


# -- garbage ----------------------------------------------------------------------------


def garbage_generations(store: Store, dry_run: bool = False, now: bool = False) -> list[tuple[str, str, int]] | None:
    """``(name, path, bytes)`` of every generation ``provplug gc`` may remove,
    or None while an index build runs (its new generation is not live yet).
    A ``dry_run`` writes nothing: it looks at the build lock, not takes it.
    ``now``: the previous generation too, unless a reader holds it."""
    if store.fs.get_file_info(index_root(store)).type != pafs.FileType.Directory:
        return []
    if dry_run:
        return None if build_running(store) else _stale_generations(store, now)
    try:
        with build_lock(store):
            return _stale_generations(store, now)
    except StoreError:
        return None


def remove_generations(store: Store, names: set[str], now: bool = False) -> list[str]:
    """Remove the generations ``names`` that are still not live (nor held by
    a reader), under the build lock (:class:`StoreError` while a build runs);
    return those removed."""
    with build_lock(store):
        removable = {name for name, _, _ in _stale_generations(store, now)} & names
        removed = [name for name in sorted(removable) if _remove_unheld(store, name)]
        previous = f"{index_root(store)}/{PREVIOUS}"
        if _pointer(store, previous) in removed:
            store.fs.delete_file(previous)
        return removed


def _remove_unheld(store: Store, name: str) -> bool:
    """Remove generation ``name`` unless a reader holds it (checked and
    removed under one exclusive lock, so no reader takes it in between)."""
    path = store.path(layout.INDEX_DIR, name)
    with _exclusive(store, name) as free:
        if free:
            store.fs.delete_dir(path)
        return free


# -- readers' holds ---------------------------------------------------------------------------


class Hold:
    """A reader's hold on a generation: a shared lock on its ``meta.json``,
    released by :meth:`release` or when the hold is collected."""

    def __init__(self, file: Any = None) -> None:
        self._file = file

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor drops its lock
            self._file = None

    def __del__(self) -> None:
        self.release()


def hold(store: Store, name: str) -> Hold | None:
    """Hold generation ``name`` for reading; None if it is gone (removed
    since ``CURRENT`` named it: resolve again). Off local disk a hold is a
    token that holds nothing."""
    if not store.local:
        return Hold()
    try:
        file = open(_meta_path(store, name), "rb")  # noqa: SIM115 - the hold owns it
    except FileNotFoundError:
        return None
    fcntl.flock(file.fileno(), fcntl.LOCK_SH)  # waits while gc removes it
    if os.fstat(file.fileno()).st_nlink == 0:  # gc removed it while we waited
        file.close()
        return None
    return Hold(file)


def is_held(store: Store, name: str) -> bool:
    """True if a reader holds generation ``name`` (always, off local disk)."""
    with _exclusive(store, name) as free:
        return not free


@contextlib.contextmanager
def _exclusive(store: Store, name: str) -> Iterator[bool]:
    """Hold generation ``name`` exclusively if no reader holds it (yields
    True), else yield False; a generation without ``meta.json`` (an
    unfinished build) has no readers."""
    if not store.local:
        yield False
        return
    try:
        file = open(_meta_path(store, name), "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        yield True
        return
    with file:
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def _meta_path(store: Store, name: str) -> str:
    return store.path(layout.INDEX_DIR, name, layout.META)


def _stale_generations(store: Store, now: bool = False) -> list[tuple[str, str, int]]:
    previous = kept_previous(store)
    if now and previous is not None and not is_held(store, previous):
        previous = None
    keep = {current_generation(store), previous}
    found = []
    for info in store.fs.get_file_info(pafs.FileSelector(index_root(store))):
        if info.type == pafs.FileType.Directory and info.base_name.startswith("gen-") and info.base_name not in keep:
            files = store.fs.get_file_info(pafs.FileSelector(info.path, recursive=True))
            size = sum(int(f.size or 0) for f in files if f.type == pafs.FileType.File)
            found.append((info.base_name, info.path, size))
    return sorted(found)


def kept_previous(store: Store) -> str | None:
    """The previous generation when gc keeps it (replaced less than
    ``PREVIOUS_GRACE_S`` ago), else None."""
    if not _switched_within(store, PREVIOUS_GRACE_S):
        return None
    previous = _pointer(store, f"{index_root(store)}/{PREVIOUS}")
    exists = previous and store.fs.get_file_info(store.path(layout.INDEX_DIR, previous)).type == pafs.FileType.Directory
    return previous if exists and previous != current_generation(store) else None


def _pointer(store: Store, path: str) -> str | None:
    if store.fs.get_file_info(path).type != pafs.FileType.File:
        return None
    return storefiles.read_text(store.fs, path).strip() or None


def _switched_within(store: Store, seconds: float) -> bool:
    """True if ``CURRENT`` was replaced less than ``seconds`` ago (or when unknown)."""
    info = store.fs.get_file_info(store.path(layout.INDEX_DIR, layout.CURRENT))
    if info.type != pafs.FileType.File or info.mtime is None:
        return bool(info.type == pafs.FileType.File)
    return bool(time.time() - info.mtime.timestamp() < seconds)
