"""The built-in store: a directory of Parquet datasets, written one run at a time.

Layout (documented in docs/store-format.md)::

    STORE/
      provplug-store.json          format marker
      _ids/{tables,ops}/N          id reservations (exclusive create)
      _ids/runs/N                  run numbers, taken at commit (exclusive create)
      _staging/RUN/                a run being written: invisible to readers
        _owner.json  _reservations   its writer and its ids, until the commit
      runs/RUN/                    committed runs, never rewritten
      runs/.deleted-RUN/           a run being deleted: invisible to readers
        _manifest.json             written last: the run's commit record
        tables.parquet  ops.parquet  values.parquet (imports)
        triples/*.parquet
        rows/TABLE_ID/*.parquet
      index/                       the lineage index (``provplug index``)

A run is staged under ``_staging`` and becomes visible by one rename into
``runs/`` (atomic on local and POSIX filesystems), after its manifest is
written: a crash at any point leaves the store as it was, and a folder under
``runs/`` without a manifest is damage, never a run to skip.

On local disk a new store appears whole (its skeleton is built beside it and
renamed into place), and only its creator may remove it again, after a failed
first write, once it has proved that no other writer uses it (see
:meth:`ParquetStore.remove_if_unused`).

A run is deleted (:meth:`ParquetStore.delete_run`) the other way round: one
rename of ``runs/RUN`` to ``runs/.deleted-RUN`` makes it vanish whole, then
its files are removed; a crash in between leaves a hidden folder that
:meth:`ParquetStore.garbage` lists and ``provplug gc`` removes. Ids are never
reused: a deleted run's id reservations stay under ``_ids``.

Object stores (S3 and any filesystem other than the local one) cannot
rename a folder, so there the store commits by the object-store protocol:
nothing is renamed, ever.

* A run is written in place, under ``runs/RUN/`` (a name no other writer can
  take: the run id holds a random part), with its owner record. It becomes
  visible by ONE single-object write, its ``_manifest.json``, written last:
  readers take a folder under ``runs/`` without a manifest for a run not yet
  committed (or an abandoned one) and skip it, so they see a run whole or not
  at all. A committed run is never rewritten.
* Id reservations and run numbers are put-if-absent objects (on S3 one
  conditional ``PutObject``, :mod:`provplug.store.objectstore`): two writers
  never take the same id, with no counter read and written back.
* A run is deleted by recording the deleter (``_deleting.json``), then
  deleting its manifest (the deletion point: one single-object delete), then
  its files. A crash after the deletion point leaves a folder with a
  ``_deleting.json`` and no manifest, which :meth:`ParquetStore.garbage` lists.
* ``gc`` removes folders without a manifest whose writer is dead (their ids
  are released, as for a dead writer's staging folder on local disk).

Every store file is read through :mod:`provplug.store.files`, so damage is a
one-line :class:`~provplug.errors.DamagedStoreError` naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from provplug import schema
from provplug.errors import DamagedStoreError, StoreError
from provplug.model import OpInfo, StoreLocation, TableInfo, utc_now
from provplug.plugin.connection import s3_uri
from provplug.plugin.markers import hookimpl
from provplug.store import files as storefiles
from provplug.store.objectstore import put_if_absent
from provplug.store.runs import numbered
from provplug.store.triples import TripleScan

logger = logging.getLogger(__name__)  # commits, aborts, deletions and garbage removed

FORMAT = "provplug-store"
FORMAT_VERSION = 1
MARKER = "provplug-store.json"
MANIFEST = "_manifest.json"
OWNER = "_owner.json"
RESERVATIONS = "_reservations"
LOCATIONS = "locations.json"  # a run's location edges (provplug.location.LOCATIONS; asserted equal by its tests)
ID_KINDS = ("tables", "ops")
RUN_NUMBERS = "runs"  # _ids/runs/N: run numbers, reserved at commit (see reserve_run_number)
DELETING = "_deleting.json"  # object stores: the record of a deletion under way (see delete_run)
DELETED_PREFIX = ".deleted-"  # runs/.deleted-RUN: a deleted run whose files are being removed
SKELETON = (MARKER, "runs", "_staging", "_ids")
# A staging folder without a readable owner record is a dead writer's once it
# is this old: a live writer records itself right after making the folder.
OWNERLESS_GRACE_S = 3600.0
# Starting a run waits this long, at most, for a failed creator to finish
# removing the store it made (a matter of a few system calls).
START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Garbage:
    """Something of the store no reader uses any more (``provplug gc``)."""

    kind: Literal["staging", "deleted-run", "index-generation"]
    name: str
    path: str
    bytes: int


@hookimpl(trylast=True)
def provplug_store_location(uri: str) -> StoreLocation:
    """A local path, or any URI pyarrow's filesystems understand."""
    try:
        fs, path = pafs.FileSystem.from_uri(s3_uri(uri))  # s3a:// and s3n:// are S3
    except (pa.ArrowInvalid, ValueError):
        fs, path = pafs.LocalFileSystem(), os.path.abspath(uri)
    local = isinstance(fs, pafs.LocalFileSystem)
    return StoreLocation(uri, fs, os.path.abspath(path) if local else path.rstrip("/"))


