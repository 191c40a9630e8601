"""Spark-free reads of the lineage index (layout: :mod:`provplug.index.layout`).

Everything the driver path needs is read with pyarrow, one bucket at a time,
and kept per process (bounded by a byte budget) so that warm queries touch no
file: a bucket of triples is held sorted by ``dst_csid``, so the triples of a
set are one ``searchsorted`` range; value -> set and set dependencies likewise.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from .. import storefiles
from ..errors import NotIndexedError
from ..index import integrity, layout
from ..index.generation import check_generation, current_generation, generation_meta
from ..protocols import Store
from .driver import _gather_ranges
from .model import Direction, Edges

_T = TypeVar("_T")

CACHE_ENV = "PROVPLUG_QUERY_CACHE_MB"
DEFAULT_CACHE_MB = 2048


def arrow_ids(values: np.ndarray) -> pa.Array:
    """An Arrow-owned int64 array of ``values`` for scan filters. Not a
    zero-copy view of NumPy memory: a scan thread that frees such a buffer
    while Python is exiting aborts the process (apache/arrow#36389)."""
    return pa.array(np.asarray(values, dtype=np.int64).tolist(), pa.int64())


class _ByteBudgetCache:
    """A map of loaded index files bounded by bytes. Entries are admitted
    while they fit and then kept: a query that sweeps every bucket would
    otherwise evict and reload them all, round-robin, on every query."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.items: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()
        self.touched: set[tuple[Any, ...]] = set()
        self.lock = threading.Lock()

    def get(self, key: tuple[Any, ...], load: Callable[[], tuple[_T, int]]) -> _T:
        with self.lock:
            hit = self.items.get(key)
            if hit is not None:
                self.items.move_to_end(key)
                return hit[0]  # what this key's load returned
        value, size = load()
        return self.put(key, value, size)

    def peek(self, key: tuple[Any, ...]) -> Any:
        with self.lock:
            hit = self.items.get(key)
            if hit is not None:
                self.items.move_to_end(key)
            return None if hit is None else hit[0]

    def first_touch(self, key: tuple[Any, ...]) -> bool:
        """True the first time ``key`` is asked about in this process."""
        with self.lock:
            if key in self.touched:
                return False
            self.touched.add(key)
            return True

    def has_room(self) -> bool:
        with self.lock:
            return self.used < self.budget

    def put(self, key: tuple[Any, ...], value: _T, size: int) -> _T:
        with self.lock:
            if key not in self.items and self.used + size <= self.budget:
                self.items[key] = (value, size)
                self.used += size
        return value

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.touched.clear()
            self.used = 0


_CACHE = _ByteBudgetCache(int(os.environ.get(CACHE_ENV, DEFAULT_CACHE_MB)) << 20)
# Generations whose files were checked in this process: the check is a
# listing (a few ms, as much as a warm query), so it is done once per process.
_CHECKED: set[tuple[str, str]] = set()


def clear_cache() -> None:
    """Forget every cached index file and check (tests, or after re-indexing in-process)."""
    _CACHE.clear()
    _CHECKED.clear()


@dataclass(frozen=True)
class _Sorted:
    """Rows of one bucket sorted by ``key``; ``cols`` are aligned arrays."""

    key: np.ndarray
    cols: dict[str, np.ndarray]

    def nbytes(self) -> int:
        return int(self.key.nbytes + sum(c.nbytes for c in self.cols.values()))

    def ranges(self, keys: np.ndarray) -> np.ndarray:
        """Row positions whose key is in ``keys``."""
        starts = np.searchsorted(self.key, keys, side="left")
        ends = np.searchsorted(self.key, keys, side="right")
        return _gather_ranges(starts, ends)


class IndexReader:
    """One published index generation of a store, read with pyarrow only.

    Its files are checked against the generation's record when it is first
    opened in a process (:mod:`provplug.index.integrity`), and bucket files
    are taken from that record: a file lost later is an error, not an empty
    bucket."""

    def __init__(self, store: Store, generation: str, meta: dict[str, Any] | None = None) -> None:
        self.store = store
        self.fs = store.fs
        self.generation = generation
        self.root = store.path(layout.INDEX_DIR, generation)
        self.meta: dict[str, Any] = generation_meta(store, generation) if meta is None else meta
        self.triple_buckets = self._buckets("triples", layout.TRIPLE_BUCKETS)
        self.setdep_buckets = self._buckets("setdeps", layout.SETDEP_BUCKETS)
        self.value_buckets = self._buckets("value_sets", layout.VALUE_BUCKETS)
        self._key = (store.root, generation)
        self._recorded = _recorded_folders(self.meta)

    @classmethod
    def current(cls, store: Store) -> IndexReader:
        """The live generation (``CURRENT`` is resolved once, here), checked."""
        pointer = store.path(layout.INDEX_DIR, layout.CURRENT)
        if store.fs.get_file_info(pointer).type != pafs.FileType.File:
            raise NotIndexedError(f"{store.uri} has no lineage index: run `provplug index {store.uri}` first")
        generation = current_generation(store)
        if generation is None:
            raise integrity.damaged(store.uri, None, f"{pointer} is empty")
        meta = generation_meta(store, generation)
        key = (store.root, generation)
        if key not in _CHECKED:
            check_generation(store, generation, meta)
            _CHECKED.add(key)
        return cls(store, generation, meta)

    def _buckets(self, dataset: str, default: int) -> int:
        """Bucket count of ``dataset`` as written in meta.json (``buckets``)."""
        buckets = self.meta.get("buckets")
        return int(buckets.get(dataset, default)) if isinstance(buckets, dict) else default

    def indexed_runs(self) -> set[str] | None:
        """Run ids the generation covers, if its meta says so."""
        for key in ("runs", "run_ids", "indexed_runs"):
            runs = self.meta.get(key)
            if isinstance(runs, list):
                return {str(r) for r in runs}
        return None

    # -- files ---------------------------------------------------------------
    def bucket_dir(self, dataset: str, bucket: int) -> str:
        return f"{self.root}/{dataset}/bucket={bucket}"

    def _files(self, directory: str) -> list[str]:
        """Data files of ``directory``: from the generation's record, or (a
        generation without one) a listing of a folder the layout guarantees."""
        if self._recorded is not None:
            return [f"{self.root}/{p}" for p in self._recorded.get(directory[len(self.root) + 1:], ())]
        with self._damage():
            infos = self.fs.get_file_info(pafs.FileSelector(directory))
        return sorted(i.path for i in infos if i.type == pafs.FileType.File and integrity.is_data_file(i.path))

    def _damage(self) -> contextlib.AbstractContextManager[None]:
        return integrity.index_damage(self.store.uri, self.generation)

    def _scan(self, files: list[str], **to_table: Any) -> pa.Table:
        with self._damage():
            return storefiles.scan(self.fs, files, files[0] if len(files) == 1 else f"{files[0]} (or a sibling)", **to_table)

    def _read(self, directory: str, columns: list[str]) -> pa.Table:
        files = self._files(directory)
        if not files:
            return pa.table({c: pa.array([], pa.int64()) for c in columns})
        return self._scan(files, columns=columns)

    def _sorted_bucket(self, dataset: str, bucket: int, key: str, columns: list[str]) -> _Sorted:
        def load() -> tuple[_Sorted, int]:
            table = self._read(self.bucket_dir(dataset, bucket), [key, *columns])
            keys = table.column(key).to_numpy().astype(np.int64, copy=False)
            cols = {c: table.column(c).to_numpy().astype(np.int64, copy=False) for c in columns}
            if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
                order = np.argsort(keys, kind="stable")
                keys, cols = keys[order], {c: v[order] for c, v in cols.items()}
            sorted_ = _Sorted(keys, cols)
            return sorted_, sorted_.nbytes()

        return _CACHE.get((*self._key, dataset, bucket, key), load)

    # -- value -> set ----------------------------------------------------------
    def sets_of(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ccid, csid)`` of each value; -1 for values on no triple."""
        values = np.asarray(values, dtype=np.int64)
        ccid = np.full(len(values), -1, dtype=np.int64)
        csid = np.full(len(values), -1, dtype=np.int64)
        buckets = values % self.value_buckets
        for b in np.unique(buckets).tolist():
            at = np.flatnonzero(buckets == b)
            part = self._sorted_bucket("value_sets", b, "value_id", ["ccid", "csid"])
            if len(part.key) == 0:
                continue
            pos = np.minimum(np.searchsorted(part.key, values[at]), len(part.key) - 1)
            hit = part.key[pos] == values[at]
            ccid[at[hit]] = part.cols["ccid"][pos[hit]]
            csid[at[hit]] = part.cols["csid"][pos[hit]]
        return ccid, csid

    # -- sets and components ---------------------------------------------------
    def set_table(self) -> _Sorted:
        """``sets.parquet`` sorted by csid (columns ccid, triples)."""

        def load() -> tuple[_Sorted, int]:
            with self._damage():
                path = f"{self.root}/sets.parquet"
                table = storefiles.read_parquet(self.fs, path, columns=["csid", "ccid", "triples"])
            keys = table.column("csid").to_numpy().astype(np.int64, copy=False)
            cols = {c: table.column(c).to_numpy().astype(np.int64, copy=False) for c in ("ccid", "triples")}
            if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():  # the builder writes it sorted
                order = np.argsort(keys)
                keys, cols = keys[order], {c: v[order] for c, v in cols.items()}
            s = _Sorted(keys, cols)
            return s, s.nbytes()

        return _CACHE.get((*self._key, "sets"), load)

    def sets_by_component(self) -> _Sorted:
        """``sets.parquet`` sorted by ccid (column csid)."""

        def load() -> tuple[_Sorted, int]:
            sets = self.set_table()
            order = np.argsort(sets.cols["ccid"], kind="stable")
            s = _Sorted(sets.cols["ccid"][order], {"csid": sets.key[order]})
            return s, s.nbytes()

        return _CACHE.get((*self._key, "sets_by_ccid"), load)

    def component_sets(self, ccids: np.ndarray) -> np.ndarray:
        by_cc = self.sets_by_component()
        return np.unique(by_cc.cols["csid"][by_cc.ranges(np.unique(ccids))])

    def triples_in_sets(self, csids: np.ndarray) -> int:
        """Triples whose dst lies in ``csids`` (from the per-set sizes, no triple read)."""
        sets = self.set_table()
        pos = np.minimum(np.searchsorted(sets.key, csids), max(len(sets.key) - 1, 0))
        if len(sets.key) == 0:
            return 0
        hit = sets.key[pos] == csids
        return int(sets.cols["triples"][pos[hit]].sum())

    def set_closure(self, start: np.ndarray, direction: Direction) -> np.ndarray:
        """``start`` and every set deriving it (up, over ``setdeps``) or derived
        from it (down, over ``rsetdeps``): the paper's Find-Set-Lineage."""
        dataset, key, other = (
            ("setdeps", "dst_csid", "src_csid") if direction == "up" else ("rsetdeps", "src_csid", "dst_csid")
        )
        seen = set(np.unique(start).tolist())
        frontier = np.unique(np.asarray(start, dtype=np.int64))
        while len(frontier):
            found = [
                part.cols[other][part.ranges(frontier[frontier % self.setdep_buckets == b])]
                for b in np.unique(frontier % self.setdep_buckets).tolist()
                for part in [self._sorted_bucket(dataset, b, key, [other])]
            ]
            step = np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)
            frontier = np.array([s for s in step.tolist() if s not in seen], dtype=np.int64)
            seen.update(frontier.tolist())
        return np.array(sorted(seen), dtype=np.int64)

    # -- triples ---------------------------------------------------------------
    def triples_of_sets(self, csids: np.ndarray) -> Edges:
        """Every triple whose ``dst_csid`` is in ``csids``.

        A bucket touched for the first time in this process is scanned with
        the set filter pushed into the read (a cold, one-off query pays only
        for the scan); from the second touch on it is held sorted by
        ``dst_csid`` so that a warm query takes one range per set.
        """
        csids = np.unique(np.asarray(csids, dtype=np.int64))
        parts = []
        buckets = csids % self.triple_buckets
        for b in np.unique(buckets).tolist():
            wanted = csids[buckets == b]
            key = (*self._key, "triples", b, "dst_csid")
            part = _CACHE.peek(key)
            # First touch, or a full cache: a filtered scan (~10 ms a bucket)
            # instead of loading and evicting buckets round-robin.
            if part is None and (_CACHE.first_touch(key) or not _CACHE.has_room()):
                parts.append(self._filtered_triples(b, wanted))
                continue
            if part is None:
                part = self._sorted_bucket("triples", b, "dst_csid", ["src", "dst", "op"])
            rows = part.ranges(wanted)
            parts.append(Edges(part.cols["src"][rows], part.cols["dst"][rows], part.cols["op"][rows]))
        return Edges.concat(parts)

    def _filtered_triples(self, bucket: int, csids: np.ndarray) -> Edges:
        files = self._files(self.bucket_dir("triples", bucket))
        if not files:
            return Edges.empty()
        table = self._scan(files, columns=["src", "dst", "op"], filter=pc.field("dst_csid").isin(arrow_ids(csids)))
        return Edges(*(table.column(c).to_numpy().astype(np.int64, copy=False) for c in ("src", "dst", "op")))

    def triple_bucket_files(self, csids: Iterable[int]) -> list[str]:
        """Parquet files of the buckets holding the triples of ``csids`` (for Spark)."""
        buckets = sorted({layout.bucket(int(c), self.triple_buckets) for c in csids})
        return [f for b in buckets for f in self._files(self.bucket_dir("triples", b))]



def _recorded_folders(meta: dict[str, Any]) -> dict[str, list[str]] | None:
    """The generation's recorded data files by folder, or None (no record)."""
    recorded = meta.get(integrity.FILES)
    if not isinstance(recorded, dict):
        return None
    folders: dict[str, list[str]] = {}
    for path in sorted(recorded):
        if integrity.is_data_file(path) and "/" in path:
            folders.setdefault(path.rsplit("/", 1)[0], []).append(path)
    return folders
