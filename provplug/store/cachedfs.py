"""Few requests on object storage: a store's filesystem that remembers what
it has read of the store's immutable files (issue 27).

On S3 every call is a round trip: opening a file is a ``HEAD`` and a ``GET``
(a Parquet file: a ``GET`` for the footer and one per column chunk),
checking that the store exists is five requests, and a query asks for the
same small files many times. :func:`cached_filesystem` wraps the store's
pyarrow filesystem (only off local disk) so that

* a file of a **sealed** folder is fetched whole by one ranged ``GET``
  (up to :data:`WHOLE_FILE_BYTES`; its size comes with it, no ``HEAD``) and
  then served from memory, and so are its file information and the
  listings under the folder; larger files are read as before;
* the store's root and its format marker are looked up once per opened store;
* whole reads of other files (manifests, pointers) are one ``GET``, not two
  requests; small writes are one ``PUT``, not a three-request multipart upload.

What is sealed, i.e. never changes once it is there: a committed run's folder
``runs/RUN/`` (once this process has read its ``_manifest.json``, the commit
record: nothing under it is rewritten) and an index generation ``index/GEN/``
(once its ``meta.json``, written last, has been read), except their
bookkeeping files (``_``-named: owner records, reservation logs, deletion
records). Run ids and generation names hold a random part, so a path names one
content for good; the memory of sealed files is shared by every store opened
in the process (bounded by :data:`CACHE_BYTES`, least recently used first).
Nothing else is cached: listings of ``runs/`` and ``index/``, manifests and
``CURRENT`` are read afresh each time, so new and deleted runs and a new index
generation are seen as before. Whatever this process writes, moves or
deletes through the wrapper drops what it had cached at those paths.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

# A file of a sealed folder up to this size is fetched whole by its first read
# (index buckets, catalogue files, stored rows of a small table); larger ones
# are read by ranges as pyarrow reads them.
WHOLE_FILE_BYTES = 8 << 20
# The process's memory of sealed files, shared by every opened store.
CACHE_BYTES = 256 << 20
# Writes up to this size are buffered and sent as one PUT.
SINGLE_PUT_BYTES = 8 << 20

RUNS = "runs"
INDEX = "index"
MANIFEST = "_manifest.json"  # provplug.store.parquet.MANIFEST (a run's commit record)
INDEX_META = "meta.json"  # provplug.index.layout.META (a generation's, written last)
MARKER = "provplug-store.json"  # provplug.store.parquet.MARKER

# Fetch(path, limit) -> (the first ``limit`` bytes, the object's size); FileNotFoundError if absent.
Fetch = Callable[[str, int], tuple[bytes, int]]
# Put(path, data): write one object whole.
Put = Callable[[str, bytes], None]


class SealedFiles:
    """The bytes and file information of sealed files, by path, bounded by bytes (LRU)."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self.budget = budget
        self.used = 0
        self.data: OrderedDict[str, bytes] = OrderedDict()
        self.sizes: dict[str, int] = {}
        self.listings: dict[tuple[str, bool], list[pafs.FileInfo]] = {}
        self.lock = threading.Lock()

    def get(self, path: str) -> bytes | None:
        with self.lock:
            data = self.data.get(path)
            if data is not None:
                self.data.move_to_end(path)
            return data

    def put(self, path: str, data: bytes) -> None:
        with self.lock:
            self.sizes[path] = len(data)
            if path in self.data or len(data) > self.budget:
                return
            while self.data and self.used + len(data) > self.budget:
                _, old = self.data.popitem(last=False)
                self.used -= len(old)
            self.data[path] = data
            self.used += len(data)

    def forget(self, prefix: str) -> None:
        """Drop ``prefix`` and everything under it, and the listings that show it."""
        with self.lock:
            for path in [p for p in self.data if _under(p, prefix)]:
                self.used -= len(self.data.pop(path))
            for path in [p for p in self.sizes if _under(p, prefix)]:
                del self.sizes[path]
            for key in [k for k in self.listings if _under(prefix, k[0]) or _under(k[0], prefix)]:
                del self.listings[key]


