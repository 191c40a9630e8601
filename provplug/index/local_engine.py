"""The index on one machine, in bounded memory.

A few NumPy arrays per value stay in memory; everything per triple is
streamed in chunks of ``chunk_rows`` triples and spilled to scratch files
(:mod:`provplug.index.spill`), so the peak is about
``budget.BYTES_PER_VALUE`` bytes a value plus the chunk buffers, however
many triples there are. Passes:

1. the committed triples' distinct values -> ``nodes``, sorted: a value's
   dense index is its rank, so "smallest index" is "smallest value id";
2. the triples again -> dense endpoints (spilled to ``ends``), each value's
   table (the smallest table code it is seen with), triples per table pair;
3. components: the endpoints streamed through a union-find over dense
   indices (:func:`.localwcc.merge_groups`);
4. sets, one split depth per round (Algorithm 3, see :mod:`.algorithm`).
   An edge kept at one depth lies inside one of the new sets, and only such
   edges can be kept at the next depth, so every round reads the previous
   round's (smaller) spill of kept edges;
5. the layout: the triples a third time beside their endpoints, each row
   appended to its bucket's spill, then written bucket by bucket; set
   dependencies made distinct per bucket; values, sets and components from
   the per-value arrays.

It computes exactly what :mod:`provplug.index.spark_engine` computes (the
tests compare the two, and the chunked run with a single-chunk one).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from provplug.index import budget, layout
from provplug.index.algorithm import InputStats, OutputDir, SetPlan
from provplug.index.localwcc import flatten, merge_groups
from provplug.index.spill import ROW_GROUP, BucketSpill, DistinctRuns, EdgeFile, write_parquet
from provplug.index.splits import CompiledSplits
from provplug.index.workflow import TableCatalogue
from provplug.plugin.protocols import Store
from provplug.progress import Progress
from provplug.store.triples import triple_batches as read_triples

TRIPLE_COLUMNS = ("src", "dst", "op", "src_table", "dst_table")


class LocalEngine:
    name = "local"

    def __init__(
        self,
        store: Store,
        catalogue: TableCatalogue,
        progress: Progress,
        scratch: str,
        memory_budget: int | None = None,
        value_limit: int | None = None,
    ) -> None:
        """``scratch``: an empty local folder for the spills (the caller removes
        it). ``memory_budget``: sizes the chunks. ``value_limit``: stop with
        :class:`.spill.TooManyValues` once there are more values than that."""
        self.store = store
        self.catalogue = catalogue
        self.progress = progress
        self.scratch = scratch
        self.chunk_rows = budget.chunk_rows(memory_budget if memory_budget is not None else budget.default_budget())
        self.value_limit = value_limit

    # -- input ---------------------------------------------------------------
    def load(self) -> InputStats:
        os.makedirs(self.scratch, exist_ok=True)
        self.nodes = self._distinct_values()
        n = len(self.nodes)
        self.index_dtype = np.dtype(np.int32 if n < 2**31 else np.int64)
        self.code_dtype = np.dtype(np.int16 if len(self.catalogue.names) < 2**15 else np.int32)
        per_table, pair_counts = self._dense_ends()
        m = self.edges.rows
        self.progress.done("read triples", m, "triples")
        n_tables = max(len(self.catalogue.names), 1)
        pairs = np.flatnonzero(pair_counts)
        return InputStats(
            triples=m,
            values=n,
            table_values={int(c): int(v) for c, v in enumerate(per_table.tolist()) if v},
            pair_triples=[(int(p // n_tables), int(p % n_tables), int(pair_counts[p])) for p in pairs],
        )

    def _batches(self, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        return triple_batches(self.store, columns, self.chunk_rows)

    def _distinct_values(self) -> np.ndarray:
        runs = DistinctRuns(self.value_limit)
        rows = 0
        for batch in self._batches(("src", "dst")):
            runs.add(np.concatenate([ints(batch, "src"), ints(batch, "dst")]))
            rows += batch.num_rows
            self.progress.update("reading triples: values", rows, "triples")
        self.triple_rows = rows  # pass 2's total
        nodes = runs.result(np.dtype(np.int64))
        self.progress.done("reading triples: values", len(nodes), "values")
        return nodes

    def _dense_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Pass 2; returns values per table code and triples per table-code pair."""
        n_tables = max(len(self.catalogue.names), 1)
        node_table = np.full(len(self.nodes), np.iinfo(self.code_dtype).max, dtype=self.code_dtype)
        pair_counts = np.zeros(n_tables * n_tables, dtype=np.int64)
        self.edges = EdgeFile(f"{self.scratch}/ends", self.index_dtype)
        for batch in self._batches(("src", "dst", "src_table", "dst_table")):
            si = np.searchsorted(self.nodes, ints(batch, "src")).astype(self.index_dtype)
            di = np.searchsorted(self.nodes, ints(batch, "dst")).astype(self.index_dtype)
            sc = self.catalogue.codes(ints(batch, "src_table"), self.store.uri).astype(self.code_dtype)
            dc = self.catalogue.codes(ints(batch, "dst_table"), self.store.uri).astype(self.code_dtype)
            np.minimum.at(node_table, si, sc)
            np.minimum.at(node_table, di, dc)
            pair_counts += np.bincount(sc.astype(np.int64) * n_tables + dc, minlength=len(pair_counts))
            self.edges.write(si, di)
            self.progress.update("reading triples: endpoints", self.edges.rows, "triples", total=self.triple_rows)
        self.edges.close()
        self.node_table = node_table
        per_table = (
            np.bincount(node_table, minlength=len(self.catalogue.names)) if len(node_table) else np.zeros(0, int)
        )
        return per_table, pair_counts

    # -- components and sets ---------------------------------------------------
    def build(self, plan: SetPlan, out: OutputDir) -> dict[str, int]:
        comp = self._components()
        labels, split_id = self._partition(comp, plan.theta, plan.splits)
        del self.node_table
        return self._write(comp, labels, split_id, plan.splits, out.path)

    def _components(self) -> np.ndarray:
        labels = np.arange(len(self.nodes), dtype=self.index_dtype)
        done = 0
        for src, dst in self.edges.chunks(self.chunk_rows):
            merge_groups(labels, src, dst)
            done += len(src)
            self.progress.update("components", done, "triples", total=self.edges.rows)
        flatten(labels, self.chunk_rows)
        self.progress.done("components", len(self._roots(labels)), "components")
        return labels

    def _partition(self, comp: np.ndarray, theta: int, splits: CompiledSplits) -> tuple[np.ndarray, np.ndarray]:
        """Algorithm 3 for all large components at once, one split depth per round."""
        labels = comp.copy()
        split_id = np.full(len(comp), -1, dtype=np.int16 if len(splits.names) < 2**15 else np.int32)
        active = (self._group_sizes(comp) >= theta)[comp]
        source = self.edges
        for depth in range(splits.depth):
            if not active.any():
                break
            key = splits.paths[:, depth].astype(split_id.dtype)[self.node_table]  # compared for active ends only
            self._restart(labels, active)  # the rounds read no label: each active value starts a group
            kept = EdgeFile(f"{self.scratch}/kept-{depth}", self.index_dtype)
            # Every edge read lies inside one current set (of one component at
            # depth 0; joined by the previous round otherwise), so "same set"
            # needs no test: both ends active and in the same split.
            for src, dst in source.chunks(self.chunk_rows):
                keep = active[src] & active[dst] & (key[src] == key[dst])
                src, dst = src[keep], dst[keep]
                kept.write(src, dst)
                merge_groups(labels, src, dst)
                self.progress.update(f"sets at split depth {depth + 1}", kept.rows, "edges kept")
            kept.close()
            flatten(labels, self.chunk_rows)
            split_id[active] = key[active]
            del key
            self.progress.done(
                f"sets at split depth {depth + 1}", int(np.count_nonzero(active[self._roots(labels)])), "sets"
            )
            if depth + 1 < splits.depth:
                large = self._group_sizes(labels, active) >= theta  # by set root
                active &= large[labels]
                del large
                active &= (splits.paths[:, depth + 1] >= 0)[self.node_table]  # its split has sub-splits
            else:
                active[:] = False
            if source is not self.edges:
                source.remove()
            source = kept
        if source is not self.edges:
            source.remove()
        return labels, split_id

    def _restart(self, labels: np.ndarray, active: np.ndarray) -> None:
        """Make every active value a group of its own, in place, in chunks."""
        for lo in range(0, len(labels), self.chunk_rows):
            hi = min(lo + self.chunk_rows, len(labels))
            np.copyto(labels[lo:hi], np.arange(lo, hi, dtype=labels.dtype), where=active[lo:hi])

    def _group_sizes(self, labels: np.ndarray, among: np.ndarray | None = None) -> np.ndarray:
        """Members per root (of the values ``among``), counted in chunks into
        an int32 array (``np.bincount`` would allocate int64 per value)."""
        sizes = np.zeros(len(labels), dtype=np.int32 if len(labels) < 2**31 else np.int64)
        for lo in range(0, len(labels), self.chunk_rows):
            part = labels[lo : lo + self.chunk_rows]
            np.add.at(sizes, part if among is None else part[among[lo : lo + self.chunk_rows]], 1)
        return sizes

    def _roots(self, labels: np.ndarray) -> np.ndarray:
        """Indices ``r`` with ``labels[r] == r``, ascending."""
        parts = [
            lo
            + np.flatnonzero(labels[lo : lo + self.chunk_rows] == np.arange(lo, min(lo + self.chunk_rows, len(labels))))
            for lo in range(0, len(labels), self.chunk_rows)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    # -- output ----------------------------------------------------------------
    def _write(
        self, comp: np.ndarray, labels: np.ndarray, split_id: np.ndarray, splits: CompiledSplits, out_dir: str
    ) -> dict[str, int]:
        set_triples, comp_triples, deps = self._write_triples(comp, labels, out_dir)
        pa.default_memory_pool().release_unused()  # the Arrow buffers of the bucket passes
        self.edges.remove()
        n_deps = self._write_setdeps(deps, out_dir)
        self._write_values(comp, labels, out_dir)
        n_sets = self._write_sets(comp, labels, split_id, set_triples, splits, out_dir)
        del split_id, set_triples
        n_components = self._write_components(comp, comp_triples, out_dir)
        return {
            "triples": self.edges.rows,
            "values": len(self.nodes),
            "components": n_components,
            "sets": n_sets,
            "set_dependencies": n_deps,
        }

    def _write_triples(
        self, comp: np.ndarray, labels: np.ndarray, out_dir: str
    ) -> tuple[np.ndarray, np.ndarray, BucketSpill]:
        """Pass 3: every triple with its ids into its bucket's spill (in scan
        order), then one Parquet file per bucket. Returns the triples per set
        and per component (by root index) and the spilled cross-set pairs."""
        n, nodes = len(self.nodes), self.nodes
        count_dtype = np.int32 if self.edges.rows < 2**31 else np.int64
        set_triples = np.zeros(n, dtype=count_dtype)
        comp_triples = np.zeros(n, dtype=count_dtype)
        rows = BucketSpill(f"{self.scratch}/triples", layout.INDEXED_TRIPLES, layout.TRIPLE_BUCKETS)
        deps = BucketSpill(f"{self.scratch}/setdeps", layout.SETDEPS, layout.SETDEP_BUCKETS)
        ends, done = self.edges.reader(), 0
        try:
            for batch in self._batches(TRIPLE_COLUMNS):
                si, di = ends.read(batch.num_rows)
                ls, ld, cd = labels[si], labels[di], comp[di]
                np.add.at(set_triples, ld, 1)
                np.add.at(comp_triples, cd, 1)
                src_csid, dst_csid = nodes[ls], nodes[ld]
                columns = [batch.column(c).cast(layout.INDEXED_TRIPLES.field(c).type) for c in TRIPLE_COLUMNS]
                indexed = pa.record_batch([*columns, nodes[cd], src_csid, dst_csid], schema=layout.INDEXED_TRIPLES)
                rows.write(indexed, bucket_of(dst_csid, layout.TRIPLE_BUCKETS))
                cross = src_csid != dst_csid
                a, b = unique_pairs(src_csid[cross], dst_csid[cross])
                deps.write(pa.record_batch([a, b], schema=layout.SETDEPS), bucket_of(b, layout.SETDEP_BUCKETS))
                done += batch.num_rows
                self.progress.update("indexing triples", done, "triples", total=self.edges.rows)
        finally:
            ends.close()
            rows.close()
            deps.close()
        self.progress.done("indexing triples", self.edges.rows, "triples")
        for k in range(layout.TRIPLE_BUCKETS):
            write_parquet(self.store.fs, self._bucket_file(out_dir, "triples", k), layout.INDEXED_TRIPLES, rows.read(k))
            rows.remove(k)
            self.progress.update("wrote triples", k + 1, "buckets", total=layout.TRIPLE_BUCKETS)
        self.progress.done("wrote triples", self.edges.rows, "triples")
        return set_triples, comp_triples, deps

    def _bucket_file(self, out_dir: str, name: str, k: int) -> str:
        folder = f"{out_dir}/{name}/bucket={k}"
        if self.store.local:  # an object store has no folders to make: a key's prefix is its folder
            self.store.fs.create_dir(folder, recursive=True)
        return f"{folder}/part-0.parquet"

    def _write_setdeps(self, deps: BucketSpill, out_dir: str) -> int:
        """Distinct cross-set pairs, by ``dst_csid`` (``setdeps``) and by
        ``src_csid`` (``rsetdeps``), each bucket sorted by (src, dst)."""
        fs, buckets = self.store.fs, layout.SETDEP_BUCKETS
        reverse = BucketSpill(f"{self.scratch}/rsetdeps", layout.SETDEPS, buckets)
        total = 0
        try:
            for k in range(buckets):
                a, b = unique_pairs(*pair_columns(deps.read(k)))
                deps.remove(k)
                pairs = pa.record_batch([a, b], schema=layout.SETDEPS)
                write_parquet(fs, self._bucket_file(out_dir, "setdeps", k), layout.SETDEPS, [pairs])
                reverse.write(pairs, bucket_of(a, buckets))
                total += len(a)
                self.progress.update("wrote set dependencies", total, "pairs")
        finally:
            reverse.close()
        for k in range(buckets):
            a, b = pair_columns(reverse.read(k))
            order = np.lexsort((b, a))
            pairs = pa.record_batch([a[order], b[order]], schema=layout.SETDEPS)
            write_parquet(fs, self._bucket_file(out_dir, "rsetdeps", k), layout.SETDEPS, [pairs])
            reverse.remove(k)
        self.progress.done("wrote set dependencies", total, "pairs")
        return total

    def _write_values(self, comp: np.ndarray, labels: np.ndarray, out_dir: str) -> None:
        """``value_sets``: each bucket's values in id order (``nodes`` is sorted)."""
        nodes, buckets = self.nodes, layout.VALUE_BUCKETS
        bucket = np.empty(len(nodes), dtype=np.uint8)
        for lo in range(0, len(nodes), self.chunk_rows):  # no id-sized temporary
            bucket[lo : lo + self.chunk_rows] = bucket_of(nodes[lo : lo + self.chunk_rows], buckets)
        for k in range(buckets):
            idx = np.flatnonzero(bucket == k)
            part = pa.record_batch([nodes[idx], nodes[comp[idx]], nodes[labels[idx]]], schema=layout.VALUE_SETS)
            write_parquet(self.store.fs, self._bucket_file(out_dir, "value_sets", k), layout.VALUE_SETS, [part])
            self.progress.update("wrote values", k + 1, "buckets", total=buckets)
        self.progress.done("wrote values", len(nodes), "values")

    def _write_sets(
        self,
        comp: np.ndarray,
        labels: np.ndarray,
        split_id: np.ndarray,
        set_triples: np.ndarray,
        splits: CompiledSplits,
        out_dir: str,
    ) -> int:
        roots = self._roots(labels)
        set_nodes = self._group_sizes(labels)[roots].astype(np.int64)
        names = pa.array([*splits.names, None], type=pa.string())  # split_id -1 -> the null at the end

        def batches() -> Iterator[pa.RecordBatch]:
            for lo in range(0, len(roots), ROW_GROUP):
                r = roots[lo : lo + ROW_GROUP]
                sid = split_id[r].astype(np.int64)
                yield pa.record_batch(
                    [
                        self.nodes[r],
                        self.nodes[comp[r]],
                        names.take(pa.array(np.where(sid < 0, len(splits.names), sid))),
                        set_nodes[lo : lo + ROW_GROUP],
                        set_triples[r].astype(np.int64),
                    ],
                    schema=layout.SETS,
                )

        return write_parquet(self.store.fs, f"{out_dir}/sets.parquet", layout.SETS, batches())

    def _write_components(self, comp: np.ndarray, comp_triples: np.ndarray, out_dir: str) -> int:
        roots = self._roots(comp)
        comp_nodes = self._group_sizes(comp)[roots].astype(np.int64)

        def batches() -> Iterator[pa.RecordBatch]:
            for lo in range(0, len(roots), ROW_GROUP):
                r = roots[lo : lo + ROW_GROUP]
                yield pa.record_batch(
                    [self.nodes[r], comp_nodes[lo : lo + ROW_GROUP], comp_triples[r].astype(np.int64)],
                    schema=layout.COMPONENTS,
                )

        return write_parquet(self.store.fs, f"{out_dir}/components.parquet", layout.COMPONENTS, batches())


def triple_batches(store: Store, columns: Sequence[str], rows: int) -> Iterator[pa.RecordBatch]:
    """Every triple's ``columns`` in record batches of at most ``rows``: the
    stored files, then the location edges' triples (:mod:`provplug.store.triples`)."""
    return read_triples(store, columns, batch_rows=rows)


def ints(batch: pa.RecordBatch, column: str) -> np.ndarray:
    return np.asarray(batch.column(column).to_numpy(), dtype=np.int64)


def bucket_of(key: np.ndarray, buckets: int) -> np.ndarray:
    """Bucket of every key (as :func:`.layout.bucket`), small enough for a radix sort."""
    return (np.asarray(key, dtype=np.int64) % buckets).astype(np.uint8 if buckets <= 256 else np.int64)


def pair_columns(batches: Iterable[pa.RecordBatch]) -> tuple[np.ndarray, np.ndarray]:
    table = pa.Table.from_batches(list(batches), layout.SETDEPS)
    src = np.asarray(table.column("src_csid").to_numpy(), dtype=np.int64)
    dst = np.asarray(table.column("dst_csid").to_numpy(), dtype=np.int64)
    return src, dst


def unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``(a, b)`` pairs sorted by ``(a, b)`` (a lexsort: much faster
    than ``np.unique(axis=1)``)."""
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    first = np.ones(len(a), dtype=bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[first], b[first]
