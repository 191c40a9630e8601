"""Spark-free reads of the lineage index (layout: :mod:`provplug.index.layout`).

A query reads only the rows of its own sets, from one of two sources:

* **Mapped files** (``GEN/mapped/``, :mod:`.mapped`, written when the index
  is built): every bucket once more as an Arrow IPC file sorted by the key
  queries look up, memory-mapped. A set's rows are one range of the mapped
  key column, so a query touches only the pages of its own ranges, and asks
  for all of them at once before touching them (:meth:`IndexReader._lookup`):
  a cold process reads what the answer needs in a few round trips, and warm
  data is the OS page cache's (shared between processes, reclaimable), so
  latency follows the answer's sets, not the store's size.
* **Parquet buckets** (a generation without mapped files, a store on a
  remote filesystem): a bucket touched for the first time through an
  opened store is scanned with the set filter pushed into the read; from the second touch on
  it is held sorted in memory, in a cache bounded by bytes.

Each opened store has its own caches (:func:`caches_of`, made when first
asked; no two stores share any). Its byte cache (:class:`_ByteBudgetCache`)
holds loaded buckets and open maps up to a budget sized from the machine
(half the memory available when it is first used) or ``PROVPLUG_QUERY_CACHE_MB``; beyond it the least recently used
entries are evicted, never one the query in progress uses (a query that
sweeps more buckets than fit reads the rest filtered instead of evicting its
own buckets round-robin).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from provplug import ids, sortedints
from provplug.errors import NotIndexedError
from provplug.index import integrity, layout
from provplug.index.generation import (
    Hold,
    check_generation,
    current_generation,
    current_pointer,
    generation_meta,
    hold,
    not_indexed_note,
    pending_runs,
)
from provplug.index.incremental import ALIASES, LAYERS, resolve
from provplug.index.mapped import (
    FENCES,
    MAPPED_BUCKETED,
    MAPPED_FORMAT,
    MAPPED_MANIFEST,
    MAPPED_SETS_BY_CCID,
    MappedRows,
    SortedRows,
    bucket_file,
    fences_file,
    gather_ranges,
    map_sorted,
    read_fences,
    will_need_heads,
)
from provplug.plugin.protocols import Store
from provplug.plugin.query_results import Direction, Edges
from provplug.query.driver import available_memory, megabytes_from_env
from provplug.store import files as storefiles
from provplug.store.triples import TripleFilter, triple_table

_T = TypeVar("_T")

CACHE_ENV = "PROVPLUG_QUERY_CACHE_MB"
MAPPED_ENV = "PROVPLUG_QUERY_MAPPED"  # "0": ignore mapped files (benchmarks, diagnosis)
MIN_CACHE = 256 << 20
# A loaded Parquet bucket takes about this many times its file size (int64
# columns, uncompressed, plus the sorted copy's key).
LOADED_PER_STORED = 3
# An open map costs the process only its metadata: its pages are the OS's.
MAPPED_ENTRY_BYTES = 4096
# Opening the live generation retries when gc --now removed the one CURRENT named.
_RESOLVE_ATTEMPTS = 3


def arrow_ids(values: np.ndarray) -> pa.Array:
    """An Arrow-owned int64 array of ``values`` for scan filters. Not a
    zero-copy view of NumPy memory: a scan thread that frees such a buffer
    while Python is exiting aborts the process (apache/arrow#36389)."""
    return pa.array(np.asarray(values, dtype=np.int64).tolist(), pa.int64())


@dataclass
class _Entry:
    value: Any
    size: int
    query: int  # the last query that used it


class _ByteBudgetCache:
    """Loaded index files by key, bounded by bytes, least recently used
    evicted first. Entries the current query (:meth:`begin_query`) has used
    are not evicted for it: :meth:`put` refuses instead, and the caller
    reads what it needs without keeping it."""

    def __init__(self, budget: int | None = None) -> None:
        self._budget = budget
        self.used = 0
        self.items: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self.touched: set[tuple[Any, ...]] = set()
        self.query = 0
        self.evictions = 0
        self.lock = threading.Lock()

    @property
    def budget(self) -> int:
        """Bytes it may hold: ``PROVPLUG_QUERY_CACHE_MB``, or half the memory
        available when it is first asked (the opened store's queries then share it)."""
        if self._budget is None:
            given = megabytes_from_env(CACHE_ENV)
            self._budget = given if given is not None else max(MIN_CACHE, available_memory() // 2)
        return self._budget

    def set_budget(self, budget: int | None) -> None:
        """A new budget in bytes (None: from the environment and the machine
        again); entries beyond it are evicted now."""
        with self.lock:
            self._budget = budget
            if budget is not None:
                self.query += 1  # nothing in use: a shrink may evict anything
                self._make_room(0)

    def begin_query(self) -> None:
        with self.lock:
            self.query += 1

    def get(self, key: tuple[Any, ...], load: Callable[[], tuple[_T, int]]) -> _T:
        hit = self.peek(key)
        if hit is not None:
            return cast(_T, hit)  # what this key's load returned
        value, size = load()
        self.put(key, value, size)
        return value

    def peek(self, key: tuple[Any, ...]) -> Any:
        with self.lock:
            hit = self.items.get(key)
            if hit is None:
                return None
            self.items.move_to_end(key)
            hit.query = self.query
            return hit.value

    def first_touch(self, key: tuple[Any, ...]) -> bool:
        """True the first time ``key`` is asked of this cache."""
        with self.lock:
            if key in self.touched:
                return False
            self.touched.add(key)
            return True

    def would_fit(self, size: int) -> bool:
        """Could ``size`` bytes be admitted, evicting only entries the current query has not used?"""
        with self.lock:
            return self.used - self._evictable() + size <= self.budget

    def put(self, key: tuple[Any, ...], value: Any, size: int) -> bool:
        """Keep ``value`` if it fits (evicting least recently used entries); False if not kept."""
        with self.lock:
            if key in self.items:
                return True
            if not self._make_room(size):
                return False
            self.items[key] = _Entry(value, size, self.query)
            self.used += size
            return True

    def _evictable(self) -> int:
        return sum(e.size for e in self.items.values() if e.query != self.query)

    def _make_room(self, size: int) -> bool:
        budget = self.budget
        if self.used - self._evictable() + size > budget:
            return False
        for key in [k for k, e in self.items.items() if e.query != self.query]:  # oldest first
            if self.used + size <= budget:
                break
            self.used -= self.items.pop(key).size
            self.evictions += 1
        return self.used + size <= budget

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.touched.clear()
            self.used = 0


# A generation's mapped files (relative path -> size) and each dataset's fence starts.
Manifest = tuple[dict[str, int], dict[str, list[int]]]
# The attribute of an opened store that holds its caches (see caches_of).
CACHES_ATTR = "_provplug_query_caches"
_owning = threading.Lock()


class StoreCaches:
    """What queries keep between calls on one opened store, and nothing
    shared with another: two stores opened in one process (or one test and
    the next) never see each other's entries or budget."""

    def __init__(self) -> None:
        self.files = _ByteBudgetCache()  # loaded index files and whole triple tables
        # Generations whose files were checked: the check is a listing (a few
        # ms, as much as a warm query), so it is done once per opened store.
        self.checked: set[str] = set()
        self.manifests: dict[str, Manifest | None] = {}  # by generation (None: it has none)
        self.catalogs: dict[tuple[str, ...], Any] = {}  # provplug.query.catalog's, by committed runs
        self.spark_frames: dict[tuple[int, tuple[str, ...]], Any] = {}  # cached Spark DataFrames (RQ)
        self.lock = threading.Lock()

    def clear(self) -> None:
        """Forget every cached file, check and catalogue (keeps the budget and the eviction count)."""
        self.files.clear()
        with self.lock:
            self.checked.clear()
            self.manifests.clear()
            self.catalogs.clear()


def caches_of(store: Store) -> StoreCaches:
    """``store``'s caches, made when first asked. They are an attribute of
    the store object, so they live and die with it; a module-level mapping
    keyed by the store would keep every store alive (a catalogue refers to
    its store)."""
    caches: StoreCaches | None = getattr(store, CACHES_ATTR, None)
    if caches is None:
        with _owning:
            caches = getattr(store, CACHES_ATTR, None)
            if caches is None:
                caches = StoreCaches()
                setattr(store, CACHES_ATTR, caches)
                # A cached Spark DataFrame lives in the session, not in Python: unpersist it with the store.
                # (Not at exit: the session may be stopped by then, and its memory goes with the process.)
                weakref.finalize(store, _unpersist, caches.spark_frames).atexit = False
    return caches


def _unpersist(frames: dict[Any, Any]) -> None:
    for frame in frames.values():
        if not _stopped(frame.sparkSession.sparkContext):  # a stopped context freed its caches itself
            frame.unpersist()
    frames.clear()


def _stopped(context: Any) -> bool:
    """Whether a SparkContext was stopped (the store may outlive it until collected)."""
    jsc = getattr(context, "_jsc", None)
    return jsc is None or bool(jsc.sc().isStopped())


def clear_cache(store: Store) -> None:
    """Forget what ``store``'s queries cached (a benchmark's cold run, or after re-indexing in-process)."""
    caches_of(store).clear()


def set_cache_budget(store: Store, megabytes: float | None) -> None:
    """Bound ``store``'s query cache to ``megabytes`` MiB (None: the default again)."""
    caches_of(store).files.set_budget(None if megabytes is None else int(megabytes * (1 << 20)))


def cache_usage(store: Store) -> dict[str, int]:
    """Bytes ``store``'s query cache holds, its budget, entries, and evictions so far."""
    files = caches_of(store).files
    with files.lock:
        return {"used": files.used, "budget": files.budget, "entries": len(files.items), "evictions": files.evictions}


def begin_query(store: Store) -> None:
    """Mark the start of a query on ``store``: what it uses is not evicted while it runs."""
    caches_of(store).files.begin_query()


def cached(store: Store, key: tuple[Any, ...], load: Callable[[], tuple[_T, int]]) -> _T:
    """``load()``'s value (with its size in bytes), kept in ``store``'s query cache while it fits."""
    return caches_of(store).files.get(key, load)


class IndexReader:
    """One published index generation of a store, read with pyarrow only.

    Its files are checked against the generation's record when it is first
    opened through a store object (:mod:`provplug.index.integrity`), and bucket files
    are taken from that record: a file lost later is an error, not an empty
    bucket. Mapped files are used when the generation has them (see the
    module's description) and the store is on the local filesystem."""

    def __init__(self, store: Store, generation: str, meta: dict[str, Any] | None = None, layer: str = "") -> None:
        """``layer``: read that layer of an incremental generation (its
        directory relative to the generation's; "" the base)."""
        self.store = store
        self.fs = store.fs
        self.generation = generation
        self.root = store.path(layout.INDEX_DIR, generation) + (f"/{layer}" if layer else "")
        self.meta: dict[str, Any] = generation_meta(store, generation) if meta is None else meta
        self.pending: list[str] = []  # committed runs with triples the generation lacks (see current)
        self._pending_tables: np.ndarray | None = None
        self._pending_ends: tuple[np.ndarray, np.ndarray] | None = None
        self.triple_buckets = self._buckets("triples", layout.TRIPLE_BUCKETS)
        self.setdep_buckets = self._buckets("setdeps", layout.SETDEP_BUCKETS)
        self.value_buckets = self._buckets("value_sets", layout.VALUE_BUCKETS)
        self._key: tuple[str, ...] = (generation, layer) if layer else (generation,)
        self._cache = caches_of(store).files
        self._recorded = _recorded_folders(self.meta)
        manifest = self._mapped_manifest()
        self.mapped = None if manifest is None else manifest[0]
        self._fence_starts = {} if manifest is None else manifest[1]
        self.hold: Hold | None = None  # the generation held while this reader lives (see current)

    @classmethod
    def current(cls, store: Store) -> IndexReader:
        """The live generation (``CURRENT`` is resolved once, here), checked
        and held while the reader lives (``provplug gc --now`` leaves it)."""
        pointer = store.path(layout.INDEX_DIR, layout.CURRENT)
        for _ in range(_RESOLVE_ATTEMPTS):
            generation = current_generation(store)  # no existence check first: a request more on S3
            if generation is None:
                if current_pointer(store) is None:
                    raise NotIndexedError(f"{store.uri} has no lineage index: run `provplug index {store.uri}` first")
                raise integrity.damaged(store.uri, None, f"{pointer} is empty")
            held = hold(store, generation)
            if held is None:
                continue  # replaced and removed since CURRENT named it: the new one is live
            meta = generation_meta(store, generation)
            checked = caches_of(store).checked
            if generation not in checked:
                check_generation(store, generation, meta)
                checked.add(generation)
            reader = (
                LayeredIndexReader(store, generation, meta)
                if meta.get(LAYERS) or ALIASES in meta.get(integrity.FILES, {})
                else cls(store, generation, meta)
            )
            reader.hold = held
            indexed = reader.indexed_runs()
            if indexed is not None:
                reader.pending = pending_runs(indexed, store.runs())
            return reader
        raise NotIndexedError(f"{store.uri}: the index was replaced {_RESOLVE_ATTEMPTS} times while opening it; retry")

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
            return [f"{self.root}/{p}" for p in self._recorded.get(directory[len(self.root) + 1 :], ())]
        with self._damage():
            infos = self.fs.get_file_info(pafs.FileSelector(directory))
        return sorted(i.path for i in infos if i.type == pafs.FileType.File and integrity.is_data_file(i.path))

    def _damage(self) -> contextlib.AbstractContextManager[None]:
        return integrity.index_damage(self.store.uri, self.generation)

    def _scan(self, files: list[str], **to_table: Any) -> pa.Table:
        with self._damage():
            return storefiles.scan(
                self.fs, files, files[0] if len(files) == 1 else f"{files[0]} (or a sibling)", **to_table
            )

    def _read(self, directory: str, columns: list[str]) -> pa.Table:
        files = self._files(directory)
        if not files:
            return pa.table({c: pa.array([], pa.int64()) for c in columns})
        return self._scan(files, columns=columns)

    def _stored_bytes(self, directory: str) -> int | None:
        """Bytes of ``directory``'s data files as recorded (None: no record)."""
        recorded = self.meta.get(integrity.FILES)
        if self._recorded is None or not isinstance(recorded, dict):
            return None
        return sum(int(recorded[p]) for p in self._recorded.get(directory[len(self.root) + 1 :], ()))

    # -- mapped files ----------------------------------------------------------
    def _mapped_manifest(self) -> Manifest | None:
        """The generation's mapped files (relative path -> size) and each
        dataset's fence starts, or None."""
        if not isinstance(self.fs, pafs.LocalFileSystem) or os.environ.get(MAPPED_ENV, "").strip() == "0":
            return None
        manifests = caches_of(self.store).manifests
        key = "/".join(self._key)  # a layer's manifest is its own
        if key not in manifests:
            path = f"{self.root}/{MAPPED_MANIFEST}"
            found: tuple[dict[str, int], dict[str, list[int]]] | None = None
            if self.fs.get_file_info(path).type == pafs.FileType.File:
                with self._damage():
                    manifest = storefiles.read_json(self.fs, path)
                if isinstance(manifest, dict) and manifest.get("format") == MAPPED_FORMAT:
                    fences = manifest.get(FENCES, {})  # none in generations written before fences
                    found = (
                        {str(k): int(v) for k, v in manifest.get("files", {}).items()},
                        {str(k): [int(i) for i in v] for k, v in fences.items()} if isinstance(fences, dict) else {},
                    )
            manifests[key] = found
        return manifests[key]

    def _mapped_bucket(self, dataset: str, bucket: int, key: str, columns: list[str]) -> SortedRows | None:
        """The mapped file of ``dataset``'s bucket, if there is one holding ``key`` and ``columns``."""
        if not self._has_mapped(dataset, key, columns) or bucket_file(dataset, bucket) not in (self.mapped or {}):
            return None
        return self._open_mapped(bucket_file(dataset, bucket), key, self._fences(dataset, bucket))

    def _has_mapped(self, dataset: str, key: str, columns: list[str]) -> bool:
        if self.mapped is None or dataset not in MAPPED_BUCKETED:
            return False
        mapped_key, mapped_columns = MAPPED_BUCKETED[dataset]
        return key == mapped_key and set(columns) <= set(mapped_columns)

    def _open_mapped(self, relative: str, key: str, fences: np.ndarray | None = None) -> MappedRows:
        def load() -> tuple[MappedRows, int]:
            with self._damage():
                path = f"{self.root}/{relative}"
                return map_sorted(self.fs, path, key, self.mapped_size(relative), fences), MAPPED_ENTRY_BYTES

        return self._cache.get((*self._key, relative), load)

    def _fences(self, dataset: str, bucket: int) -> np.ndarray | None:
        """The fences of a mapped bucket (None: the generation has none)."""
        starts = self._fence_starts.get(dataset)
        if starts is None or fences_file(dataset) not in (self.mapped or {}):
            return None

        def load() -> tuple[list[np.ndarray], int]:
            relative = fences_file(dataset)
            with self._damage():
                split = read_fences(self.fs, f"{self.root}/{relative}", self.mapped_size(relative), starts)
            return split, sum(f.nbytes for f in split)

        return self._cache.get((*self._key, "fences", dataset), load)[bucket]

    def _open_buckets(
        self, dataset: str, key: str, columns: list[str], buckets: Iterable[int]
    ) -> dict[int, SortedRows]:
        """The buckets a lookup reads; the mapped files not open yet have the
        pages opening them reads asked for first, together."""
        buckets = list(buckets)
        if self._has_mapped(dataset, key, columns):
            closed = [
                bucket_file(dataset, b)
                for b in buckets
                if self._cache.peek((*self._key, bucket_file(dataset, b))) is None
            ]
            with self._damage():
                will_need_heads((f"{self.root}/{r}", self.mapped_size(r)) for r in closed if r in (self.mapped or {}))
        return {b: self._sorted_bucket(dataset, b, key, columns) for b in buckets}

    def _lookup(
        self, dataset: str, key: str, columns: list[str], wanted: np.ndarray, buckets: int
    ) -> list[tuple[SortedRows, np.ndarray, np.ndarray, np.ndarray]]:
        """``(bucket rows, keys, starts, ends)`` of the rows of every key in
        ``wanted``, per bucket, with the pages of ``columns`` on those rows
        asked for: in phases over all the buckets (see :mod:`.mapped`)."""
        wanted = np.asarray(wanted, dtype=np.int64)
        of = wanted % buckets
        groups = {b: wanted[of == b] for b in sortedints.unique(of).tolist()}
        parts = self._open_buckets(dataset, key, columns, groups)
        plans = {b: part.will_need_keys(groups[b]) for b, part in parts.items()}
        found = [(part, groups[b], *part.spans(groups[b], plans[b])) for b, part in parts.items()]
        for part, _, starts, ends in found:
            part.will_need_rows(starts, ends, columns)
        return found

    def mapped_size(self, relative: str) -> int:
        assert self.mapped is not None
        return self.mapped[relative]

    def _sorted_bucket(self, dataset: str, bucket: int, key: str, columns: list[str]) -> SortedRows:
        mapped = self._mapped_bucket(dataset, bucket, key, columns)
        if mapped is not None:
            return mapped

        def load() -> tuple[SortedRows, int]:
            table = self._read(self.bucket_dir(dataset, bucket), [key, *columns])
            keys = table.column(key).to_numpy().astype(np.int64, copy=False)
            cols = {c: table.column(c).to_numpy().astype(np.int64, copy=False) for c in columns}
            if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
                order = np.argsort(keys, kind="stable")
                keys, cols = keys[order], {c: v[order] for c, v in cols.items()}
            sorted_ = SortedRows(keys, cols)
            return sorted_, sorted_.nbytes()

        return self._cache.get((*self._key, dataset, bucket, key), load)

    # -- runs committed since the build ----------------------------------------
    def freshness(self) -> dict[str, Any]:
        """What an answer says about runs the generation lacks: ``{"index":
        {"generation", "not_indexed_runs", "note"}}``, or {} when it has them all."""
        if not self.pending:
            return {}
        return {
            "index": {
                "generation": self.generation,
                "not_indexed_runs": list(self.pending),
                "note": not_indexed_note(self.pending),
            }
        }

    def refuse_pending(self, values: np.ndarray, csid: np.ndarray) -> None:
        """:class:`NotIndexedError` if a queried value's lineage is in a run
        the generation lacks: a captured value of a table such a run wrote,
        or an imported id (its table is not in the id) that such a run's
        triples derive, or that they hold and the index does not know
        (``csid`` -1). A value such a run only read answers from the index."""
        if not self.pending or len(values) == 0:
            return
        table = values >> ids.TABLE_SHIFT
        newer = np.isin(table, self._newer_tables())
        imported = table == 0
        if imported.any():
            src, dst = self._newer_imported_ends()
            newer |= imported & (np.isin(values, dst) | (np.isin(values, src) & (csid < 0)))
        if newer.any():
            raise NotIndexedError(
                f"the index predates {len(self.pending)} run(s) and value {int(values[newer][0])} "
                f"belongs to one of them: run `provplug index {self.store.uri}`"
            )

    def _newer_tables(self) -> np.ndarray:
        if self._pending_tables is None:
            tables = self.store.tables()
            mine = pc.is_in(tables.column("run_id"), pa.array(self.pending, pa.string()))
            self._pending_tables = sortedints.unique(tables.filter(mine).column("table_id").to_numpy().astype(np.int64))
        return self._pending_tables

    def _newer_imported_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """The imported ids on the not-indexed runs' triples: ``(sources, derived)``
        (read once per reader; as many as those runs hold)."""
        if self._pending_ends is None:
            t = triple_table(self.store, ["src", "dst"], TripleFilter.of(runs=self.pending))
            src, dst = (sortedints.unique(t.column(c).to_numpy().astype(np.int64)) for c in ("src", "dst"))
            self._pending_ends = (src[src >> ids.TABLE_SHIFT == 0], dst[dst >> ids.TABLE_SHIFT == 0])
        return self._pending_ends

    # -- value -> set ----------------------------------------------------------
    def sets_of(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ccid, csid)`` of each value; -1 for values on no triple.
        :class:`NotIndexedError` for a value of a run the index lacks."""
        values = np.asarray(values, dtype=np.int64)
        ccid, csid = self._sets_of(values)
        self.refuse_pending(values, csid)
        return ccid, csid

    def _sets_of(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        unique = sortedints.unique(values)
        ccid = np.full(len(unique), -1, dtype=np.int64)
        csid = np.full(len(unique), -1, dtype=np.int64)
        for part, keys, starts, ends in self._lookup(
            "value_sets", "value_id", ["ccid", "csid"], unique, self.value_buckets
        ):
            hit = ends > starts  # a value's one row, when it is on a triple
            at = np.searchsorted(unique, keys[hit])
            ccid[at] = part.cols["ccid"][starts[hit]]
            csid[at] = part.cols["csid"][starts[hit]]
        back = np.searchsorted(unique, values)
        return ccid[back], csid[back]

    # -- sets and components ---------------------------------------------------
    def set_table(self) -> SortedRows:
        """``sets.parquet`` sorted by csid (columns ccid, triples)."""

        def load() -> tuple[SortedRows, int]:
            with self._damage():
                path = f"{self.root}/sets.parquet"
                table = storefiles.read_parquet(self.fs, path, columns=["csid", "ccid", "triples"])
            keys = table.column("csid").to_numpy().astype(np.int64, copy=False)
            cols = {c: table.column(c).to_numpy().astype(np.int64, copy=False) for c in ("ccid", "triples")}
            if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():  # the builder writes it sorted
                order = np.argsort(keys)
                keys, cols = keys[order], {c: v[order] for c, v in cols.items()}
            s = SortedRows(keys, cols)
            return s, s.nbytes()

        return self._cache.get((*self._key, "sets"), load)

    def sets_by_component(self) -> SortedRows:
        """``sets.parquet`` sorted by ccid (column csid)."""
        if self.mapped is not None and MAPPED_SETS_BY_CCID in self.mapped:
            return self._open_mapped(MAPPED_SETS_BY_CCID, "ccid")

        def load() -> tuple[SortedRows, int]:
            sets = self.set_table()
            order = np.argsort(sets.cols["ccid"], kind="stable")
            s = SortedRows(sets.cols["ccid"][order], {"csid": sets.key[order]})
            return s, s.nbytes()

        return self._cache.get((*self._key, "sets_by_ccid"), load)

    def component_sets(self, ccids: np.ndarray) -> np.ndarray:
        by_cc = self.sets_by_component()
        return sortedints.unique(by_cc.cols["csid"][by_cc.ranges(sortedints.unique(ccids))])

    def triples_in_sets(self, csids: np.ndarray) -> int:
        """Triples whose dst lies in ``csids``, read from no triple: the
        lengths of the sets' ranges in the mapped files, else the per-set
        sizes of ``sets.parquet``."""
        csids = sortedints.unique(np.asarray(csids, dtype=np.int64))
        if self._has_mapped("triples", "dst_csid", []):
            found = self._lookup("triples", "dst_csid", [], csids, self.triple_buckets)
            return sum(int((ends - starts).sum()) for _, _, starts, ends in found)
        sets = self.set_table()
        if len(sets.key) == 0:
            return 0
        pos = np.minimum(np.searchsorted(sets.key, csids), len(sets.key) - 1)
        hit = sets.key[pos] == csids
        return int(sets.cols["triples"][pos[hit]].sum())

    def set_closure(self, start: np.ndarray, direction: Direction) -> np.ndarray:
        """``start`` and every set deriving it (up, over ``setdeps``) or derived
        from it (down, over ``rsetdeps``): the paper's Find-Set-Lineage."""
        dataset, key, other = (
            ("setdeps", "dst_csid", "src_csid") if direction == "up" else ("rsetdeps", "src_csid", "dst_csid")
        )
        seen = sortedints.unique(np.asarray(start, dtype=np.int64))
        frontier = seen
        while len(frontier):
            step = self._set_step(frontier, dataset, key, other)
            frontier = np.setdiff1d(step, seen, assume_unique=True)
            seen = np.union1d(seen, frontier)
        return seen

    def _set_step(self, frontier: np.ndarray, dataset: str, key: str, other: str) -> np.ndarray:
        """The sets one set dependency away from ``frontier`` (distinct)."""
        found = [
            part.cols[other][gather_ranges(starts, ends)]
            for part, _, starts, ends in self._lookup(dataset, key, [other], frontier, self.setdep_buckets)
        ]
        return sortedints.unique(np.concatenate(found)) if found else np.empty(0, np.int64)

    # -- triples ---------------------------------------------------------------
    def triples_of_sets(self, csids: np.ndarray) -> Edges:
        """Every triple whose ``dst_csid`` is in ``csids``: ranges of the
        mapped files, or from Parquet (see the module's description)."""
        csids = sortedints.unique(np.asarray(csids, dtype=np.int64))
        columns = ["src", "dst", "op"]
        if self._has_mapped("triples", "dst_csid", columns):
            return Edges.concat(
                [
                    Edges(*(part.cols[c][rows] for c in columns))
                    for part, _, starts, ends in self._lookup(
                        "triples", "dst_csid", columns, csids, self.triple_buckets
                    )
                    for rows in [gather_ranges(starts, ends)]
                ]
            )
        parts = []
        buckets = csids % self.triple_buckets
        for b in sortedints.unique(buckets).tolist():
            wanted = csids[buckets == b]
            part = self._held_triples(b)
            parts.append(
                self._filtered_triples(b, wanted)
                if part is None
                else Edges(*(part.cols[c][part.ranges(wanted)] for c in columns))
            )
        return Edges.concat(parts)

    def _held_triples(self, bucket: int) -> SortedRows | None:
        """The Parquet bucket sorted in memory, when held or worth holding:
        not on its first touch through this store (a one-off query pays only for
        a filtered scan), and not when it would not fit the cache."""
        key = (*self._key, "triples", bucket, "dst_csid")
        part: SortedRows | None = self._cache.peek(key)
        if part is not None:
            return part
        if self._cache.first_touch(key):
            return None
        stored = self._stored_bytes(self.bucket_dir("triples", bucket))
        if stored is not None and not self._cache.would_fit(stored * LOADED_PER_STORED):
            return None
        return self._sorted_bucket("triples", bucket, "dst_csid", ["src", "dst", "op"])

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


class LayeredIndexReader(IndexReader):
    """An incremental generation (:mod:`provplug.index.incremental`): the base
    layer (this reader's own files) and the layers above it, each read as an
    :class:`IndexReader` of its directory; every lookup asks each layer and
    joins what they hold. Component ids resolve through ``aliases.parquet``
    (components merged since the rows were written)."""

    def __init__(self, store: Store, generation: str, meta: dict[str, Any] | None = None) -> None:
        super().__init__(store, generation, meta)
        self.layers: list[IndexReader] = [
            self,
            *(
                IndexReader(store, generation, _layer_meta(self.meta, str(e["path"])), str(e["path"]))
                for e in self.meta.get(LAYERS, [])
            ),
        ]
        self._aliases = self._read_aliases()

    def _read_aliases(self) -> dict[int, int]:
        if ALIASES not in self.meta.get(integrity.FILES, {}):
            return {}

        def load() -> tuple[dict[int, int], int]:
            with self._damage():
                table = storefiles.read_parquet(self.fs, f"{self.root}/{ALIASES}")
            pairs = dict(zip(table.column("ccid").to_pylist(), table.column("merged").to_pylist(), strict=True))
            return pairs, 64 * len(pairs)

        return self._cache.get((*self._key, ALIASES), load)

    def _sets_of(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ccid, csid = IndexReader._sets_of(self, values)
        for layer in self.layers[1:]:
            c, s = IndexReader._sets_of(layer, values)
            hit = s >= 0
            ccid[hit], csid[hit] = c[hit], s[hit]
        known = ccid >= 0
        ccid[known] = resolve(ccid[known], self._aliases)
        return ccid, csid

    def component_sets(self, ccids: np.ndarray) -> np.ndarray:
        wanted = sortedints.unique(np.asarray(ccids, dtype=np.int64))
        merged = [c for c, m in self._aliases.items() if m in set(wanted.tolist())]
        physical = np.union1d(wanted, np.array(merged, dtype=np.int64))
        found = [IndexReader.component_sets(layer, physical) for layer in self.layers]
        return sortedints.unique(np.concatenate(found))

    def triples_in_sets(self, csids: np.ndarray) -> int:
        return sum(IndexReader.triples_in_sets(layer, csids) for layer in self.layers)

    def _set_step(self, frontier: np.ndarray, dataset: str, key: str, other: str) -> np.ndarray:
        found = [IndexReader._set_step(layer, frontier, dataset, key, other) for layer in self.layers]
        return sortedints.unique(np.concatenate(found))

    def triples_of_sets(self, csids: np.ndarray) -> Edges:
        return Edges.concat([IndexReader.triples_of_sets(layer, csids) for layer in self.layers])

    def triple_bucket_files(self, csids: Iterable[int]) -> list[str]:
        csids = list(csids)
        return [f for layer in self.layers for f in IndexReader.triple_bucket_files(layer, csids)]


def _layer_meta(meta: dict[str, Any], layer: str) -> dict[str, Any]:
    """A layer's view of the generation's meta: its files, relative to its directory."""
    prefix = f"{layer}/"
    files = meta.get(integrity.FILES, {})
    entry = next(e for e in meta.get(LAYERS, []) if e["path"] == layer)
    return {
        **meta,
        "buckets": entry.get("buckets", meta.get("buckets")),
        integrity.FILES: {p[len(prefix) :]: size for p, size in files.items() if p.startswith(prefix)},
    }