# Sealed files by store (its URI): two stores never share an entry.
_STORES: dict[str, SealedFiles] = {}
_STORES_LOCK = threading.Lock()


def sealed_files_of(space: str) -> SealedFiles:
    """The process's memory of the sealed files of the store at ``space`` (its URI)."""
    with _STORES_LOCK:
        return _STORES.setdefault(space, SealedFiles())


def forget_sealed_files() -> None:
    """Empty the process's memory of sealed files (a benchmark's cold start)."""
    with _STORES_LOCK:
        _STORES.clear()


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class CachingHandler(pafs.FileSystemHandler):  # type: ignore[misc]  # pyarrow ships no stubs for it
    """A store's filesystem (``base``, rooted at ``root``) with the memory
    described in the module. ``fetch`` and ``put`` are single-request reads and
    writes of whole objects (S3 through boto3), or None to use ``base``'s."""

    def __init__(
        self,
        base: pafs.FileSystem,
        root: str,
        space: str,
        fetch: Fetch | None = None,
        put: Put | None = None,
    ) -> None:
        self.base = base
        self.root = root.rstrip("/")
        self.space = space
        self.fetch = fetch
        self.put = put
        self._sealed: set[str] = set()  # folders whose commit record this handler has read
        self._stable: dict[str, pafs.FileInfo] = {}  # the store's root and marker, once seen
        self._marker: bytes | None = None  # the format marker's bytes, once read (written once)
        self._made: set[str] = set()  # folders this handler made (each is made once)
        self._lock = threading.Lock()

    @property
    def files(self) -> SealedFiles:
        return sealed_files_of(self.space)

    @property
    def _runs(self) -> str:
        return f"{self.root}/{RUNS}"

    # -- what is sealed -----------------------------------------------------------
    def _folder(self, path: str) -> str | None:
        """The run or generation folder ``path`` lies in (None: elsewhere)."""
        if not path.startswith(self.root + "/"):
            return None
        parts = path[len(self.root) + 1 :].split("/")
        if len(parts) < 2 or parts[1].startswith("."):
            return None
        if parts[0] == RUNS or (parts[0] == INDEX and parts[1].startswith("gen-")):
            return f"{self.root}/{parts[0]}/{parts[1]}"
        return None

    def _record(self, folder: str) -> str:
        return f"{folder}/{MANIFEST if folder.startswith(f'{self.root}/{RUNS}/') else INDEX_META}"

    def sealed(self, path: str) -> bool:
        """Whether ``path`` is a file or folder of a sealed folder that never changes."""
        folder = self._folder(path)
        if folder is None or folder not in self._sealed:
            return False
        if path == f"{folder}/{MANIFEST}":
            return False  # a run's commit record goes when the run is deleted: read afresh
        inside = path[len(folder) + 1 :].split("/") if path != folder else []
        return path == self._record(folder) or not any(part.startswith("_") for part in inside)

    def _is_record(self, path: str) -> bool:
        """Whether ``path`` is the commit record of a run or generation folder."""
        folder = self._folder(path)
        return folder is not None and path == self._record(folder)

    def _note_read(self, path: str) -> None:
        """A commit record read whole seals its folder."""
        if self._is_record(path):
            with self._lock:
                self._sealed.add(path.rsplit("/", 1)[0])

    def _changed(self, path: str) -> None:
        """This process wrote, moved or deleted ``path`` (a file or a folder)."""
        self.files.forget(path)
        with self._lock:
            self._stable = {p: i for p, i in self._stable.items() if not _under(p, path)}
            self._sealed = {f for f in self._sealed if not (_under(f, path) or _under(path, f))}
            self._made = {f for f in self._made if not _under(f, path)}
            if _under(f"{self.root}/{MARKER}", path):
                self._marker = None

    # -- FileSystemHandler --------------------------------------------------------------
    def get_type_name(self) -> str:
        return f"provplug-cached-{self.base.type_name}"

    def normalize_path(self, path: str) -> str:
        return str(self.base.normalize_path(path))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CachingHandler) and self.base.equals(other.base) and self.root == other.root

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.root)

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy in another process starts with nothing cached, and no client of ours.
        return (CachingHandler, (self.base, self.root, self.space))

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        found: dict[str, pafs.FileInfo] = {}
        for path in paths:
            known = self._known_info(path)
            if known is not None:
                found[path] = known
        asked = [p for p in paths if p not in found]
        if asked:
            for path, info in zip(asked, self.base.get_file_info(asked), strict=True):
                found[path] = info
                self._remember_info(path, info)
        return [found[p] for p in paths]

    def _known_info(self, path: str) -> pafs.FileInfo | None:
        stable = self._stable.get(path)
        if stable is not None:
            return stable
        if not self.sealed(path):
            return None
        size = self.files.sizes.get(path)
        if size is None and self.fetch is not None:
            try:
                size = self._fetch_sealed(path)  # one ranged GET: its size, and its bytes when small
            except FileNotFoundError:
                return None  # the base filesystem says how it is missing
        return None if size is None else pafs.FileInfo(path, pafs.FileType.File, size=size)

    def _remember_info(self, path: str, info: pafs.FileInfo) -> None:
        stable = {self.root: pafs.FileType.Directory, f"{self.root}/{MARKER}": pafs.FileType.File}
        if stable.get(path) == info.type:
            self._stable[path] = info
        elif info.type == pafs.FileType.File and info.size is not None and self.sealed(path):
            with self.files.lock:
                self.files.sizes[path] = int(info.size)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base_dir = selector.base_dir.rstrip("/")
        key = (base_dir, bool(selector.recursive))
        # A run's own folder lists its bookkeeping files too, which its writer removes after the commit.
        sealed = self.sealed(base_dir) and not (base_dir == self._folder(base_dir) and _under(base_dir, self._runs))
        if sealed:
            listed = self.files.listings.get(key)
            if listed is not None:
                return list(listed)
        infos = list(self.base.get_file_info(selector))
        for info in infos:
            self._remember_info(info.path, info)
        if sealed:
            with self.files.lock:
                self.files.listings[key] = infos
        return infos

    def create_dir(self, path: str, recursive: bool) -> None:
        path = path.rstrip("/")
        if path in self._made:
            return  # on S3 a second make is a HEAD and a PUT per folder of the path
        self.base.create_dir(path, recursive=recursive)
        with self._lock:
            self._made.add(path)

    def delete_dir(self, path: str) -> None:
        self._changed(path)
        self.base.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._changed(path)
        self.base.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        self._changed(self.root)
        self.base.delete_dir_contents("/", accept_root_dir=True)

    def delete_file(self, path: str) -> None:
        self._changed(path)
        self.base.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self._changed(src)
        self._changed(dest)
        self.base.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self._changed(dest)
        self.base.copy_file(src, dest)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        if path == f"{self.root}/{MARKER}":
            if self._marker is None:
                self._marker = self._read(path)  # written once, when the store is made
            return pa.BufferReader(self._marker)
        if (self.sealed(path) and self._cached_or_small(path)) or self._is_record(path):
            return pa.BufferReader(self._whole(path))  # a commit record (a small JSON) seals its folder
        if self.fetch is not None:
            # A stream is read whole: one GET (up to WHOLE_FILE_BYTES), not a HEAD and a GET.
            data, size = self.fetch(path, WHOLE_FILE_BYTES)
            if len(data) == size:
                return pa.BufferReader(data)
        return self.base.open_input_stream(path)

    def open_input_file(self, path: str) -> pa.NativeFile:
        if self.sealed(path) and self._cached_or_small(path):
            return pa.BufferReader(self._whole(path))
        return self.base.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        self._changed(path)
        if self.put is None:
            return self.base.open_output_stream(path, metadata=metadata)
        return pa.PythonFile(_PutOnClose(path, self.put, lambda: self.base.open_output_stream(path)), mode="w")

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        self._changed(path)
        return self.base.open_append_stream(path, metadata=metadata)

    # -- reading whole files ----------------------------------------------------------
    def _cached_or_small(self, path: str) -> bool:
        if self.files.get(path) is not None:
            return True
        size = self.files.sizes.get(path)
        if size is None and self.fetch is not None:
            size = self._fetch_sealed(path)
        elif size is None:
            info = self.base.get_file_info(path)
            self._remember_info(path, info)
            size = info.size if info.type == pafs.FileType.File else None
        return size is not None and size <= WHOLE_FILE_BYTES

    def _fetch_sealed(self, path: str) -> int:
        """Fetch a sealed file's first :data:`WHOLE_FILE_BYTES` (all of it
        when it is no larger) in one request; remember its size (and bytes)."""
        assert self.fetch is not None
        data, size = self.fetch(path, WHOLE_FILE_BYTES)
        if len(data) == size:
            self.files.put(path, data)
        else:
            with self.files.lock:
                self.files.sizes[path] = size
        return size

    def _whole(self, path: str) -> bytes:
        data = self.files.get(path)
        if data is None:
            data = self._read(path)
        self._note_read(path)
        if self.sealed(path):
            self.files.put(path, data)
        return data

    def _read(self, path: str) -> bytes:
        """The whole file, in one request when ``fetch`` can."""
        if self.fetch is not None:
            return self.fetch(path, -1)[0]
        with self.base.open_input_stream(path) as stream:
            return bytes(stream.read())


