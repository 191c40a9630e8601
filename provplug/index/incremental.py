"""Incremental index: a new generation from the live one plus the runs committed
(or deleted) since, in work that grows with those runs, not with the store.

Design: a generation is a stack of **layers**. The first is the full build's
own layout at the generation's root (:mod:`provplug.index.layout`); each
incremental build adds one layer, ``layers/L-GEN/``, with the same layout
(buckets, ``sets.parquet``, ``components.parquet``, mapped files) holding
only the new runs' triples and values. A value is in the ``value_sets`` of
exactly one layer; a triple in exactly one layer. Readers
(:class:`provplug.query.index_reader.LayeredIndexReader`) look a key up in
every layer and concatenate what they find.

* **Files are reused, not rewritten.** The new generation's directory gets a
  hard link to every file of the live generation it keeps (the base layer
  and earlier layers); only the new layer, ``aliases.parquet`` and
  ``meta.json`` are written. A hard link keeps the file when ``gc`` removes
  the old generation, costs no space, and keeps the generation one
  self-contained directory (the integrity record and ``gc`` work unchanged).
  References to another generation's directory would tie its lifetime to
  ours; copying would cost what a full build writes. Off local disk (no
  hard links) the build is full.
* **Components: union-find over the existing component ids and the new
  values.** Each new triple's ends are mapped to the (logical) component of
  an indexed value or to the new value itself, and the weakly connected
  components of those edges merge them; a merged component's id is the
  smallest id in it, so component ids equal a full rebuild's. Old rows keep
  their old ``ccid``; ``aliases.parquet`` (``ccid -> merged ccid``, every
  merge so far, flattened) maps them, and the reader resolves through it.
* **Sets are never re-partitioned.** Every existing set keeps its id and its
  rows (so untouched sets are stable, and so are touched ones). New values
  get sets of their own: the weakly connected components of the new triples
  between new values; one of at least ``theta`` values is partitioned by the
  live generation's depth-0 split of each value's table (by table name; a
  table no split names is a split of its own), as Algorithm 3 would. A new
  triple between sets is a set dependency of the new layer. Any partition of
  the values into sets gives CSProv the same answer (set-lineage follows
  every cross-set triple), so the answers equal a full rebuild's; only the
  sets differ (the rebuild would merge a small component that grew into one
  set), which costs queries a few more set hops, never a wrong answer.
* **Deleting a run** (``delete-run``, ``gc`` retention) trims it from the
  layers holding it, the base included (:mod:`provplug.index.trim`): only
  the buckets that held its triples, the values only it had and the set
  dependencies only it made are rewritten, every other file stays a link,
  and no set or component id changes; a layer left with no run, triple or
  value goes. Component merges it caused stay, which only makes components
  coarser: answers are unchanged. When the kept rows do not match the
  remaining runs' manifests exactly, the build is full instead.
* **Compaction**: a full build (``provplug index --full``, the Spark engine,
  a different ``theta`` or ``--splits``, or once the layers hold more than
  :data:`MAX_LAYER_SHARE` of the triples or :data:`MAX_LAYERS` layers)
  rebuilds one base layer from all triples.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from provplug import sortedints
from provplug.index import integrity, layout, trim
from provplug.index.generation import generation_meta, new_generation_name, publish, remove_stale_generations
from provplug.index.localwcc import wcc_labels
from provplug.index.mapped import (
    FENCES,
    MAPPED_MANIFEST,
    MappedRows,
    bucket_file,
    fences_file,
    map_sorted,
    read_fences,
    will_need_heads,
)
from provplug.index.spill import write_parquet
from provplug.index.workflow import TableCatalogue
from provplug.model import utc_now
from provplug.plugin.protocols import Store
from provplug.progress import Progress
from provplug.store import files as storefiles
from provplug.store import versions
from provplug.store.triples import TripleFilter, triple_table

LAYERS = "layers"  # meta.json key: [{path, runs, triples, values}] above the base layer
ALIASES = "aliases.parquet"  # at the generation's root: ccid -> merged ccid
ALIAS_SCHEMA = pa.schema([pa.field("ccid", pa.int64(), nullable=False), pa.field("merged", pa.int64(), nullable=False)])
# Past these a build is full (it compacts the layers into one base).
MAX_LAYERS = 32
MAX_LAYER_SHARE = 0.25
TRIPLE_COLUMNS = ("src", "dst", "op", "src_table", "dst_table")


@dataclasses.dataclass(frozen=True)
class Change:
    """What the store gained and lost since generation ``live`` was built."""

    live: str
    meta: dict[str, Any]
    runs: list[str]  # the store's runs now, in order
    added: list[str]  # runs with triples the live generation lacks
    trimmed: dict[str, int]  # layers ("" the base) holding deleted runs -> triples their other runs hold
    deleted: list[str]  # indexed runs no longer in the store

    @property
    def layers(self) -> list[dict[str, Any]]:
        return list(self.meta.get(LAYERS, []))


def layer_paths(meta: dict[str, Any]) -> list[str]:
    """The generation's layers above its base (relative paths)."""
    return [str(entry["path"]) for entry in meta.get(LAYERS, [])]


