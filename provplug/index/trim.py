"""Removing deleted runs from the layers of an index generation, the base
layer included, without a full build (:mod:`provplug.index.incremental`).

The new generation starts as hard links to the live one's files. Trimming
rewrites only the files that held what the deleted runs contributed; every
other file stays a link, and no set or component id changes:

* **Triples.** A run derives only cells of its own tables (captured cells
  and imported ones alike get table ids reserved by their run, never
  reused), so a deleted run's triples are exactly the indexed rows whose
  ``dst_table`` is no longer a table of the store. Each triple bucket's
  ``dst_table`` column is read (a small dictionary-encoded column); the
  buckets holding such rows are rewritten without them (Parquet and mapped
  file). The rows kept per layer must equal the triples its remaining runs
  hold (their manifests' counts), else :class:`CannotTrim`: the caller
  builds in full rather than risk an index that differs from a rebuild.
* **Values.** An end of a removed triple that no remaining triple of the
  store has (one streaming scan of the ``src``/``dst`` columns) leaves the
  ``value_sets`` bucket of whichever layer indexed it.
* **Set dependencies.** A pair of sets only the removed triples joined
  leaves ``setdeps``/``rsetdeps`` (the kept rows of the set a pair points to
  are all in a rewritten bucket, so this is decided there).
* **Sets and components** keep their ids; ``sets.parquet`` and
  ``components.parquet`` get their counts lowered. A component the deleted
  run had joined stays joined, as when a layer is dropped: CCProv then reads
  a few more triples, every method still answers as a full rebuild
  (answers follow the triples, and the removed ones are gone).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from provplug import sortedints
from provplug.index import integrity, layout
from provplug.index.mapped import (
    FENCE_ROWS,
    FENCES,
    MAPPED_BUCKETED,
    MAPPED_MANIFEST,
    bucket_file,
    fences_file,
    read_fences,
    write_sorted,
)
from provplug.index.spill import write_parquet
from provplug.plugin.protocols import Store
from provplug.store import files as storefiles
from provplug.store.triples import TripleFilter, triple_batches


class CannotTrim(Exception):
    """The layers do not hold the remaining runs' triples exactly: build in full."""


@dataclasses.dataclass
class LayerFiles:
    """One layer of the generation being written: where it is, what it holds."""

    path: str  # relative to the generation ("" the base)
    root: str  # its directory
    files: dict[str, int]  # relative to ``root`` -> size
    buckets: dict[str, int]

    def data_files(self, dataset: str, bucket: int) -> list[str]:
        folder = f"{dataset}/bucket={bucket}/"
        return sorted(p for p in self.files if p.startswith(folder) and integrity.is_data_file(p))

    @property
    def mapped(self) -> bool:
        return MAPPED_MANIFEST in self.files


@dataclasses.dataclass
class Removed:
    """What trimming took out of one layer."""

    triples: int = 0
    values: int = 0
    rewritten: list[str] = dataclasses.field(default_factory=list)
    set_triples: dict[int, int] = dataclasses.field(default_factory=dict)  # dst_csid -> rows removed
    component_triples: dict[int, int] = dataclasses.field(default_factory=dict)
    set_nodes: dict[int, int] = dataclasses.field(default_factory=dict)
    component_nodes: dict[int, int] = dataclasses.field(default_factory=dict)
    kept_triples: int = 0


def layers_of(gen_dir: str, meta: dict[str, Any], files: dict[str, int], paths: Iterable[str]) -> list[LayerFiles]:
    out = []
    entries = {str(e["path"]): e for e in meta.get("layers", [])}
    for path in paths:
        prefix = f"{path}/" if path else ""
        mine = {
            p[len(prefix) :]: s
            for p, s in files.items()
            if p.startswith(prefix) and (path or not p.startswith("layers/"))
        }
        buckets = entries[path].get("buckets", meta["buckets"]) if path else meta["buckets"]
        root = f"{gen_dir}/{path}" if path else gen_dir
        out.append(LayerFiles(path, root, mine, {k: int(v) for k, v in buckets.items()}))
    return out


