"""Mapped index files: written when an index is built, memory-mapped by queries.

Each bucket of ``triples``, ``setdeps``, ``rsetdeps`` and ``value_sets`` is
written once more as an Arrow IPC file sorted by the key its queries look up
(layout: :mod:`provplug.index.layout`), so a set's rows are one range of the
file, and a query touches only the pages of its own sets.

Touching them is not enough when they are cold. A query reads a few thousand
sets scattered over the files; left to page faults, every page is one
synchronous read, and the kernel stops reading around faults in a file it
sees read at random. A query at 24 times the data then waits for thousands of
small reads, one after the other, where the same query on a store small
enough to be read around in a few faults does not. So lookups go in phases
over every bucket a query touches (:class:`MappedRows`): the pages holding the
wanted keys are found from the dataset's *fences* (every ``FENCE_ROWS``-th key
of each bucket, one small file per dataset) and asked of the kernel all at
once (``posix_fadvise(WILLNEED)``: the reads go out together), searched, and
then the pages of the rows found are asked for all at once and gathered. A
lookup costs a few round trips to the disk, whatever the number of sets.
"""

from __future__ import annotations

import itertools
import json
import mmap
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from numpy.typing import NDArray

from provplug.errors import DamagedStoreError
from provplug.index import integrity, layout
from provplug.store import files as storefiles


def gather_ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, e)`` for every pair, without a Python loop."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total, dtype=np.int64)


MAPPED_DIR = "mapped"
MAPPED_MANIFEST = f"{MAPPED_DIR}/manifest.json"
MAPPED_FORMAT = 1
# dataset -> (key it is sorted by, other columns); one file per bucket.
MAPPED_BUCKETED: dict[str, tuple[str, tuple[str, ...]]] = {
    "triples": ("dst_csid", ("src", "dst", "op")),
    "setdeps": ("dst_csid", ("src_csid",)),
    "rsetdeps": ("src_csid", ("dst_csid",)),
    "value_sets": ("value_id", ("ccid", "csid")),
}
MAPPED_SETS_BY_CCID = f"{MAPPED_DIR}/sets_by_ccid.arrow"  # sets.parquet's (ccid, csid) by ccid
# One fence per page of int64 keys: a key's first and last rows are each found
# in one page named by the fences.
FENCE_ROWS = 512
FENCES = "fences"  # the manifest's key: dataset -> first fence of each bucket (and the end)
STEP = 32  # a key's page is searched every STEP rows, then in the window found
HEAD_BYTES = 64 << 10  # what opening an IPC file reads at each end (schema, batch header, footer)
_CAN_ADVISE = hasattr(os, "posix_fadvise")
Side = Literal["left", "right"]


def fences_file(dataset: str) -> str:
    return f"{MAPPED_DIR}/{dataset}/fences.arrow"


def bucket_file(dataset: str, bucket: int) -> str:
    return f"{MAPPED_DIR}/{dataset}/bucket={bucket}.arrow"


# -- rows sorted by a key ------------------------------------------------------------


@dataclass
class SortedRows:
    """Rows sorted by ``key``; ``cols`` are aligned arrays (held in memory)."""

    key: np.ndarray
    cols: dict[str, np.ndarray]

    def nbytes(self) -> int:
        return int(self.key.nbytes + sum(c.nbytes for c in self.cols.values()))

    def spans(self, keys: np.ndarray, plan: KeyPages | None = None) -> tuple[np.ndarray, np.ndarray]:
        """First and end row of each of ``keys`` (equal when absent);
        ``plan``: what :meth:`will_need_keys` returned for them."""
        return np.searchsorted(self.key, keys, side="left"), np.searchsorted(self.key, keys, side="right")

    def ranges(self, keys: np.ndarray) -> np.ndarray:
        """Row positions whose key is in ``keys``."""
        return gather_ranges(*self.spans(keys))

    def will_need_keys(self, keys: np.ndarray) -> KeyPages | None:
        """Ask for the pages :meth:`spans` will read (nothing to ask: in memory)."""
        return None

    def will_need_rows(self, starts: np.ndarray, ends: np.ndarray, columns: Iterable[str]) -> None:
        """Ask for the pages of rows ``starts[i]:ends[i]`` of ``columns``."""


@dataclass(frozen=True)
class KeyPages:
    """The rows ``[lo, hi)`` holding each key's first (left) and end (right)
    row: the pages a search reads."""

    left: tuple[np.ndarray, np.ndarray]
    right: tuple[np.ndarray, np.ndarray]


