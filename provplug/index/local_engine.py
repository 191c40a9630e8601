"""The index on one machine: NumPy arrays in, the layout's Parquet out.

Chosen by ``engine="auto"`` when the triples fit comfortably in memory; it
computes exactly what :mod:`provplug.index.spark_engine` computes (the tests
compare the two). Values are renumbered to dense indices in id order, so
"smallest index" and "smallest value id" are the same thing.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import schema, storefiles
from ..progress import Progress
from ..protocols import Store
from . import layout
from .algorithm import InputStats, OutputDir, SetPlan
from .localwcc import wcc_labels
from .splits import CompiledSplits
from .workflow import TableCatalogue


class LocalEngine:
    name = "local"

    def __init__(self, store: Store, catalogue: TableCatalogue, progress: Progress) -> None:
        self.store = store
        self.catalogue = catalogue
        self.progress = progress

    # -- input ---------------------------------------------------------------
    def load(self) -> InputStats:
        self.progress.done("reading triples")
        t = storefiles.scan(self.store.fs, self.store.triple_files(), f"triples of {self.store.uri}", schema.TRIPLES)
        self.triples = t
        src = t.column("src").to_numpy()
        dst = t.column("dst").to_numpy()
        self.src_code = self.catalogue.codes(t.column("src_table").to_numpy(), self.store.uri)
        self.dst_code = self.catalogue.codes(t.column("dst_table").to_numpy(), self.store.uri)
        m = len(src)
        self.nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        self.si, self.di = inverse[:m].astype(np.int64), inverse[m:].astype(np.int64)
        n = len(self.nodes)
        # A value's table: the smallest table code it is seen with (one, normally).
        self.node_table = np.full(n, np.iinfo(np.int32).max, dtype=np.int32)
        np.minimum.at(self.node_table, self.si, self.src_code)
        np.minimum.at(self.node_table, self.di, self.dst_code)
        self.progress.done("read triples", m, "triples")
        per_table = np.bincount(self.node_table, minlength=len(self.catalogue.names)) if n else np.zeros(0, int)
        n_tables = max(len(self.catalogue.names), 1)
        pair_counts = np.bincount(self.src_code.astype(np.int64) * n_tables + self.dst_code, minlength=1)
        pairs = np.flatnonzero(pair_counts)
        return InputStats(
            triples=m,
            values=n,
            table_values={int(c): int(v) for c, v in enumerate(per_table.tolist()) if v},
            pair_triples=[(int(p // n_tables), int(p % n_tables), int(pair_counts[p])) for p in pairs],
        )

    # -- components and sets ---------------------------------------------------
    def build(self, plan: SetPlan, out: OutputDir) -> dict[str, int]:
        n = len(self.nodes)
        comp = wcc_labels(n, self.si, self.di)
        comp_nodes = np.bincount(comp, minlength=n)
        self.progress.done("components", int((comp_nodes > 0).sum()), "components")
        labels, split_id = self._partition(comp, comp_nodes, plan.theta, plan.splits)
        return self._write(comp, labels, split_id, plan.splits, out.path)

    def _partition(
        self, comp: np.ndarray, comp_nodes: np.ndarray, theta: int, splits: CompiledSplits
    ) -> tuple[np.ndarray, np.ndarray]:
        """Algorithm 3 for all large components at once, one split depth per round."""
        n = len(comp)
        labels = comp.copy()
        split_id = np.full(n, -1, dtype=np.int32)
        active = comp_nodes[comp] >= theta
        for depth in range(splits.depth):
            if not active.any():
                break
            key = np.where(active, splits.paths[self.node_table, depth], -1)
            keep = (
                active[self.si]
                & active[self.di]
                & (labels[self.si] == labels[self.di])
                & (key[self.si] == key[self.di])
            )
            inner = wcc_labels(n, self.si[keep], self.di[keep])
            labels = np.where(active, inner, labels)
            split_id = np.where(active, key, split_id).astype(np.int32)
            sizes = np.bincount(labels[active], minlength=n)
            deeper = splits.paths[self.node_table, depth + 1] >= 0 if depth + 1 < splits.depth else np.zeros(n, bool)
            self.progress.done(f"sets at split depth {depth + 1}", int(np.unique(labels[active]).size), "sets")
            active = active & (sizes[labels] >= theta) & deeper
        return labels, split_id

    # -- output ----------------------------------------------------------------
    def _write(
        self, comp: np.ndarray, labels: np.ndarray, split_id: np.ndarray, splits: CompiledSplits, out_dir: str
    ) -> dict[str, int]:
        fs = self.store.fs
        ids = self.nodes
        ccid, csid = ids[comp], ids[labels]
        t = self.triples
        src_csid, dst_csid = csid[self.si], csid[self.di]
        indexed = pa.table(
            {
                **{c: t.column(c) for c in ("src", "dst", "op", "src_table", "dst_table")},
                "ccid": ccid[self.di],
                "src_csid": src_csid,
                "dst_csid": dst_csid,
            },
            schema=layout.INDEXED_TRIPLES,
        )
        write_bucketed(fs, indexed, dst_csid, layout.TRIPLE_BUCKETS, f"{out_dir}/triples")
        self.progress.done("wrote triples", indexed.num_rows, "triples")

        cross = src_csid != dst_csid
        dep_src, dep_dst = unique_pairs(src_csid[cross], dst_csid[cross])
        deps = pa.table({"src_csid": dep_src, "dst_csid": dep_dst}, schema=layout.SETDEPS)
        write_bucketed(fs, deps, dep_dst, layout.SETDEP_BUCKETS, f"{out_dir}/setdeps")
        write_bucketed(fs, deps, dep_src, layout.SETDEP_BUCKETS, f"{out_dir}/rsetdeps")

        values = pa.table({"value_id": ids, "ccid": ccid, "csid": csid}, schema=layout.VALUE_SETS)
        write_bucketed(fs, values, ids, layout.VALUE_BUCKETS, f"{out_dir}/value_sets")

        n = len(ids)
        set_nodes = np.bincount(labels, minlength=n)
        set_triples = np.bincount(labels[self.di], minlength=n)
        roots = np.flatnonzero(set_nodes)
        names = np.array((*splits.names, ""), dtype=object)
        split_names = pa.array(names[split_id[roots]], type=pa.string(), mask=split_id[roots] < 0)
        sets = pa.table(
            {
                "csid": ids[roots],
                "ccid": ccid[roots],
                "split": split_names,
                "nodes": set_nodes[roots],
                "triples": set_triples[roots],
            },
            schema=layout.SETS,
        )
        pq.write_table(sets, f"{out_dir}/sets.parquet", filesystem=fs)
        comp_nodes = np.bincount(comp, minlength=n)
        comp_triples = np.bincount(comp[self.di], minlength=n)
        croots = np.flatnonzero(comp_nodes)
        components = pa.table(
            {"ccid": ids[croots], "nodes": comp_nodes[croots], "triples": comp_triples[croots]},
            schema=layout.COMPONENTS,
        )
        pq.write_table(components, f"{out_dir}/components.parquet", filesystem=fs)
        return {
            "triples": indexed.num_rows,
            "values": n,
            "components": len(croots),
            "sets": len(roots),
            "set_dependencies": deps.num_rows,
        }


def unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``(a, b)`` pairs sorted by ``(a, b)`` (a lexsort: much faster
    than ``np.unique(axis=1)``)."""
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    first = np.ones(len(a), dtype=bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[first], b[first]


def write_bucketed(fs: pa.fs.FileSystem, table: pa.Table, key: np.ndarray, buckets: int, folder: str) -> None:
    """``folder/bucket=K/part-0.parquet`` for every K (empty buckets get an empty
    file, so readers never need to special-case a missing directory); a
    stable sort keeps the rows' order (value_sets: by value_id) in each file."""
    bucket = np.asarray(key, dtype=np.int64) % buckets
    order = np.argsort(bucket, kind="stable")
    starts = np.searchsorted(bucket[order], np.arange(buckets + 1))
    ordered = table.take(pa.array(order)) if len(order) else table
    for k in range(buckets):
        part = ordered.slice(int(starts[k]), int(starts[k + 1] - starts[k]))
        fs.create_dir(f"{folder}/bucket={k}", recursive=True)
        pq.write_table(part, f"{folder}/bucket={k}/part-0.parquet", filesystem=fs)