def trim(
    store: Store, layers: list[LayerFiles], trimmed: dict[str, int], present_tables: np.ndarray
) -> dict[str, Removed]:
    """Remove from ``layers`` the triples whose destination table is not in
    ``present_tables`` (``trimmed``: layer path -> triples its remaining runs
    hold, for the layers to trim), the values no remaining triple has, and
    the set dependencies only removed triples made. Files are rewritten in
    place of their links; return what each layer lost."""
    removed = {layer.path: Removed() for layer in layers}
    ends: list[np.ndarray] = []
    for layer in layers:
        if layer.path not in trimmed:
            continue
        ends.append(_trim_triples(layer, present_tables, removed[layer.path]))
        if removed[layer.path].kept_triples != trimmed[layer.path]:
            raise CannotTrim(
                f"layer {layer.path or 'base'} keeps {removed[layer.path].kept_triples} triples, "
                f"its remaining runs hold {trimmed[layer.path]}"
            )
    candidates = sortedints.unique(np.concatenate(ends)) if ends else np.empty(0, np.int64)
    dead = np.setdiff1d(candidates, _still_on_a_triple(store, candidates), assume_unique=True)
    for layer in layers:
        _drop_values(layer, dead, removed[layer.path])
        _lower_counts(layer, removed[layer.path])
        if removed[layer.path].rewritten and layer.mapped:
            _rewrite_manifest(layer, removed[layer.path].rewritten)
    return removed


# -- triples and set dependencies ------------------------------------------------------------


def _trim_triples(layer: LayerFiles, present_tables: np.ndarray, removed: Removed) -> np.ndarray:
    """Rewrite the triple buckets holding deleted rows; return the removed rows' ends."""
    gone_pairs: list[np.ndarray] = []
    kept_pairs: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    for b in range(layer.buckets["triples"]):
        parts = [f"{layer.root}/{p}" for p in layer.data_files("triples", b)]
        if not parts:
            continue
        dst_table = _column(parts, "dst_table")
        gone = ~sortedints.isin(dst_table, present_tables)
        removed.kept_triples += int(np.count_nonzero(~gone))
        if not gone.any():
            continue
        table = _read(parts, list(layout.INDEXED_TRIPLES.names))
        out, kept = table.filter(pa.array(gone)), table.filter(pa.array(~gone))
        _count(removed.set_triples, _ints(out, "dst_csid"))
        _count(removed.component_triples, _ints(out, "ccid"))
        removed.triples += out.num_rows
        ends += [_ints(out, "src"), _ints(out, "dst")]
        gone_pairs.append(_cross_pairs(out))
        kept_pairs.append(
            _cross_pairs(kept.filter(pa.array(sortedints.isin(_ints(kept, "dst_csid"), _ints(out, "dst_csid")))))
        )
        _replace_bucket(layer, "triples", b, kept, _ints(kept, "dst_csid"), removed)
    lost = _pairs_only_in(gone_pairs, kept_pairs)
    if len(lost):
        _drop_pairs(layer, "setdeps", lost, lost[:, 1], removed)
        _drop_pairs(layer, "rsetdeps", lost, lost[:, 0], removed)
    return np.concatenate(ends) if ends else np.empty(0, np.int64)


def _cross_pairs(triples: pa.Table) -> np.ndarray:
    src, dst = _ints(triples, "src_csid"), _ints(triples, "dst_csid")
    cross = src != dst
    return np.stack([src[cross], dst[cross]], axis=1)


def _pairs_only_in(gone: list[np.ndarray], kept: list[np.ndarray]) -> np.ndarray:
    """The distinct ``(src_csid, dst_csid)`` of ``gone`` that no kept row has."""
    if not gone:
        return np.empty((0, 2), np.int64)
    lost = sortedints.unique_rows(np.concatenate(gone))
    still = sortedints.unique_rows(np.concatenate(kept)) if kept else np.empty((0, 2), np.int64)
    return np.asarray(lost[~_rows_in(lost, still)], dtype=np.int64)


def _rows_in(pairs: np.ndarray, others: np.ndarray) -> np.ndarray:
    return sortedints.rows_isin(pairs, others)