def plan(store: Store, live: str | None, theta: int, splits: Any, engine: str) -> Change | None:
    """The change to index incrementally, or None when the build must be full."""
    if live is None or splits is not None or engine == "spark" or not store.local:
        return None
    meta = generation_meta(store, live)
    indexed = meta.get("runs")
    if meta.get("theta") != theta or not isinstance(indexed, list) or integrity.FILES not in meta:
        return None
    manifests = store.runs()
    present = [m["run_id"] for m in manifests]
    added = [m["run_id"] for m in manifests if m["run_id"] not in indexed and "triples" in m.get("datasets", ())]
    deleted = set(indexed) - set(present)
    layers = list(meta.get(LAYERS, []))
    if not added and not deleted:
        return None  # nothing new: a full build (it compacts the layers)
    if deleted and _read_by_a_remaining_run(store, deleted):
        return None  # the reader's link to the deleted cells left its run, not the index: only a rebuild drops it
    if len(layers) + 1 > MAX_LAYERS:
        return None
    in_layers = {str(r) for entry in layers for r in entry["runs"]}
    holders = [("", [str(r) for r in indexed if r not in in_layers])]
    holders += [(str(e["path"]), [str(r) for r in e["runs"]]) for e in layers]
    triples = {m["run_id"]: _triple_count(m) for m in manifests}
    trimmed = {path: sum(triples[r] for r in runs if r not in deleted) for path, runs in holders if set(runs) & deleted}
    return Change(live, meta, present, added, trimmed, sorted(deleted))


def _read_by_a_remaining_run(store: Store, deleted: set[str]) -> bool:
    """Whether a run still in the store read a dataset version one of the ``deleted`` runs wrote."""
    return any(read.run_id in deleted for run in versions.versions_of(store) for read in run.reads)


def _triple_count(manifest: dict[str, Any]) -> int:
    counts = manifest.get("counts", {})
    return int(counts.get("triples", 0)) + int(counts.get("location_triples", 0))