class _PutOnClose(io.RawIOBase):
    """A write stream that sends a small object as one PUT when closed, and
    falls back to the filesystem's own stream once it outgrows that."""

    def __init__(self, path: str, put: Put, open_stream: Callable[[], pa.NativeFile]) -> None:
        super().__init__()
        self.path = path
        self._put = put
        self._open_stream = open_stream
        self._buffer = io.BytesIO()
        self._stream: pa.NativeFile | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if self._stream is None and self._buffer.tell() + len(view) > SINGLE_PUT_BYTES:
            self._stream = self._open_stream()
            self._stream.write(self._buffer.getvalue())
            self._buffer = io.BytesIO()
        if self._stream is not None:
            self._stream.write(view)
        else:
            self._buffer.write(view)
        return len(view)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._stream is not None:
                self._stream.close()
            else:
                self._put(self.path, self._buffer.getvalue())
        finally:
            super().close()


def cached_filesystem(
    base: pafs.FileSystem, root: str, space: str, fetch: Fetch | None = None, put: Put | None = None
) -> pafs.FileSystem:
    """``base`` with the memory of :class:`CachingHandler` for the store at
    ``space`` (its URI), rooted at ``root`` (a local filesystem is returned as it is)."""
    if isinstance(base, pafs.LocalFileSystem):
        return base
    return pafs.PyFileSystem(CachingHandler(base, root, space, fetch, put))


def base_filesystem(fs: pafs.FileSystem) -> pafs.FileSystem:
    """The filesystem under :func:`cached_filesystem`'s wrapper (``fs`` itself if unwrapped)."""
    handler = getattr(fs, "handler", None) if isinstance(fs, pafs.PyFileSystem) else None
    return handler.base if isinstance(handler, CachingHandler) else fs


def changed(fs: pafs.FileSystem, path: str) -> None:
    """Tell the wrapper (if any) that ``path`` was written other than through it."""
    handler = getattr(fs, "handler", None) if isinstance(fs, pafs.PyFileSystem) else None
    if isinstance(handler, CachingHandler):
        handler._changed(path)