def _drop_pairs(layer: LayerFiles, dataset: str, lost: np.ndarray, key: np.ndarray, removed: Removed) -> None:
    """Rewrite the buckets of ``dataset`` (keyed as ``key``) without the ``lost`` pairs."""
    buckets = layer.buckets[dataset]
    key_column = MAPPED_BUCKETED[dataset][0]
    for b in sortedints.unique(key % buckets).tolist():
        parts = [f"{layer.root}/{p}" for p in layer.data_files(dataset, b)]
        if not parts:
            continue
        table = _read(parts, list(layout.SETDEPS.names))
        pairs = np.stack([_ints(table, "src_csid"), _ints(table, "dst_csid")], axis=1)
        keep = ~_rows_in(pairs, lost)
        if keep.all():
            continue
        kept = table.filter(pa.array(keep))
        _replace_bucket(layer, dataset, b, kept, _ints(kept, key_column), removed)


# -- values ---------------------------------------------------------------------------------


def _still_on_a_triple(store: Store, values: np.ndarray) -> np.ndarray:
    """Those of the sorted ``values`` some triple of the store has as an end
    (the deleted runs' triples are gone from it)."""
    if len(values) == 0:
        return values
    alive = np.zeros(len(values), bool)
    for batch in triple_batches(store, ("src", "dst"), TripleFilter()):
        for column in ("src", "dst"):
            sortedints.mark_present(values, np.asarray(batch.column(column).to_numpy(), np.int64), alive)
    return np.asarray(values[alive], dtype=np.int64)


def _drop_values(layer: LayerFiles, dead: np.ndarray, removed: Removed) -> None:
    if len(dead) == 0:
        return
    buckets = layer.buckets["value_sets"]
    of = dead % buckets
    for b in sortedints.unique(of).tolist():
        parts = [f"{layer.root}/{p}" for p in layer.data_files("value_sets", b)]
        if not parts:
            continue
        table = _read(parts, list(layout.VALUE_SETS.names))
        gone = sortedints.isin(_ints(table, "value_id"), dead[of == b])
        if not gone.any():
            continue
        out = table.filter(pa.array(gone))
        _count(removed.set_nodes, _ints(out, "csid"))
        _count(removed.component_nodes, _ints(out, "ccid"))
        removed.values += out.num_rows
        kept = table.filter(pa.array(~gone))
        _replace_bucket(layer, "value_sets", b, kept, _ints(kept, "value_id"), removed)


# -- sets and components ------------------------------------------------------------------------


def _lower_counts(layer: LayerFiles, removed: Removed) -> None:
    """``sets.parquet`` and ``components.parquet`` with the removed triples
    and values subtracted (ids and rows unchanged: ``mapped/sets_by_ccid`` stays)."""
    for name, key, nodes, triples in (
        ("sets.parquet", "csid", removed.set_nodes, removed.set_triples),
        ("components.parquet", "ccid", removed.component_nodes, removed.component_triples),
    ):
        if (not nodes and not triples) or name not in layer.files:
            continue
        table = storefiles.read_parquet(pafs_local(), f"{layer.root}/{name}")
        ids = _ints(table, key)
        columns = {c: table.column(c) for c in table.column_names}
        for column, lost in (("nodes", nodes), ("triples", triples)):
            columns[column] = pa.array(np.maximum(_ints(table, column) - _per_id(ids, lost), 0))
        _unlink(f"{layer.root}/{name}")
        lowered = pa.table(columns, schema=table.schema)
        pq.write_table(lowered, f"{layer.root}/{name}", **layout.parquet_options(lowered.schema))
        removed.rewritten.append(name)


# -- files ---------------------------------------------------------------------------------------


def pafs_local() -> pafs.LocalFileSystem:
    return pafs.LocalFileSystem()  # layers are trimmed only on local disk (hard links)