def update(store: Store, change: Change, catalogue: TableCatalogue, progress: Progress) -> dict[str, Any] | None:
    """Index ``change`` into a new generation and publish it; its meta, or None
    when the new triples are too many for a layer or the deleted runs cannot
    be trimmed exactly (the caller builds in full)."""
    t0 = time.monotonic()
    triples = _new_triples(store, change.added)
    base_triples = int(change.meta.get("counts", {}).get("triples", 0))
    layered = sum(int(e.get("triples", 0)) for e in change.layers)
    if triples.num_rows and triples.num_rows + layered > MAX_LAYER_SHARE * max(base_triples, 1):
        progress.done(f"{triples.num_rows:,} new triples: more than the layers may hold, building in full")
        return None
    progress.done("read new triples", triples.num_rows, "triples")
    live_dir = store.path(layout.INDEX_DIR, change.live)
    name = new_generation_name()
    gen_dir = store.path(layout.INDEX_DIR, name)
    remove_stale_generations(store, keep={change.live, _pointer(store, "PREVIOUS")})
    try:
        _link_kept(store, live_dir, gen_dir, change)
        removed = _trim_deleted(store, gen_dir, change)
        if removed is None:
            store.fs.delete_dir(gen_dir)
            progress.done("the deleted runs cannot be trimmed from the index exactly, building in full")
            return None
        dropped = _drop_emptied(gen_dir, change, removed)
        progress.done(
            f"deleted runs trimmed from {len(removed)} layer(s)", sum(r.triples for r in removed.values()), "triples"
        )
        kept = ["", *(p for p in layer_paths(change.meta) if p not in dropped)]
        now = {**change.meta, integrity.FILES: integrity.listing(store.fs, gen_dir)}
        aliases = _read_aliases(store, live_dir, change.meta)
        entry: dict[str, Any] | None = None
        touched = 0
        if triples.num_rows:
            layer = f"{LAYERS}/L-{name}"
            ends = sortedints.unique(_ends(triples))
            old = _lookup(store, gen_dir, now, kept, ends, aliases)
            built = _build_layer(triples, ends, old, aliases, change.meta, catalogue, int(change.meta["theta"]))
            aliases, touched = built.aliases, built.touched
            counts = _write_layer(store, f"{gen_dir}/{layer}", built)
            entry = {"path": layer, "runs": list(change.added), **counts}
        _write_aliases(store, gen_dir, aliases)
        meta = _meta(change, name, entry, touched, removed, dropped, time.monotonic() - t0)
        meta[integrity.FILES] = integrity.listing(store.fs, gen_dir)
        store.write_text(f"{gen_dir}/{layout.META}", json.dumps(meta, indent=1))
        publish(store, name)
    except BaseException:
        store.fs.delete_dir(gen_dir)
        raise
    progress.done(
        f"index {name} published (incremental: {len(change.added)} run(s) added, "
        f"{len(change.deleted)} deleted, {len(dropped)} layer(s) dropped)"
    )
    return meta


def _trim_deleted(store: Store, gen_dir: str, change: Change) -> dict[str, trim.Removed] | None:
    """Take the deleted runs out of the layers holding them (see
    :mod:`provplug.index.trim`); None when that cannot be done exactly."""
    if not change.trimmed:
        return {}
    files = integrity.listing(store.fs, gen_dir)
    layers = trim.layers_of(gen_dir, change.meta, files, ["", *layer_paths(change.meta)])
    tables = np.asarray(store.tables().column("table_id").to_numpy(), dtype=np.int64)
    try:
        return trim.trim(store, layers, change.trimmed, tables)
    except trim.CannotTrim:
        return None


def _drop_emptied(gen_dir: str, change: Change, removed: dict[str, trim.Removed]) -> list[str]:
    """Remove the layers left with no run, triple or value; their paths."""
    dropped = []
    for entry in change.layers:
        path = str(entry["path"])
        lost = removed.get(path)
        if lost is None or set(entry["runs"]) - set(change.deleted):
            continue
        if lost.kept_triples == 0 and lost.values >= int(entry.get("values", 0)):
            shutil.rmtree(f"{gen_dir}/{path}")
            dropped.append(path)
    return dropped


def _pointer(store: Store, name: str) -> str | None:
    path = store.path(layout.INDEX_DIR, name)
    if store.fs.get_file_info(path).type != pafs.FileType.File:
        return None
    return storefiles.read_text(store.fs, path).strip() or None


# -- reading ------------------------------------------------------------------------------


def _new_triples(store: Store, runs: Sequence[str]) -> pa.Table:
    if not runs:
        return pa.table({c: pa.array([], pa.int64()) for c in TRIPLE_COLUMNS})
    return triple_table(store, TRIPLE_COLUMNS, TripleFilter.of(runs=runs))


def _ints(table: pa.Table, column: str) -> np.ndarray:
    return np.asarray(table.column(column).to_numpy(), dtype=np.int64)


def _ends(triples: pa.Table) -> np.ndarray:
    return np.concatenate([_ints(triples, "src"), _ints(triples, "dst")])