class ParquetStore:
    """A provenance store in a directory (local path or filesystem URI), at
    ``location`` when a store backend chose where it lives (else the
    built-in backend's answer for ``uri``)."""

    def __init__(self, uri: str, location: StoreLocation | None = None) -> None:
        where = location or provplug_store_location(uri)
        self.uri = uri
        self.fs = where.filesystem
        self.root = where.root
        self.local = isinstance(self.fs, pafs.LocalFileSystem)
        self._root_was_empty_dir = False  # set by create(): restored by remove_if_unused()

    # -- paths ---------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def spark_path(self, *parts: str) -> str:
        """The same location as a URI Spark can read and write."""
        return self.to_spark_path(self.path(*parts))

    def to_spark_path(self, path: str) -> str:
        """A path on :attr:`fs` (such as :meth:`triple_files` lists) as Spark
        addresses it: the one conversion from the store's paths to Spark's."""
        return path if self.local else f"{self.uri.split('://', 1)[0]}://{path}"

    def _info(self, path: str) -> pafs.FileInfo:
        return self.fs.get_file_info(path)

    # -- existence -----------------------------------------------------------
    def exists(self) -> bool:
        info = self._info(self.root)
        if info.type == pafs.FileType.NotFound:
            return False
        if info.type != pafs.FileType.Directory:
            raise StoreError(f"store path {self.uri} is a file, not a store directory")
        if self._info(self.path(MARKER)).type != pafs.FileType.File:
            # Only an empty dir (or, off local disk, a store being made in place) may become one.
            # It may vanish meanwhile (another process's creation failed and removed it): no store.
            listed = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
            entries = {i.base_name for i in listed}
            if entries - set(SKELETON):
                raise StoreError(f"{self.uri} is a non-empty directory that is not a provplug store")
            return False
        return True

    def check(self) -> None:
        """Raise unless the store exists and has a format this code reads."""
        if not self.exists():
            raise StoreError(f"no provplug store at {self.uri}")
        marker = storefiles.read_json(self.fs, self.path(MARKER))
        if not isinstance(marker, dict):
            raise DamagedStoreError(f"damaged store file {self.path(MARKER)}: not a JSON object")
        if marker.get("format") != FORMAT or marker.get("version") != FORMAT_VERSION:
            raise StoreError(f"{self.uri}: unsupported store format {marker}")

    def create(self) -> bool:
        """Create the store if missing; return True if this call created it.

        Writers racing to create one store all succeed and exactly one gets
        True: on local disk the skeleton is renamed into place whole."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.exists():
                self.check()
                return False
            if not self.local:
                return self._make_skeleton(self.root)
            if self._install_skeleton():
                return True
            # Another writer's store is in place (whole: it was renamed there
            # with its marker), or a failed creator has just removed it: look again.
            incomplete = self._info(self.path(MARKER)).type != pafs.FileType.File
            if incomplete and self._info(self.root).type == pafs.FileType.Directory:
                raise StoreError(f"{self.uri} holds an incomplete store (no {MARKER}): remove it")
            if time.monotonic() > deadline:
                raise StoreError(f"{self.uri}: cannot create the store, other writers keep replacing it")

    def _make_skeleton(self, root: str) -> bool:
        """Make the store's folders and its marker at ``root``; False if
        another writer's marker was there first (object stores: put-if-absent)."""
        for sub in ("runs", "_staging", *(f"_ids/{k}" for k in ID_KINDS)):
            self.fs.create_dir(f"{root}/{sub}", recursive=True)
        marker = json.dumps({"format": FORMAT, "version": FORMAT_VERSION})
        if self.local:
            self.write_text(f"{root}/{MARKER}", marker)
            return True
        return self.create_exclusive(f"{root}/{MARKER}", marker)

    def _install_skeleton(self) -> bool:
        """Build the skeleton beside the root and rename it into place; False
        if the root is already a non-empty directory (another writer's store)."""
        parent, name = os.path.split(self.root)
        os.makedirs(parent, exist_ok=True)
        self._root_was_empty_dir = os.path.isdir(self.root)
        aside = os.path.join(parent, f".{name}.creating-{uuid.uuid4().hex[:12]}")
        try:
            self._make_skeleton(aside)
            os.rename(aside, self.root)  # replaces an empty directory, fails on a non-empty one
            return True
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return False
            raise
        finally:
            shutil.rmtree(aside, ignore_errors=True)

    def remove_if_unused(self) -> bool:
        """Undo :meth:`create` after a failed first write, unless another writer
        has started or committed a run (or written anything) in the meantime;
        return True if the store was removed.

        On local disk, removing ``_staging`` (possible only while it is empty)
        seals the store: no run is staged then, and none can start until the
        store is gone (starting writers wait, see :meth:`transaction`) or
        unsealed. Only a sealed store without runs is renamed away, at once.
        """
        if not self.local:
            busy = any(self.fs.get_file_info(pafs.FileSelector(self.path(sub))) for sub in ("runs", "_staging"))
            if not busy:
                self.fs.delete_dir(self.root)
            return not busy
        try:
            os.rmdir(self.path("_staging"))
        except OSError:
            return False  # a run is staged here: the store is in use
        if os.listdir(self.path("runs")) or set(os.listdir(self.root)) - set(SKELETON):
            os.mkdir(self.path("_staging"))  # unseal: another writer has committed (or written) here
            return False
        parent, name = os.path.split(self.root)
        aside = os.path.join(parent, f".{name}.removing-{uuid.uuid4().hex[:12]}")
        os.rename(self.root, aside)
        shutil.rmtree(aside, ignore_errors=True)
        if self._root_was_empty_dir:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.root)  # the empty directory was the user's, not ours
        return True

    # -- small files ---------------------------------------------------------
    def read_text(self, path: str) -> str:
        """A small text file of the store (damage is a :class:`DamagedStoreError`)."""
        return storefiles.read_text(self.fs, path)

    def write_text(self, path: str, text: str) -> None:
        """Write (or replace) a small text file of the store."""
        with self.fs.open_output_stream(path) as f:
            f.write(text.encode())

    def _write_text_atomic(self, path: str, text: str) -> None:
        """Write a file that readers see whole or not at all (on local disk)."""
        if not self.local:
            self.write_text(path, text)
            return
        tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        self.write_text(tmp, text)
        os.rename(tmp, path)

    def create_exclusive(self, path: str, text: str = "") -> bool:
        """Create the file ``path`` holding ``text`` unless it exists; return
        True if this call created it. The store's one lock primitive (id
        reservations, the index build lock).

        On local disk it is atomic and the file is never seen empty or half
        written: a finished file is hard-linked into place. On other
        filesystems it is one conditional write where the filesystem has one
        (S3: :func:`~provplug.store.objectstore.put_if_absent`), else a check,
        then a write: provplug assumes one writer at a time there."""
        if self.local:
            tmp = self.path("_ids", f".{uuid.uuid4().hex}.tmp")
            self.write_text(tmp, text)
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        created = put_if_absent(self.fs, self.uri, path, text.encode())
        if created is not None:
            return created
        if self._info(path).type != pafs.FileType.NotFound:
            return False
        self.write_text(path, text)
        return True

    # -- id reservations -----------------------------------------------------
    def reserve_id(
        self, kind: str, first: int = 1, owner: str = "", announce: Callable[[int], None] | None = None
    ) -> int:
        """Reserve the next free id of ``kind`` for this process, store-wide.

        Exclusive file creation (:meth:`create_exclusive`) makes concurrent
        writers safe on local/POSIX filesystems and on S3.
        The reservation holds ``owner`` (a run id), so that releasing it for a
        dead writer can never free another's; ``announce(candidate)`` runs
        before each attempt, so a writer can log a candidate before it may own it.
        """
        folder = self.path("_ids", kind)
        taken = [int(i.base_name) for i in self.fs.get_file_info(pafs.FileSelector(folder))]
        candidate = max([first - 1, *taken]) + 1
        while True:
            if announce is not None:
                announce(candidate)
            if self.create_exclusive(f"{folder}/{candidate}", owner):
                return candidate
            candidate += 1

    def reserve_run_number(self, run_id: str, announce: Callable[[int], None] | None = None) -> int:
        """The number (1, 2, …) of the run ``run_id``, taken as it commits.

        Numbers are reserved like ids: the first free ``_ids/runs/N`` is
        created exclusively (:meth:`create_exclusive`, holding the run id),
        so two concurrent commits can never take the same number, and no
        counter is read and written back. A committed run's number is never
        given out again (a run deleted later leaves a gap); a writer that
        dies between reserving and renaming has its number released by
        garbage collection, like its ids (``announce`` logs the candidate
        first), so numbers still only grow: the next run takes the highest
        reserved number plus one. Runs committed before numbering existed
        carry no number and are numbered 1..k by commit order when read
        (:func:`provplug.store.runs.numbered`): the first reservation in
        such a store starts above them."""
        folder = self.path("_ids", RUN_NUMBERS)
        self.fs.create_dir(folder, recursive=True)
        taken = [int(i.base_name) for i in self.fs.get_file_info(pafs.FileSelector(folder)) if i.base_name.isdigit()]
        floor = max(taken) if taken else self._unnumbered_runs()
        candidate = floor + 1
        while True:
            if announce is not None:
                announce(candidate)
            if self.create_exclusive(f"{folder}/{candidate}", run_id):
                return candidate
            candidate += 1

    def _unnumbered_runs(self) -> int:
        """How many committed runs carry no number (a store older than numbering)."""
        return sum(1 for m in self._manifests() if not isinstance(m.get("number"), int))

    def release_id(self, kind: str, ident: int, owner: str | None = None) -> None:
        """Free a reservation; with ``owner``, only if it is that run's."""
        path = self.path("_ids", kind, str(ident))
        if owner is not None and storefiles.read_text(self.fs, path) != owner:
            return
        self.fs.delete_file(path)

    # -- writing -------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self, kind: str) -> Iterator[RunTransaction]:
        """Stage a run; commit it if the block succeeds, else leave no trace.

        If the store did not exist it is created, and removed again when the
        block fails and no other writer uses it, so a failed first write
        leaves nothing behind.
        """
        created, txn = self._begin(kind)
        try:
            yield txn
            txn.commit()
        except BaseException:
            txn.abort()
            if created:
                self.remove_if_unused()
            raise

    def _begin(self, kind: str) -> tuple[bool, RunTransaction]:
        """Create the store if needed and stage a run in it. A store that a
        failed creator is removing (its ``_staging`` or root vanishes under us)
        is waited for and then made afresh."""
        created = False
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                created = self.create() or created
                self.collect_garbage()
                return created, RunTransaction(self, kind)
            except FileNotFoundError:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"{self.uri}: cannot stage a run: its _staging folder is missing "
                        "(remove the store if it holds no runs and no provplug process is using it)"
                    ) from None
                time.sleep(0.01)

    def collect_garbage(self) -> list[str]:
        """Remove runs left staged by writers that died and release their id
        reservations; return the removed run ids.

        A staged run is a dead writer's when its owner record names a process
        of this host that is gone, or when it has no readable owner record
        and is older than ``OWNERLESS_GRACE_S`` (a writer killed right after
        making the folder, or a commit by a provplug older than this one).
        """
        removed = []
        for info, run_id in self._dead_staging():
            if self._collect_staging(info.path, run_id):
                logger.info("removed the staged run %s of a writer that died (%s)", run_id, info.path)
                removed.append(run_id)
        return removed

    def _dead_staging(self) -> list[tuple[pafs.FileInfo, str]]:
        """Staging folders of dead writers, with their run ids (on object
        stores: the folders of uncommitted runs under ``runs/``)."""
        staged = self.fs.get_file_info(pafs.FileSelector(self.path("_staging"), allow_not_found=True))
        if not self.local:
            staged = [*staged, *(i for i in self._uncommitted() if not self._deleting(i))]
        found = []
        for info in staged:
            run_id = self._dead_run(info) if info.type == pafs.FileType.Directory else None
            if run_id is not None:
                found.append((info, run_id))
        return found

    def _uncommitted(self) -> list[pafs.FileInfo]:
        """Object stores: the folders under ``runs/`` without a manifest (runs
        being written or deleted, or left by a writer or deleter that died)."""
        folders = [
            i
            for i in self._listing(self.path("runs"))
            if i.type == pafs.FileType.Directory and not i.base_name.startswith(".")
        ]
        manifests = self.fs.get_file_info([f"{i.path}/{MANIFEST}" for i in folders])
        return [f for f, m in zip(folders, manifests, strict=True) if m.type == pafs.FileType.NotFound]

    def _deleting(self, folder: pafs.FileInfo) -> bool:
        """Object stores: whether the run folder is one a deletion has hidden."""
        return bool(self._info(f"{folder.path}/{DELETING}").type == pafs.FileType.File)

    def _collect_staging(self, path: str, run_id: str) -> bool:
        """Remove one dead writer's staging folder and free its ids; False if
        another collector got there first."""
        claimed = self._claim(path)
        if claimed is None:
            return False  # another writer is collecting it
        for kind, ident in self._reservations(claimed):
            with contextlib.suppress(OSError):
                self.release_id(kind, ident, owner=run_id)
        self.fs.delete_dir(claimed)
        return True

    def garbage(self) -> list[Garbage]:
        """What ``provplug gc`` removes from the store itself: staging folders
        of dead writers, and the hidden folders of interrupted deletions."""
        self.check()
        found = [Garbage("staging", run_id, info.path, self._size(info.path)) for info, run_id in self._dead_staging()]
        if not self.local:
            found += [
                Garbage("deleted-run", info.base_name, info.path, self._size(info.path))
                for info in self._uncommitted()
                if self._deleting(info)
            ]
        for info in self._listing(self.path("runs")):
            if info.type == pafs.FileType.Directory and info.base_name.startswith(DELETED_PREFIX):
                name = info.base_name[len(DELETED_PREFIX) :]
                found.append(Garbage("deleted-run", name, info.path, self._size(info.path)))
        return found

    def remove_garbage(self, item: Garbage) -> bool:
        """Remove one item of :meth:`garbage`; False if it was already gone."""
        logger.info("removing %s garbage %s (%d bytes)", item.kind, item.path, item.bytes)
        if item.kind == "staging":
            return self._collect_staging(item.path, item.name)
        if item.kind == "deleted-run":
            try:
                self.fs.delete_dir(item.path)
            except FileNotFoundError:
                return False
            return True
        raise StoreError(f"the store does not collect {item.kind} garbage")

    def _size(self, folder: str) -> int:
        """Bytes of the files under ``folder`` (0 if it is gone)."""
        infos = self.fs.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
        return sum(int(i.size or 0) for i in infos if i.type == pafs.FileType.File)

    # -- deleting a run --------------------------------------------------------
    def delete_run(self, run_id: str, before_removal: Callable[[], None] | None = None) -> dict[str, Any]:
        """Delete the committed run ``run_id`` (a whole id); return its
        manifest with the bytes freed (``bytes``).

        One rename hides the run (the deletion point: readers see it whole
        before, not at all after), then its files are removed. A crash in
        between leaves ``runs/.deleted-RUN``, which :meth:`garbage` lists.
        On object stores the deletion point is the deletion of the run's
        manifest, after a ``_deleting.json`` record that tells :meth:`garbage`
        the folder left by a crash is a deleted run's.
        ``before_removal`` runs between the two (tests simulate a crash there)."""
        manifest = next((m for m in self.runs() if m["run_id"] == run_id), None)
        if manifest is None:
            raise StoreError(f"{self.uri} has no run {run_id}")
        hidden = self.path("runs", f"{DELETED_PREFIX}{run_id}")
        if self.local:
            os.rename(self.path("runs", run_id), hidden)  # the deletion point
        else:
            hidden = self.path("runs", run_id)
            self.write_text(f"{hidden}/{DELETING}", storefiles.process_record(run_id=run_id))
            self.fs.delete_file(f"{hidden}/{MANIFEST}")  # the deletion point
        if before_removal is not None:
            before_removal()
        freed = self._size(hidden)
        self.fs.delete_dir(hidden)
        logger.info("deleted run %s of %s (%d bytes freed)", run_id, self.uri, freed)
        return {**manifest, "bytes": freed}

    def _dead_run(self, info: pafs.FileInfo) -> str | None:
        """The run id of a staging folder whose writer is dead, else None."""
        try:
            record = storefiles.read_json(self.fs, f"{info.path}/{OWNER}")
            host, pid = record["host"], int(record["pid"])
            run_id = str(record.get("run_id", info.base_name))
        except (FileNotFoundError, DamagedStoreError, KeyError, TypeError, ValueError):
            mtime = self._last_written(info)
            return info.base_name if time.time() - mtime > OWNERLESS_GRACE_S else None
        return run_id if storefiles.process_gone(host, pid) else None

    def _last_written(self, folder: pafs.FileInfo) -> float:
        """When ``folder`` was last written to (object stores keep no time
        for a folder: its newest file's; now when it is empty)."""
        if folder.mtime is not None:
            return float(folder.mtime.timestamp())
        infos = self.fs.get_file_info(pafs.FileSelector(folder.path, recursive=True, allow_not_found=True))
        times = [i.mtime.timestamp() for i in infos if i.mtime is not None]
        return max(times, default=time.time())

    def _claim(self, path: str) -> str | None:
        """Rename a dead writer's staging folder to a name of our own, so that
        of several collectors exactly one releases its ids (a second release
        could free an id another writer has reserved since). Object stores
        rename nothing: the collector that creates ``_collecting`` first wins."""
        if not self.local:
            return path if self.create_exclusive(f"{path}/_collecting", uuid.uuid4().hex) else None
        claimed = self.path("_staging", f".collecting-{uuid.uuid4().hex[:12]}")
        try:
            os.rename(path, claimed)
        except FileNotFoundError:
            return None
        return claimed

    def _reservations(self, staging: str) -> list[tuple[str, int]]:
        try:
            text = storefiles.read_text(self.fs, f"{staging}/{RESERVATIONS}")
        except (FileNotFoundError, DamagedStoreError):
            return []
        out = []
        for line in text.split():
            kind, _, ident = line.partition(":")
            if kind in (*ID_KINDS, RUN_NUMBERS) and ident.isdigit():
                out.append((kind, int(ident)))
        return out

    # -- reading -------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        """Manifests of committed runs, oldest first (by run number: a run
        committed before numbering existed gets its number here, see
        :func:`~provplug.store.runs.numbered`).

        Every folder under ``runs/`` is a committed run (staging is renamed
        there after its manifest is written), so one without a readable
        manifest is damage, reported rather than skipped. On object stores a
        folder without a manifest is a run not committed (see the module):
        skipped."""
        return numbered(self._manifests())

    def _manifests(self) -> list[dict[str, Any]]:
        """The committed runs' manifests as written (in no order)."""
        self.check()
        manifests = (
            self._manifest(info)
            for info in self._listing(self.path("runs"))
            if info.type == pafs.FileType.Directory and not info.base_name.startswith(".")
        )
        return [m for m in manifests if m is not None]

    def _listing(self, folder: str, recursive: bool = False) -> list[pafs.FileInfo]:
        """The entries of a folder the store must have."""
        try:
            return list(self.fs.get_file_info(pafs.FileSelector(folder, recursive=recursive)))
        except FileNotFoundError:
            raise self._missing(folder) from None

    def _missing(self, path: str) -> StoreError:
        """The error for a file or folder of a committed run that is not there:
        the run was deleted while we read it (a retry sees it gone), or damage."""
        runs = self.path("runs") + "/"
        run = path[len(runs) :].split("/", 1)[0] if path.startswith(runs) else None
        if run and self._info(self._commit_record(run)).type == pafs.FileType.NotFound:
            return StoreError(f"run {run} of {self.uri} was deleted while this command read it: run it again")
        return DamagedStoreError(f"damaged store {self.uri}: {path} is missing")

    def _commit_record(self, run_id: str) -> str:
        """What exists exactly while ``run_id`` is committed: its folder, or
        on object stores (where a deleted run's folder outlives the deletion
        point for a while) its manifest."""
        return self.path("runs", run_id) if self.local else self.path("runs", run_id, MANIFEST)

    def _manifest(self, run: pafs.FileInfo) -> dict[str, Any] | None:
        """The manifest of the run folder ``run``; None for a folder of an
        object store that has none (a run not committed)."""
        path = f"{run.path}/{MANIFEST}"
        try:
            manifest = storefiles.read_json(self.fs, path)
        except FileNotFoundError:
            if not self.local:
                return None
            raise DamagedStoreError(
                f"damaged store {self.uri}: run {run.base_name} has no {MANIFEST} (every committed run has one)"
            ) from None
        ok = (
            isinstance(manifest, dict)
            and manifest.get("run_id") == run.base_name
            and isinstance(manifest.get("committed"), str)
            and isinstance(manifest.get("datasets"), list)
            and isinstance(manifest.get("counts"), dict)
        )
        if not ok:
            raise DamagedStoreError(f"damaged store file {path}: not the manifest of run {run.base_name}")
        return dict(manifest)

    def run_paths(self, dataset: str) -> list[str]:
        """Paths of ``dataset`` (e.g. ``"triples"``) in every committed run that has it."""
        return [self.path("runs", m["run_id"], dataset) for m in self.runs() if dataset in m.get("datasets", ())]

    def _concat(self, dataset: str, arrow_schema: pa.Schema) -> pa.Table:
        paths = self.run_paths(dataset)
        if not paths:
            return arrow_schema.empty_table()
        return pa.concat_tables(self._read_required(p, schema=arrow_schema) for p in paths)

    def _read_required(self, path: str, **kwargs: Any) -> pa.Table:
        """A Parquet file a manifest lists: missing is damage too."""
        try:
            return storefiles.read_parquet(self.fs, path, **kwargs)
        except FileNotFoundError:
            raise self._missing(path) from None

    def tables(self) -> pa.Table:
        return self._concat("tables.parquet", schema.TABLES)

    def ops(self) -> pa.Table:
        return self._concat("ops.parquet", schema.OPS)

    def values(self) -> pa.Table:
        return self._concat("values.parquet", schema.VALUES)

    def triple_files(self) -> list[str]:
        """Every Parquet file of committed *stored* triples (filesystem paths,
        sorted); readers of triples read these and the location edges' through
        :mod:`provplug.store.triples`."""
        return sorted(f for p in self.run_paths("triples") for f in self._parquet_files(p))

    def _parquet_files(self, folder: str) -> list[str]:
        """The Parquet files under ``folder``, skipping hidden and ``_``-named
        files and folders (writers' temporaries), as pyarrow datasets do."""
        return [
            f.path
            for f in self._listing(folder, recursive=True)
            if f.type == pafs.FileType.File
            and f.path.endswith(".parquet")
            and not any(part.startswith(("_", ".")) for part in f.path[len(folder) + 1 :].split("/"))
        ]

    def triples(self) -> TripleScan:
        """Every committed triple, stored in triple files or stood for by
        location edges (:class:`~provplug.store.triples.TripleScan`)."""
        return TripleScan(self)

    def stored_triples(self) -> pads.Dataset:
        """The committed triple *files* as one pyarrow dataset (read lazily;
        without the triples location edges stand for — :meth:`triples` has
        those).

        Every file's footer is read here, so a truncated file is a
        :class:`DamagedStoreError` now; damage inside a file only shows when
        the dataset is scanned, so consumers scan it inside
        ``storefiles.damage_reported("triples of STORE")``."""
        files = self.triple_files()
        for f in files:
            storefiles.parquet_metadata(self.fs, f)
        return pads.dataset(files, schema=schema.TRIPLES, format="parquet", filesystem=self.fs)

    def read_rows(
        self, run_id: str, table_id: int, where: pc.Expression | None = None, limit: int | None = None
    ) -> pa.Table | None:
        """The stored rows of a table with their row numbers (ROW_COLUMN), in
        either layout (see :mod:`provplug.schema`); None when none are stored.
        With ``limit``, at most that many rows, reading no more files than needed.

        Arrow view types (``string_view``, ``binary_view``, as Arrow-based
        writers produce) come back as ``string``/``binary``: few compute
        kernels (filter, DuckDB, JSON) take views."""
        directory = self.path("runs", run_id, "rows", str(table_id))
        infos = self.fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True, recursive=True))
        files = sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(".parquet"))
        if not files:
            if self._info(self.path("runs", run_id)).type == pafs.FileType.NotFound:
                raise self._missing(directory)  # deleted since the caller found it
            return None
        offsets = [schema.positional_offset(f) for f in files]
        if None in offsets:
            return self._read_numbered_rows(files, directory, where, limit)
        parts = []
        left = limit
        for path, offset in zip(files, offsets, strict=True):
            part = schema.without_views(self._read_head(path, left) if where is None else self._read_required(path))
            assert offset is not None
            numbers = pa.array(np.arange(offset, offset + part.num_rows, dtype=np.int64))
            part = part.append_column(schema.ROW_COLUMN, numbers)
            parts.append(part if where is None else part.filter(where))
            if left is not None:
                left -= parts[-1].num_rows
                if left <= 0:
                    break
        rows = pa.concat_tables(parts, promote_options="default")
        return rows if limit is None else rows.slice(0, limit)

    def _read_head(self, path: str, limit: int | None) -> pa.Table:
        """The first ``limit`` rows of one Parquet file (all when None)."""
        if limit is None:
            return self._read_required(path)
        try:
            with storefiles.damage_reported(path):
                return pads.dataset(path, format="parquet", filesystem=self.fs).head(limit)
        except FileNotFoundError:
            raise self._missing(path) from None

    def _read_numbered_rows(
        self, files: list[str], directory: str, where: pc.Expression | None, limit: int | None = None
    ) -> pa.Table:
        """Rows that carry ROW_COLUMN: the filter is pushed into the scan unless
        a view-typed column must be cast first."""
        with storefiles.damage_reported(directory):
            dataset = pads.dataset(files, format="parquet", filesystem=self.fs)
            plain = schema.plain_schema(dataset.schema)
            if plain == dataset.schema:
                return dataset.to_table(filter=where) if limit is None else dataset.head(limit, filter=where)
            if where is None:
                return schema.without_views(dataset.to_table() if limit is None else dataset.head(limit))
            table = schema.without_views(dataset.to_table()).filter(where)
            return table if limit is None else table.slice(0, limit)

    def stats(self) -> dict[str, int]:
        """Counts over the committed runs, from their manifests. ``triples``
        are the stored ones; ``location_triples`` those the runs' location
        edges (``location_edges``, :mod:`provplug.location`) stand for, which
        every reader sees as if they were stored."""
        runs = self.runs()
        keys = ("tables", "ops", "values", "triples", "location_edges", "location_triples")
        return {"runs": len(runs), **{k: sum(int(m["counts"].get(k, 0)) for m in runs) for k in keys}}

    def verify(self) -> dict[str, int]:
        """Check every committed run without reading its bulk data and return
        :meth:`stats`; raise :class:`DamagedStoreError` naming the first damage.

        Reads each manifest and catalogue file, and the Parquet footers of the
        triples and stored rows (a truncated file has no footer); the
        footers' triple counts must add up to the manifest's."""
        runs = self.runs()
        for manifest in runs:
            self._verify_run(manifest)
        return self.stats()

    def _verify_run(self, manifest: dict[str, Any]) -> None:
        run_id = manifest["run_id"]
        for dataset in manifest["datasets"]:
            path = self.path("runs", run_id, dataset)
            if dataset in ("tables.parquet", "ops.parquet"):
                self._read_required(path, schema=schema.TABLES if dataset == "tables.parquet" else schema.OPS)
            elif dataset.endswith(".parquet"):
                self._footer(path)
            elif dataset == LOCATIONS:
                self._verify_locations(manifest, path)
            elif dataset.endswith(".json"):
                storefiles.read_json(self.fs, path)
            elif dataset == "triples":
                found = sum(self._footer(f).num_rows for f in self._parquet_files(path))
                expected = int(manifest["counts"].get("triples", 0))
                if found != expected:
                    raise DamagedStoreError(
                        f"damaged store {self.uri}: run {run_id} holds {found:,} triples, its manifest says {expected:,}"
                    )
            else:
                for f in self._parquet_files(path):
                    self._footer(f)

    def _verify_locations(self, manifest: dict[str, Any], path: str) -> None:
        """The run's location edges parse and stand for the triples its manifest counts."""
        from provplug.store.locations import read_locations

        try:
            edges = read_locations(self.fs, path)
        except FileNotFoundError:
            raise self._missing(path) from None
        found = sum(e.triple_count for e in edges)
        expected = int(manifest["counts"].get("location_triples", 0))
        if found != expected:
            raise DamagedStoreError(
                f"damaged store {self.uri}: run {manifest['run_id']}'s location edges stand for {found:,} triples,"
                f" its manifest says {expected:,}"
            )

    def _footer(self, path: str) -> pq.FileMetaData:
        try:
            return storefiles.parquet_metadata(self.fs, path)
        except FileNotFoundError:
            raise self._missing(path) from None