def _replace_bucket(
    layer: LayerFiles, dataset: str, bucket: int, table: pa.Table, key: np.ndarray, removed: Removed
) -> None:
    """Bucket ``bucket`` of ``dataset`` as ``table``: one Parquet file in
    place of the linked ones, rows in key order, and its mapped file."""
    order = np.argsort(key, kind="stable")
    table = table.take(pa.array(order))
    for part in layer.data_files(dataset, bucket):
        _unlink(f"{layer.root}/{part}")
        del layer.files[part]
    relative = f"{dataset}/bucket={bucket}/part-0.parquet"
    write_parquet(pafs_local(), f"{layer.root}/{relative}", table.schema, table.to_batches())
    layer.files[relative] = os.path.getsize(f"{layer.root}/{relative}")
    if layer.mapped:
        key_column, columns = MAPPED_BUCKETED[dataset]
        mapped = bucket_file(dataset, bucket)
        # write_sorted replaces the link by a rename: the live generation's file is untouched.
        size, _ = write_sorted(pafs_local(), f"{layer.root}/{mapped}", table.select([key_column, *columns]), key_column)
        layer.files[mapped] = size
        removed.rewritten.append(mapped)
    removed.rewritten.append(relative)


def _rewrite_manifest(layer: LayerFiles, rewritten: list[str]) -> None:
    """The mapped manifest (sizes, fences) after some buckets were rewritten."""
    fs = pafs_local()
    manifest = storefiles.read_json(fs, f"{layer.root}/{MAPPED_MANIFEST}")
    starts: dict[str, list[int]] = manifest.get(FENCES, {})
    for dataset, (key, _) in MAPPED_BUCKETED.items():
        changed = [b for b in range(layer.buckets[dataset]) if bucket_file(dataset, b) in rewritten]
        if not changed:
            continue
        manifest["files"].update({bucket_file(dataset, b): layer.files[bucket_file(dataset, b)] for b in changed})
        if dataset not in starts:
            continue  # a generation written before fences
        relative = fences_file(dataset)
        fences = read_fences(fs, f"{layer.root}/{relative}", layer.files[relative], starts[dataset])
        for b in changed:
            rows = _mapped_keys(f"{layer.root}/{bucket_file(dataset, b)}", key)
            fences[b] = rows[::FENCE_ROWS]
        starts[dataset] = [0, *np.cumsum([len(f) for f in fences]).tolist()]
        all_fences = pa.table({"key": np.concatenate(fences) if fences else np.empty(0, np.int64)})
        size, _ = write_sorted(fs, f"{layer.root}/{relative}", all_fences, None)
        manifest["files"][relative] = size
        layer.files[relative] = size
    manifest[FENCES] = starts
    path = f"{layer.root}/{MAPPED_MANIFEST}"
    _unlink(path)
    with open(path, "w") as out:
        out.write(json.dumps(manifest, indent=1))


def _mapped_keys(path: str, key: str) -> np.ndarray:
    with pa.memory_map(path) as source:
        return np.asarray(pa.ipc.open_file(source).read_all().column(key).to_numpy())


def _unlink(path: str) -> None:
    """Remove a (hard-linked) file before writing its replacement: writing
    through the link would change the live generation's file."""
    if os.path.lexists(path):
        os.unlink(path)


def _read(parts: list[str], columns: list[str]) -> pa.Table:
    return pa.concat_tables([pq.read_table(p, columns=columns) for p in parts])


def _column(parts: list[str], column: str) -> np.ndarray:
    return np.concatenate([np.asarray(pq.read_table(p, columns=[column]).column(0).to_numpy()) for p in parts])


def _ints(table: pa.Table, column: str) -> np.ndarray:
    return np.asarray(table.column(column).to_numpy(), dtype=np.int64)


def _per_id(ids: np.ndarray, counts: dict[int, int]) -> np.ndarray:
    """``counts`` of each of ``ids`` (0 for an id it lacks)."""
    out = np.zeros(len(ids), np.int64)
    if not counts or len(ids) == 0:
        return out
    keys = np.fromiter(counts.keys(), np.int64, len(counts))
    values = np.fromiter(counts.values(), np.int64, len(counts))
    order = np.argsort(ids, kind="stable")
    pos = np.searchsorted(ids[order], keys)
    for k, v, p in zip(keys.tolist(), values.tolist(), pos.tolist(), strict=True):
        while p < len(ids) and ids[order[p]] == k:  # an id may have several rows (one per layer it grew in)
            out[order[p]] += v
            p += 1
    return out


def _count(into: dict[int, int], ids: np.ndarray) -> None:
    keys, counts = sortedints.unique_counts(ids)
    for k, c in zip(keys.tolist(), counts.tolist(), strict=True):
        into[k] = into.get(k, 0) + c