def _link_kept(store: Store, live_dir: str, gen_dir: str, change: Change) -> None:
    """Hard-link every file of the live generation but the aliases (rewritten);
    trimming replaces the links of the files it changes."""
    made: set[str] = set()
    for relative in change.meta[integrity.FILES]:
        if relative == ALIASES:
            continue
        target = f"{gen_dir}/{relative}"
        folder = os.path.dirname(target)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        os.link(f"{live_dir}/{relative}", target)


def _read_aliases(store: Store, gen_dir: str, meta: dict[str, Any]) -> dict[int, int]:
    if ALIASES not in meta.get(integrity.FILES, {}):
        return {}
    table = storefiles.read_parquet(store.fs, f"{gen_dir}/{ALIASES}")
    return dict(zip(_ints(table, "ccid").tolist(), _ints(table, "merged").tolist(), strict=True))


def resolve(ccids: np.ndarray, aliases: dict[int, int]) -> np.ndarray:
    """Each component id as merged so far (the map is kept flat)."""
    if not aliases:
        return ccids
    keys = np.fromiter(aliases.keys(), np.int64, len(aliases))
    merged = np.fromiter(aliases.values(), np.int64, len(aliases))
    order = np.argsort(keys)
    keys, merged = keys[order], merged[order]
    pos = np.minimum(np.searchsorted(keys, ccids), len(keys) - 1)
    hit = keys[pos] == ccids
    return np.where(hit, merged[pos], ccids)


def _lookup(
    store: Store,
    gen_dir: str,
    meta: dict[str, Any],
    layers: Iterable[str],
    values: np.ndarray,
    aliases: dict[int, int],
) -> tuple[np.ndarray, np.ndarray]:
    """``(ccid, csid)`` of each of the sorted ``values`` in the kept layers (-1: new)."""
    ccid = np.full(len(values), -1, np.int64)
    csid = np.full(len(values), -1, np.int64)
    for layer in layers:
        root = f"{gen_dir}/{layer}".rstrip("/")
        prefix = f"{layer}/" if layer else ""
        files = {p[len(prefix) :]: s for p, s in meta[integrity.FILES].items() if p.startswith(prefix)}
        found_c, found_s = _layer_lookup(store, root, files, values, _value_buckets(meta, layer))
        hit = found_s >= 0
        ccid[hit], csid[hit] = found_c[hit], found_s[hit]
    return resolve(ccid, aliases), csid


def _value_buckets(meta: dict[str, Any], layer: str) -> int:
    entry = next((e for e in meta.get(LAYERS, []) if e["path"] == layer), meta)
    return int(entry.get("buckets", meta["buckets"])["value_sets"])


def _layer_lookup(
    store: Store, root: str, files: dict[str, int], values: np.ndarray, buckets: int
) -> tuple[np.ndarray, np.ndarray]:
    """One layer's ``value_sets`` rows of ``values``: from its mapped files
    or, without them, a filtered scan."""
    ccid = np.full(len(values), -1, np.int64)
    csid = np.full(len(values), -1, np.int64)
    of = values % buckets
    groups = {b: np.flatnonzero(of == b) for b in sortedints.unique(of).tolist()}
    mapped = _mapped_value_sets(store, root, files, list(groups))
    for b, at in groups.items():
        if b in mapped:
            continue
        parts = [f"{root}/{p}" for p in files if p.startswith(f"value_sets/bucket={b}/") and integrity.is_data_file(p)]
        if not parts:
            continue
        table = storefiles.scan(
            store.fs,
            parts,
            parts[0],
            columns=["value_id", "ccid", "csid"],
            filter=pc.field("value_id").isin(pa.array(values[at].tolist(), pa.int64())),
        )
        pos = np.searchsorted(values, _ints(table, "value_id"))
        ccid[pos], csid[pos] = _ints(table, "ccid"), _ints(table, "csid")
    _mapped_lookup(mapped, {b: values[groups[b]] for b in mapped}, {b: groups[b] for b in mapped}, ccid, csid)
    return ccid, csid