class RunTransaction:
    """One run being staged. Use through :meth:`ParquetStore.transaction`."""

    def __init__(self, store: ParquetStore, kind: str) -> None:
        self.store = store
        self.kind = kind
        self.started = utc_now()
        self.run_id = f"{self.started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}"
        # Object stores cannot rename a folder: the run is written in place (see the module).
        self.in_place = not store.local
        self.staging = store.path("runs" if self.in_place else "_staging", self.run_id)
        self.committed = False
        if store.local:
            # Not recursive: a missing _staging means the store is being removed (see remove_if_unused).
            os.mkdir(self.staging)
        # The owner record stays until the commit's rename: while it is here,
        # garbage collection can tell whether this writer is alive. On object
        # stores it is the run folder's first object (no folder marker before
        # it): a folder there never lacks one before its commit.
        store._write_text_atomic(self.path(OWNER), storefiles.process_record(run_id=self.run_id))
        self.reserved: list[tuple[str, int]] = []
        self.tables: list[TableInfo] = []
        self.ops: list[OpInfo] = []
        self.datasets: set[str] = set()
        self.values_count = 0
        self.number: int | None = None  # the run's number, once committed
        # Extra entries of the manifest (a capture's "reduction", see provplug.reduce;
        # its context: entry point, git commit, label, tags, see provplug.ingest.runcontext).
        self.annotations: dict[str, Any] = {}

    def path(self, *parts: str) -> str:
        return "/".join([self.staging, *parts])

    def spark_path(self, *parts: str) -> str:
        return self.store.to_spark_path(self.path(*parts))

    def reserve(self, kind: str) -> int:
        ident = self.store.reserve_id(kind, owner=self.run_id, announce=lambda c: self._log_reserved((kind, c)))
        self.reserved.append((kind, ident))
        return ident

    def _log_reserved(self, candidate: tuple[str, int]) -> None:
        """Log our ids, and the one we are about to try, in the staging dir,
        so garbage collection can release them if we die at any point (it
        frees only reservations that hold our run id)."""
        text = "\n".join(f"{k}:{i}" for k, i in (*self.reserved, candidate))
        self.store._write_text_atomic(self.path(RESERVATIONS), text)

    def add_table(self, table: TableInfo) -> None:
        self.tables.append(table)

    def add_op(self, op: OpInfo) -> None:
        self.ops.append(op)

    def mark_dataset(self, name: str) -> None:
        """Record that the caller wrote dataset ``name`` into the staging dir."""
        self.datasets.add(name)

    # -- commit / abort ------------------------------------------------------
    def commit(self) -> None:
        """Write the catalogue and the manifest, then rename the staging
        folder into ``runs/``: the commit point. The owner record and the
        reservation log go along (so a crash before the rename leaves a
        folder garbage collection recognises) and are dropped after it.
        On object stores the run is in place already: the manifest's one
        write is the commit point."""
        fs = self.store.fs
        self._write_catalogue()
        counts = {
            "tables": len(self.tables),
            "ops": len(self.ops),
            "values": self.values_count
            or sum(len(t.columns) * (t.rows or 0) for t in self.tables if t.origin != "imported"),
            "triples": self._row_count("triples"),
            **self._location_counts(),
        }
        number = self.number = self.store.reserve_run_number(
            self.run_id, announce=lambda c: self._log_reserved((RUN_NUMBERS, c))
        )
        self.reserved.append((RUN_NUMBERS, number))  # released if the commit fails before the rename
        ended = utc_now().isoformat()  # after the number: commit times follow the numbers
        manifest = {
            "run_id": self.run_id,
            "number": number,
            "kind": self.kind,
            "status": "committed",
            "started": self.started.isoformat(),
            "ended": ended,
            "committed": ended,
            "datasets": sorted(self.datasets),
            "counts": counts,
        }
        manifest.update((k, v) for k, v in self.annotations.items() if k not in manifest)
        self.store.write_text(self.path(MANIFEST), json.dumps(manifest, indent=1))  # object stores: the commit point
        target = self.store.path("runs", self.run_id)
        if not self.in_place:
            os.rename(self.staging, target)  # the commit point
        self.committed = True
        for bookkeeping in (OWNER, RESERVATIONS):
            with contextlib.suppress(OSError):  # readers ignore them; a leftover is harmless
                fs.delete_file(f"{target}/{bookkeeping}")
        # DEBUG: the capture or import that made the run says so at INFO.
        logger.debug("committed run %s as #%d to %s: %s", self.run_id, number, self.store.uri, counts)

    def _write_catalogue(self) -> None:
        fs = self.store.fs
        pq.write_table(_tables_table(self.tables), self.path("tables.parquet"), filesystem=fs)
        pq.write_table(_ops_table(self.ops), self.path("ops.parquet"), filesystem=fs)
        self.datasets.update({"tables.parquet", "ops.parquet"})

    def _location_counts(self) -> dict[str, int]:
        """Edges and the triples they stand for, when the run recorded location edges."""
        if LOCATIONS not in self.datasets:
            return {}
        from provplug.store.locations import read_locations

        edges = read_locations(self.store.fs, self.path(LOCATIONS))
        return {"location_edges": len(edges), "location_triples": sum(e.triple_count for e in edges)}

    def _row_count(self, dataset: str) -> int:
        if dataset not in self.datasets:
            return 0
        # Counted as ParquetStore.verify counts them: the footers of the dataset's Parquet files.
        files = self.store._parquet_files(self.path(dataset))
        return sum(storefiles.parquet_metadata(self.store.fs, f).num_rows for f in files)

    def abort(self) -> None:
        if self.committed:
            return  # a failure after the commit point (the run is whole): nothing to undo
        logger.debug("aborted run %s of %s: its staging folder and reserved ids go", self.run_id, self.store.uri)
        with contextlib.suppress(FileNotFoundError, OSError):
            self.store.fs.delete_dir(self.staging)
        for kind, ident in self.reserved:
            with contextlib.suppress(FileNotFoundError, OSError):
                self.store.release_id(kind, ident)


def _tables_table(tables: Sequence[TableInfo]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "table_id": t.table_id,
                "name": t.name,
                "run_id": t.run_id,
                "origin": t.origin,
                "columns": list(t.columns),
                "rows": t.rows,
                "stored_rows": t.stored_rows,
                "namespace": t.namespace,
                "dataset": t.dataset,
            }
            for t in tables
        ],
        schema=schema.TABLES,
    )


def _ops_table(ops: Sequence[OpInfo]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "op_id": o.op_id,
                "name": o.name,
                "run_id": o.run_id,
                "kind": o.kind,
                "inputs": list(o.inputs),
                "outputs": list(o.outputs),
                "operations": list(o.operations),
                "params": json.dumps(dict(o.params), default=str, sort_keys=True),
                "started": o.started,
                "finished": o.finished,
                "triples": o.triples,
            }
            for o in ops
        ],
        schema=schema.OPS,
    )