@dataclass
class MappedRows(SortedRows):
    """A mapped file's rows: its arrays are views of the mapping's pages.
    ``offsets`` is where each array (the key's under ``key_name``) starts in
    the file; ``fences`` the bucket's fences (None: a generation without)."""

    path: str = ""
    key_name: str = ""
    offsets: dict[str, int] = field(default_factory=dict)
    fences: np.ndarray | None = None
    # Pages of the file this process has asked for (and so read): not asked for again.
    known: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def spans(self, keys: np.ndarray, plan: KeyPages | None = None) -> tuple[np.ndarray, np.ndarray]:
        if plan is None:
            return super().spans(keys)
        # Not np.searchsorted even on known pages: its probes above a key's
        # page may be cold, and read one at a time.
        starts = self._search(keys, "left", *plan.left)
        ends = starts + self._count(keys, np.less_equal, starts, plan.right[1], 1, STEP - 1)
        long = ends - starts == STEP - 1  # a key's rows may run past the window: search its end
        if long.any():
            ends[long] = self._search(keys[long], "right", plan.right[0][long], plan.right[1][long])
        return starts, ends

    def _pages(self, keys: np.ndarray, side: Side) -> tuple[np.ndarray, np.ndarray]:
        """The rows ``[lo, hi)`` that hold each key's boundary on ``side``."""
        assert self.fences is not None
        fence = np.searchsorted(self.fences, keys, side=side)
        lo = np.maximum(fence - 1, 0) * FENCE_ROWS
        return lo, np.minimum(fence * FENCE_ROWS, len(self.key))

    def _search(self, keys: np.ndarray, side: Side, lo: NDArray[np.int64], hi: np.ndarray) -> NDArray[np.int64]:
        """``np.searchsorted(self.key, keys, side)`` reading only rows
        ``lo:hi`` of each key (the page its fences name), all keys at once:
        every ``STEP``-th row of the page narrows it to a window of
        ``STEP - 1`` rows, which is then counted."""
        before = np.less if side == "left" else np.less_equal  # the rows before a key's boundary
        probes = self._count(keys, before, lo, hi, STEP, FENCE_ROWS // STEP)
        start = lo + np.maximum(STEP * (probes - 1) + 1, 0)  # rows from lo to here are before the boundary
        return start + self._count(keys, before, start, hi, 1, STEP - 1)

    def _count(
        self, keys: np.ndarray, before: np.ufunc, start: NDArray[np.int64], end: np.ndarray, step: int, n: int
    ) -> NDArray[np.int64]:
        """How many of rows ``start, start + step, ...`` (``n`` of them, below ``end``) are before each key."""
        rows = start[:, None] + step * np.arange(n)
        values = self.key[np.minimum(rows, len(self.key) - 1)]
        return cast("NDArray[np.int64]", (before(values, keys[:, None]) & (rows < end[:, None])).sum(axis=1))

    def will_need_keys(self, keys: np.ndarray) -> KeyPages | None:
        if self.fences is None or len(self.key) == 0:
            return None
        left, right = self._pages(keys, "left"), self._pages(keys, "right")
        base = self.offsets[self.key_name]
        self._ask(base + 8 * np.concatenate([left[0], right[0]]), base + 8 * np.concatenate([left[1], right[1]]))
        return KeyPages(left, right)

    def will_need_rows(self, starts: np.ndarray, ends: np.ndarray, columns: Iterable[str]) -> None:
        bases = [self.offsets[c] for c in columns]
        if bases:
            self._ask(np.concatenate([b + 8 * starts for b in bases]), np.concatenate([b + 8 * ends for b in bases]))

    def _ask(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """Ask for the pages of bytes ``starts[i]:ends[i]`` this process has
        not asked for yet (the others it has read), in one call."""
        page = mmap.PAGESIZE
        some = ends > starts
        pages = gather_ranges(starts[some] // page, (ends[some] - 1) // page + 1)
        pages = np.unique(pages[~self.known[pages]])
        if len(pages) == 0:
            return
        self.known[pages] = True
        runs = np.flatnonzero(np.diff(pages, prepend=-2) != 1)  # consecutive pages: one range
        ends_at = np.append(runs[1:], len(pages)) - 1
        will_need(self.path, pages[runs] * page, (pages[ends_at] + 1) * page)


# -- asking the kernel for pages ---------------------------------------------------------


def will_need(path: str, starts: np.ndarray, ends: np.ndarray) -> None:
    """Start reading bytes ``starts[i]:ends[i]`` of ``path`` into the page
    cache, all at once, without waiting (a no-op where the OS has no
    ``posix_fadvise``: the pages are then read when touched)."""
    if not _CAN_ADVISE or len(starts) == 0:
        return
    page = mmap.PAGESIZE
    first = np.asarray(starts, dtype=np.int64) // page * page
    end = -(-np.asarray(ends, dtype=np.int64) // page) * page
    keep = end > first
    fd = os.open(path, os.O_RDONLY)
    try:
        for lo, hi in _coalesced(first[keep], end[keep]):
            os.posix_fadvise(fd, lo, hi - lo, os.POSIX_FADV_WILLNEED)
    finally:
        os.close(fd)


def will_need_heads(paths: Iterable[tuple[str, int]]) -> None:
    """Start reading both ends of each ``(path, size)`` (what opening it reads)."""
    for path, size in paths:
        tail = max(size - HEAD_BYTES, 0)
        will_need(path, np.array([0, tail]), np.array([min(HEAD_BYTES, size), size]))


def _coalesced(starts: np.ndarray, ends: np.ndarray) -> list[tuple[int, int]]:
    """The byte ranges merged where they touch or overlap (one advice each)."""
    if len(starts) == 0:
        return []
    if len(starts) > 1 and (starts[1:] < starts[:-1]).any():  # lookups give them sorted: no sort then
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    ends = np.maximum.accumulate(ends)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > ends[:-1]
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:] - 1, len(starts) - 1)
    return list(zip(starts[firsts].tolist(), ends[lasts].tolist(), strict=True))


# -- reading -----------------------------------------------------------------------------


def map_sorted(fs: pafs.FileSystem, path: str, key: str, size: int, fences: np.ndarray | None = None) -> MappedRows:
    """A mapped file as zero-copy arrays over its pages (one record batch)."""
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File:
        raise FileNotFoundError(2, "mapped index file missing", path)
    if info.size != size:
        raise DamagedStoreError(f"damaged store file {path}: {info.size} bytes where its manifest says {size}")
    with storefiles.damage_reported(path):
        pages = _map_at_random(path)
        base = pages.address
        reader = pa.ipc.open_file(pa.BufferReader(pages))
        if reader.num_record_batches != 1:
            raise pa.ArrowInvalid(f"{reader.num_record_batches} record batches, not 1")
        batch = reader.get_batch(0)
        arrays = {name: _view(batch.column(i), path) for i, name in enumerate(batch.schema.names)}
        offsets = {
            name: batch.column(i).buffers()[1].address - base + batch.column(i).offset * 8
            for i, name in enumerate(batch.schema.names)
        }
    known = np.zeros(-(-size // mmap.PAGESIZE), dtype=bool)
    return MappedRows(arrays.pop(key), arrays, path, key, offsets, fences, known)


def _map_at_random(path: str) -> pa.Buffer:
    """``path`` mapped read-only, its pages read only when touched or asked
    for (``MADV_RANDOM``). Without it a fault reads the readahead window
    around the page (8 MiB on some disks): a query touching a few hundred
    pages of a large file would read gigabytes."""
    with open(path, "rb") as file:
        pages = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)  # the mapping outlives the descriptor
    if hasattr(pages, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        pages.madvise(mmap.MADV_RANDOM)
    return pa.py_buffer(pages)


def read_fences(fs: pafs.FileSystem, path: str, size: int, starts: list[int]) -> list[np.ndarray]:
    """A dataset's fences file, split by bucket (``starts``: each bucket's first fence, then the end)."""
    will_need(path, np.array([0]), np.array([size]))  # read it in one go, not page by page
    fences = np.array(map_sorted(fs, path, "key", size).key)  # a copy: small, and kept
    if len(starts) < 1 or starts[-1] != len(fences):
        raise DamagedStoreError(
            f"damaged store file {path}: {len(fences)} fences where the manifest says {starts[-1:]}"
        )
    return [fences[a:b] for a, b in itertools.pairwise(starts)]


def _view(column: pa.Array, path: str) -> np.ndarray:
    """An int64 column without nulls as a NumPy view of its buffer. (Not
    ``to_numpy``: on a mapped file it reads every page of the column.)"""
    validity, data = column.buffers()
    if column.type != pa.int64() or validity is not None or data is None:
        raise DamagedStoreError(f"damaged store file {path}: a column is not int64 without nulls")
    return np.frombuffer(data, dtype=np.int64, count=len(column), offset=column.offset * 8)


# -- writing -----------------------------------------------------------------------------


def write_mapped(fs: pafs.FileSystem, gen_dir: str, buckets: Mapping[str, int] | None = None) -> dict[str, int]:
    """Write the mapped files of the generation in ``gen_dir`` (its Parquet
    buckets and ``sets.parquet`` complete; ``buckets`` as in meta.json), the
    datasets' fences and the manifest, last: a generation has all of them or
    none. One bucket is in memory at a time. Return ``{relative path: size}``
    of what was written."""
    counts = {**default_buckets(), **(buckets or {})}
    written: dict[str, int] = {}
    fence_starts: dict[str, list[int]] = {}
    for dataset, (key, columns) in MAPPED_BUCKETED.items():
        fences: list[np.ndarray] = []
        for b in range(int(counts[dataset])):
            table = _read_bucket(fs, f"{gen_dir}/{dataset}/bucket={b}", [key, *columns])
            relative = bucket_file(dataset, b)
            written[relative], keys = _write_sorted(fs, f"{gen_dir}/{relative}", table, key)
            fences.append(keys[::FENCE_ROWS])
        fence_starts[dataset] = [0, *np.cumsum([len(f) for f in fences]).tolist()]
        all_fences = pa.table({"key": np.concatenate(fences) if fences else np.empty(0, np.int64)})
        written[fences_file(dataset)], _ = _write_sorted(fs, f"{gen_dir}/{fences_file(dataset)}", all_fences, None)
    sets = storefiles.read_parquet(fs, f"{gen_dir}/sets.parquet", columns=["ccid", "csid"])
    written[MAPPED_SETS_BY_CCID], _ = _write_sorted(fs, f"{gen_dir}/{MAPPED_SETS_BY_CCID}", sets, "ccid")
    manifest = json.dumps({"format": MAPPED_FORMAT, "files": written, FENCES: fence_starts}, indent=1)
    _write_atomic(fs, f"{gen_dir}/{MAPPED_MANIFEST}", manifest.encode())
    return written


def default_buckets() -> dict[str, int]:
    return {
        "triples": layout.TRIPLE_BUCKETS,
        "setdeps": layout.SETDEP_BUCKETS,
        "rsetdeps": layout.SETDEP_BUCKETS,
        "value_sets": layout.VALUE_BUCKETS,
    }


def _read_bucket(fs: pafs.FileSystem, directory: str, columns: list[str]) -> pa.Table:
    infos = fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    files = sorted(i.path for i in infos if i.type == pafs.FileType.File and integrity.is_data_file(i.path))
    if not files:
        return pa.table({c: pa.array([], pa.int64()) for c in columns})
    return storefiles.scan(fs, files, f"{directory} (a file of)", columns=columns)


def write_sorted(fs: pafs.FileSystem, path: str, table: pa.Table, key: str | None) -> tuple[int, np.ndarray]:
    """One mapped file of ``table`` sorted by ``key`` (see :func:`_write_sorted`), written
    aside and renamed into place: a hard link at ``path`` is replaced, its file untouched."""
    return _write_sorted(fs, path, table, key)


def _write_sorted(fs: pafs.FileSystem, path: str, table: pa.Table, key: str | None) -> tuple[int, np.ndarray]:
    """``table`` sorted by ``key`` (stable; None: as it is) as one int64
    record batch in an Arrow IPC file; its size and its sorted key."""
    order = None if key is None else np.argsort(table.column(key).to_numpy(), kind="stable")
    arrays = [table.column(c).to_numpy().astype(np.int64, copy=False) for c in table.column_names]
    if order is not None:
        arrays = [a[order] for a in arrays]
    schema = pa.schema([pa.field(c, pa.int64(), nullable=False) for c in table.column_names])
    batch = pa.record_batch([pa.array(a, pa.int64()) for a in arrays], schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    data = sink.getvalue()
    _write_atomic(fs, path, data)
    keys = arrays[table.column_names.index(key)] if key is not None else np.empty(0, np.int64)
    return len(data), keys


def _write_atomic(fs: pafs.FileSystem, path: str, data: bytes | pa.Buffer) -> None:
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    temporary = f"{path}.tmp-{threading.get_ident()}"
    try:
        with fs.open_output_stream(temporary) as out:
            out.write(data)
        fs.move(temporary, path)
    finally:
        if fs.get_file_info(temporary).type == pafs.FileType.File:
            fs.delete_file(temporary)