def _mapped_value_sets(store: Store, root: str, files: dict[str, int], buckets: list[int]) -> dict[int, MappedRows]:
    """The layer's mapped ``value_sets`` files of ``buckets`` (those it has),
    with their fences when the generation has them."""
    wanted = {b: bucket_file("value_sets", b) for b in buckets if bucket_file("value_sets", b) in files}
    if not wanted:
        return {}
    fences: list[np.ndarray] | None = None
    starts = storefiles.read_json(store.fs, f"{root}/{MAPPED_MANIFEST}").get(FENCES, {}).get("value_sets")
    fence_file = fences_file("value_sets")
    if starts and fence_file in files:
        fences = read_fences(store.fs, f"{root}/{fence_file}", files[fence_file], starts)
    will_need_heads((f"{root}/{r}", files[r]) for r in wanted.values())  # every file's header, at once
    return {
        b: map_sorted(store.fs, f"{root}/{r}", "value_id", files[r], fences[b] if fences else None)
        for b, r in wanted.items()
    }


def _mapped_lookup(
    mapped: dict[int, MappedRows],
    keys: dict[int, np.ndarray],
    at: dict[int, np.ndarray],
    ccid: np.ndarray,
    csid: np.ndarray,
) -> None:
    """``ccid[at[b]]``, ``csid[at[b]]`` of the sorted ``keys[b]`` found in
    each mapped bucket ``b``. In phases over all the buckets (as queries do,
    :mod:`provplug.index.mapped`): the key pages of every bucket are asked of
    the kernel at once, searched, then the found rows' pages asked at once
    and gathered. A new run's ends are spread over nearly every page of a
    large store's value_sets: left to page faults (the files are mapped
    ``MADV_RANDOM``), that is one synchronous 4 KiB read per page, and at 9x
    the lookups took 6 to 27 s depending on what the page cache held; asked
    for together, the reads go out as a few long ranges."""
    plans = {b: rows.will_need_keys(keys[b]) for b, rows in mapped.items()}
    spans = {b: rows.spans(keys[b], plans[b]) for b, rows in mapped.items()}
    for b, rows in mapped.items():
        rows.will_need_rows(*spans[b], ("ccid", "csid"))
    for b, rows in mapped.items():
        lo, hi = spans[b]
        hit = hi > lo
        ccid[at[b][hit]] = rows.cols["ccid"][lo[hit]]
        csid[at[b][hit]] = rows.cols["csid"][lo[hit]]


# -- the new layer ----------------------------------------------------------------------------


@dataclasses.dataclass
class Layer:
    triples: pa.Table  # TRIPLE_COLUMNS
    ccid: np.ndarray  # per triple: the merged component
    src_csid: np.ndarray
    dst_csid: np.ndarray
    values: np.ndarray  # new values, sorted
    value_ccid: np.ndarray
    value_csid: np.ndarray
    set_split: dict[int, str | None]  # new set -> split that made it (None: a set of the whole group)
    aliases: dict[int, int]
    touched: int  # components the layer joined or grew
    new_components: int  # components after the layer less those before (new ones less merged ones)


def _build_layer(
    triples: pa.Table,
    ends: np.ndarray,
    old: tuple[np.ndarray, np.ndarray],
    aliases: dict[int, int],
    meta: dict[str, Any],
    catalogue: TableCatalogue,
    theta: int,
) -> Layer:
    src, dst = _ints(triples, "src"), _ints(triples, "dst")  # ``ends``: their distinct values
    old_ccid, old_csid = old
    new = old_csid < 0
    # Components: nodes are the indexed components touched and the new values.
    nodes = sortedints.unique(np.concatenate([old_ccid[~new], ends[new]]))
    node_of_end = np.searchsorted(nodes, np.where(new, ends, old_ccid))
    at_src, at_dst = np.searchsorted(ends, src), np.searchsorted(ends, dst)
    root = nodes[wcc_labels(len(nodes), node_of_end[at_src], node_of_end[at_dst])]
    moved = nodes != root
    merged = dict(zip(nodes[moved].tolist(), root[moved].tolist(), strict=True))
    old_nodes = sortedints.isin(nodes, old_ccid[~new])
    aliases = _merge_aliases(aliases, merged, nodes[old_nodes])
    end_ccid = root[node_of_end]
    roots = sortedints.unique(root)
    # Sets of the new values.
    values = ends[new]
    value_csid, set_split = _new_sets(values, src, dst, triples, meta, catalogue, theta)
    end_csid = old_csid.copy()
    end_csid[new] = value_csid
    return Layer(
        triples=triples,
        ccid=end_ccid[at_dst],
        src_csid=end_csid[at_src],
        dst_csid=end_csid[at_dst],
        values=values,
        value_ccid=end_ccid[new],
        value_csid=value_csid,
        set_split=set_split,
        aliases=aliases,
        touched=len(roots),
        new_components=len(roots) - int(np.count_nonzero(old_nodes)),
    )


def _merge_aliases(aliases: dict[int, int], merged: dict[int, int], touched_old: np.ndarray) -> dict[int, int]:
    """The flat map after ``merged``: earlier entries whose target merged now
    follow it; indexed components merged now get an entry."""
    out = {a: merged.get(b, b) for a, b in aliases.items()}
    old = set(touched_old.tolist())
    out.update({a: b for a, b in merged.items() if a in old})
    return {a: b for a, b in out.items() if a != b}


def _new_sets(
    values: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    triples: pa.Table,
    meta: dict[str, Any],
    catalogue: TableCatalogue,
    theta: int,
) -> tuple[np.ndarray, dict[int, str | None]]:
    """``csid`` of each new value: the weakly connected components of the new
    triples between new values; one of at least ``theta`` values is split
    by the depth-0 split of its values' tables (Algorithm 3's first round)."""
    if len(values) == 0:
        return np.zeros(0, np.int64), {}
    both = sortedints.isin(src, values) & sortedints.isin(dst, values)
    si, di = np.searchsorted(values, src[both]), np.searchsorted(values, dst[both])
    group = wcc_labels(len(values), si, di)
    sizes = np.bincount(group, minlength=len(values))
    large = sizes[group] >= theta
    split_of: dict[int, str | None] = {}
    if large.any():
        key, names = _split_keys(values, src, dst, triples, meta, catalogue)
        keep = large[si] & large[di] & (key[si] == key[di])
        parts = wcc_labels(len(values), si[keep], di[keep])
        group = np.where(large, parts, group)
        split_of = {int(values[g]): names[int(key[g])] for g in sortedints.unique(group[large]).tolist()}
    csid = values[group]
    split_of.update({int(c): None for c in sortedints.unique(csid[~large]).tolist()})
    return csid, split_of


def _split_keys(
    values: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    triples: pa.Table,
    meta: dict[str, Any],
    catalogue: TableCatalogue,
) -> tuple[np.ndarray, list[str | None]]:
    """Per new value, the index of its table's depth-0 split (by name, in the
    live generation's split tree; a table it names not gets its own key)."""
    tree = meta.get("split_tree", [])
    names: list[str | None] = [str(s["name"]) for s in tree]
    split_of_table = {t: i for i, s in enumerate(tree) for t in s["tables"]}
    table_key = np.array([split_of_table.get(n, len(names) + c) for c, n in enumerate(catalogue.names)] or [0])
    names += [None] * len(catalogue.names)
    codes = np.full(len(values), np.iinfo(np.int64).max, np.int64)
    for ends, column in ((src, "src_table"), (dst, "dst_table")):
        mine = sortedints.isin(ends, values)
        table_codes = catalogue.codes(_ints(triples, column)[mine], "")
        np.minimum.at(codes, np.searchsorted(values, ends[mine]), table_codes)
    return table_key[codes], names


# -- writing ------------------------------------------------------------------------------------

# A layer's buckets hold about this many rows each (up to the base layout's
# counts): a small layer is a few files, not the 160 of a full build.
LAYER_BUCKET_ROWS = 1 << 18


def layer_buckets(triples: int) -> dict[str, int]:
    """Bucket counts of a layer of ``triples`` triples (meta.json ``layers[i].buckets``)."""

    def count(full: int) -> int:
        return int(min(full, max(1, -(-triples // LAYER_BUCKET_ROWS))))

    return {
        "triples": count(layout.TRIPLE_BUCKETS),
        "setdeps": count(layout.SETDEP_BUCKETS),
        "rsetdeps": count(layout.SETDEP_BUCKETS),
        "value_sets": count(layout.VALUE_BUCKETS),
    }


def _write_layer(store: Store, layer_dir: str, built: Layer) -> dict[str, int]:
    from provplug.index.mapped import write_mapped

    fs = store.fs
    t = built.triples
    indexed = pa.table(
        [
            *(t.column(c).cast(layout.INDEXED_TRIPLES.field(c).type) for c in TRIPLE_COLUMNS),
            pa.array(built.ccid),
            pa.array(built.src_csid),
            pa.array(built.dst_csid),
        ],
        schema=layout.INDEXED_TRIPLES,
    )
    buckets = layer_buckets(indexed.num_rows)
    _write_buckets(fs, layer_dir, "triples", indexed, built.dst_csid, buckets["triples"])
    cross = built.src_csid != built.dst_csid
    pairs = sortedints.unique_rows(np.stack([built.src_csid[cross], built.dst_csid[cross]], axis=1))
    deps = pa.table([pa.array(pairs[:, 0]), pa.array(pairs[:, 1])], schema=layout.SETDEPS)
    _write_buckets(fs, layer_dir, "setdeps", deps, pairs[:, 1], buckets["setdeps"])
    _write_buckets(fs, layer_dir, "rsetdeps", deps, pairs[:, 0], buckets["rsetdeps"])
    values = pa.table(
        [pa.array(built.values), pa.array(built.value_ccid), pa.array(built.value_csid)], schema=layout.VALUE_SETS
    )
    _write_buckets(fs, layer_dir, "value_sets", values, built.values, buckets["value_sets"])
    sets = _set_rows(built)
    _write_one(fs, f"{layer_dir}/sets.parquet", sets)
    _write_one(fs, f"{layer_dir}/components.parquet", _component_rows(built))
    write_mapped(fs, layer_dir, buckets)
    return {
        "buckets": buckets,
        "triples": indexed.num_rows,
        "values": len(built.values),
        "sets": len(sortedints.unique(built.value_csid)),
        "set_dependencies": len(pairs),
        "components": built.new_components,
    }


def _write_buckets(fs: Any, layer_dir: str, dataset: str, table: pa.Table, key: np.ndarray, buckets: int) -> None:
    """One Parquet file per bucket (empty ones too, as the layout guarantees), rows in key order."""
    of = key % buckets
    order = np.lexsort((key, of))
    table, of = table.take(pa.array(order)), of[order]
    bounds = np.searchsorted(of, np.arange(buckets + 1))
    for b in range(buckets):
        folder = f"{layer_dir}/{dataset}/bucket={b}"
        fs.create_dir(folder, recursive=True)
        part = table.slice(int(bounds[b]), int(bounds[b + 1] - bounds[b]))
        write_parquet(fs, f"{folder}/part-0.parquet", table.schema, part.to_batches())


def _write_one(fs: Any, path: str, table: pa.Table) -> None:
    write_parquet(fs, path, table.schema, table.to_batches())


def _set_rows(built: Layer) -> pa.Table:
    """The layer's rows of ``sets.parquet``: its new sets, and indexed sets
    that gained triples here (their nodes 0: the count is of this layer)."""
    csids = sortedints.unique(np.concatenate([built.value_csid, built.dst_csid]))
    nodes = np.bincount(np.searchsorted(csids, built.value_csid), minlength=len(csids))
    triples = np.bincount(np.searchsorted(csids, built.dst_csid), minlength=len(csids))
    ccid = np.empty(len(csids), np.int64)
    ccid[np.searchsorted(csids, built.dst_csid)] = built.ccid
    ccid[np.searchsorted(csids, built.value_csid)] = built.value_ccid
    split = [built.set_split.get(int(c)) for c in csids.tolist()]
    return pa.table(
        [
            pa.array(csids),
            pa.array(ccid),
            pa.array(split, pa.string()),
            pa.array(nodes.astype(np.int64)),
            pa.array(triples.astype(np.int64)),
        ],
        schema=layout.SETS,
    )


def _component_rows(built: Layer) -> pa.Table:
    """The components the layer touched: values and triples it added to each."""
    ccids = sortedints.unique(np.concatenate([built.value_ccid, built.ccid]))
    nodes = np.bincount(np.searchsorted(ccids, built.value_ccid), minlength=len(ccids))
    triples = np.bincount(np.searchsorted(ccids, built.ccid), minlength=len(ccids))
    return pa.table(
        [pa.array(ccids), pa.array(nodes.astype(np.int64)), pa.array(triples.astype(np.int64))],
        schema=layout.COMPONENTS,
    )


def _write_aliases(store: Store, gen_dir: str, aliases: dict[int, int]) -> None:
    if not aliases:
        return
    keys = np.array(sorted(aliases), np.int64)
    table = pa.table([pa.array(keys), pa.array([aliases[int(k)] for k in keys], pa.int64())], schema=ALIAS_SCHEMA)
    pq.write_table(table, f"{gen_dir}/{ALIASES}", filesystem=store.fs)


def _meta(
    change: Change,
    name: str,
    entry: dict[str, Any] | None,
    touched: int,
    removed: dict[str, trim.Removed],
    dropped: list[str],
    seconds: float,
) -> dict[str, Any]:
    meta = {k: v for k, v in change.meta.items() if k != integrity.FILES}
    gone = set(change.deleted)
    layers = []
    for old in change.layers:
        lost = removed.get(str(old["path"]), trim.Removed())
        if old["path"] not in dropped:
            layers.append(
                {
                    **old,
                    "runs": [r for r in old["runs"] if r not in gone],
                    "triples": int(old.get("triples", 0)) - lost.triples,
                    "values": int(old.get("values", 0)) - lost.values,
                }
            )
    layers += [entry] if entry else []
    counts = dict(meta.get("counts", {}))
    counts["triples"] = int(counts.get("triples", 0)) - sum(r.triples for r in removed.values())
    counts["values"] = int(counts.get("values", 0)) - sum(r.values for r in removed.values())
    for old in (e for e in change.layers if e["path"] in dropped):
        for key in ("sets", "set_dependencies"):  # merged components stay merged
            counts[key] = int(counts.get(key, 0)) - int(old.get(key, 0))
    for key in ("triples", "values", "sets", "set_dependencies", "components"):
        counts[key] = int(counts.get(key, 0)) + int((entry or {}).get(key, 0))
    meta.update(
        generation=name,
        created=utc_now().isoformat(),
        runs=change.runs,
        counts=counts,
        seconds=round(seconds, 3),
        incremental={
            "from": change.live,
            "added_runs": change.added,
            "added_triples": int((entry or {}).get("triples", 0)),
            "deleted_runs": change.deleted,
            "trimmed": {
                path or "base": {
                    "triples_removed": r.triples,
                    "values_removed": r.values,
                    "files_rewritten": len(r.rewritten),
                }
                for path, r in removed.items()
                if r.triples or r.values
            },
            "dropped_layers": dropped,
            "components_touched": touched,
            "note": "set_dependencies is summed over layers (a pair may be counted in two)",
        },
    )
    meta[LAYERS] = layers
    return meta


def update_after_delete(store: Store, progress: Progress | None = None) -> bool:
    """After ``delete-run``: drop the deleted runs' layers from the index (and
    add runs committed since), under the build lock. False when the index
    cannot follow incrementally (a deleted run in the base layer, no index,
    a build running): it stays stale until ``provplug index``."""
    from provplug.errors import StoreError
    from provplug.index.generation import build_lock, current_generation
    from provplug.progress import SILENT

    live = current_generation(store)
    if live is None:
        return False
    try:
        with build_lock(store):
            live = current_generation(store)
            theta = generation_meta(store, live).get("theta") if live else None
            change = plan(store, live, theta, None, "local") if isinstance(theta, int) else None
            if change is None:
                return False
            return update(store, change, TableCatalogue.from_store(store), progress or SILENT) is not None
    except StoreError:
        return False
