"""A paper-shaped synthetic provenance trace (shape of §4 of the core paper).

The paper's trace came from a text-curation workflow (29 tables, 532 SEC/FDIC
documents): 6.4M triples over 4.6M values; three large components of 1.2M,
0.9M and 0.7M values; 132 components of 910-7,453 values; the rest at most
20 values; fan-in mostly below 10, 3,963 values with 10-99 parents and 32
with more than 100 (at most 450). At ``scale=1.0`` this generator produces the
same shape over a 14-table workflow:

    DOCS -> PARSED -> SENT -> MENTION -> ENTITY -> RESOLVED <- IRP
                      SENT, MENTION -> METRIC -> F10WMTR -> MTRCS -> ALIGN <- P10FMD
                      ALIGN, RESOLVED -> KBFACT -> REPORT

Each component is a group of "documents"; a value belongs to the document
of its relative position in its table, and takes its parents from the same
document of each parent table (so documents stay apart inside most tables).
``RESOLVED`` (entity resolution) also takes a parent from the *next*
document, which chains a group's documents into one component, as entity
resolution does across filings. The 32 high fan-in values and the 10-99
fan-in ones pick parents anywhere in their component.

Replication (the paper's scaled datasets, §4: the trace "replicated by a
factor of 9, 24 and 48"): copy ``k`` is the same trace with every value id
shifted by ``k * COPY_STRIDE``, so copies share no value; tables and ops keep
their names, so the copies are the same workflow run over other documents.
Each copy is imported as its own run (one copy's memory at a time; the index
treats a table name as one table across runs).

Usage::

    python examples/benchmarks/paper_trace.py STORE [--scale 1.0] [--seed 0] [--copies 1]

or ``generate(path, scale=1.0, seed=0, copies=1)`` from Python (the query
benchmark uses it too). The triples go through ``provplug.ingest.importer`` like any
import.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# table -> (values per document (weight), [(parent, kind)]);  kind: local | chain
WORKFLOW: dict[str, tuple[float, list[tuple[str, str]]]] = {
    "DOCS": (3.0, []),
    "IRP": (1.0, []),
    "P10FMD": (1.0, []),
    "PARSED": (4.0, [("DOCS", "local")]),
    "SENT": (5.0, [("PARSED", "local")]),
    "MENTION": (5.0, [("SENT", "local")]),
    "ENTITY": (3.0, [("MENTION", "local")]),
    "RESOLVED": (2.0, [("ENTITY", "chain"), ("IRP", "local")]),
    "METRIC": (4.0, [("SENT", "local"), ("MENTION", "local")]),
    "F10WMTR": (3.0, [("METRIC", "local")]),
    "MTRCS": (3.0, [("F10WMTR", "local")]),
    "ALIGN": (2.0, [("MTRCS", "local"), ("P10FMD", "local")]),
    "KBFACT": (2.0, [("ALIGN", "local"), ("RESOLVED", "local")]),
    "REPORT": (1.0, [("KBFACT", "local")]),
}
LARGE = (1_200_000, 900_000, 700_000)
MEDIUM = (132, 910, 7_453)
SMALL_COMPONENTS = 560_000
DOC_VALUES = 40  # values per document in large and medium components
HUBS = 32
HUB_MAX = 450
MID_FANIN_VALUES = 3_963
# Parents per (value, parent table): mostly 1-3, some up to 9.
FANIN_P = np.array([0.50, 0.25, 0.12, 0.05, 0.03, 0.02, 0.015, 0.01, 0.005])
# Copy k's value ids are the trace's plus k * COPY_STRIDE (a round number, so a
# copy's ids read as the original's; scale 1 uses ids below 4.6M).
COPY_STRIDE = 1_000_000_000


def component_sizes(scale: float, rng: np.random.Generator) -> np.ndarray:
    large = [max(40, int(n * scale)) for n in LARGE]
    medium = rng.integers(MEDIUM[1], MEDIUM[2] + 1, size=max(1, int(MEDIUM[0] * scale)))
    small = np.minimum(20, 2 + rng.geometric(0.45, size=max(1, int(SMALL_COMPONENTS * scale))))
    return np.concatenate([large, medium, small]).astype(np.int64)


def generate_arrays(scale: float = 1.0, seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(triples, values)``: triples ``src, dst, op_code``; values ``value_id, table_code``."""
    rng = np.random.default_rng(seed)
    sizes = component_sizes(scale, rng)
    docs = np.maximum(1, sizes // DOC_VALUES)
    names = list(WORKFLOW)
    weights = np.array([WORKFLOW[t][0] for t in names])
    share = weights / weights.sum()
    per_table = _per_table_counts(sizes, share, rng)  # [table, component]
    base = {}  # global id of each (table, component)'s first value
    next_id = 1
    for k, t in enumerate(names):
        offsets = np.concatenate([[0], np.cumsum(per_table[k])[:-1]])
        base[t] = next_id + offsets
        next_id += int(per_table[k].sum())
    n_large = len(LARGE)
    src_parts, dst_parts, op_parts = [], [], []
    for k, t in enumerate(names):
        n_t = per_table[k]
        comp = np.repeat(np.arange(len(sizes)), n_t)
        idx = np.arange(len(comp)) - np.repeat(np.cumsum(n_t) - n_t, n_t)
        ids = base[t][comp] + idx
        for op_no, (parent, kind) in enumerate(WORKFLOW[t][1]):
            s, d = _edges(rng, comp, idx, ids, n_t, per_table[names.index(parent)], base[parent], docs, kind)
            src_parts.append(s)
            dst_parts.append(d)
            op_parts.append(np.full(len(s), k * 10 + op_no, dtype=np.int32))
        if t in ("RESOLVED", "KBFACT", "ENTITY"):
            s, d = _wide_fanin(rng, t, comp, idx, ids, n_t, per_table, base, names, n_large, scale)
            src_parts.append(s)
            dst_parts.append(d)
            op_parts.append(np.full(len(s), k * 10 + 9, dtype=np.int32))
    src = np.concatenate(src_parts)
    dst = np.concatenate(dst_parts)
    op = np.concatenate(op_parts)
    _, keep = np.unique(np.stack([src, dst]), axis=1, return_index=True)
    keep = _cap_fanin(dst, np.sort(keep), HUB_MAX)
    value_ids = np.arange(1, next_id, dtype=np.int64)
    table_code = np.repeat(np.arange(len(names), dtype=np.int32), per_table.sum(axis=1))
    return {"src": src[keep], "dst": dst[keep], "op": op[keep]}, {"value_id": value_ids, "table": table_code}


def _cap_fanin(dst: np.ndarray, keep: np.ndarray, cap: int) -> np.ndarray:
    """Drop triples beyond ``cap`` per derived value (the paper's maximum fan-in)."""
    order = keep[np.argsort(dst[keep], kind="stable")]
    d = dst[order]
    starts = np.flatnonzero(np.concatenate([[True], d[1:] != d[:-1]]))
    rank = np.arange(len(d)) - np.repeat(starts, np.diff(np.concatenate([starts, [len(d)]])))
    return np.sort(order[rank < cap])


def _per_table_counts(sizes: np.ndarray, share: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    big = sizes > 20
    counts = np.zeros((len(share), len(sizes)), dtype=np.int64)
    counts[:, big] = np.maximum(1, np.round(np.outer(share, sizes[big]))).astype(np.int64)
    # Small components: a multinomial draw, so most tables hold 0-2 of their values.
    small = np.flatnonzero(~big)
    counts[:, small] = rng.multinomial(sizes[small], share).T
    return counts


def _fanin(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.choice(np.arange(1, len(FANIN_P) + 1), size=n, p=FANIN_P / FANIN_P.sum())


def _edges(
    rng: np.random.Generator,
    comp: np.ndarray,
    idx: np.ndarray,
    ids: np.ndarray,
    n_t: np.ndarray,
    n_s: np.ndarray,
    base_s: np.ndarray,
    docs: np.ndarray,
    kind: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Parents in the same document of the parent table (``chain``: also one in the next)."""
    ns = n_s[comp]
    has = ns > 0
    comp, idx, ids, ns = comp[has], idx[has], ids[has], ns[has]
    k = docs[comp]
    doc = idx * k // n_t[comp]
    f = _fanin(rng, len(comp))
    rep = np.repeat(np.arange(len(comp)), f)
    lo = -(-doc * ns // k)  # ceil
    hi = -(-(doc + 1) * ns // k)
    lo_r, hi_r = lo[rep], hi[rep]
    width = hi_r - lo_r
    centre = np.minimum(idx[rep] * ns[rep] // n_t[comp][rep], ns[rep] - 1)
    pick = np.where(width > 0, lo_r + (rng.random(len(rep)) * np.maximum(width, 1)).astype(np.int64), centre)
    src = base_s[comp][rep] + pick
    dst = ids[rep]
    if kind == "chain":
        nxt = doc + 1 < k
        nlo = -(-(doc[nxt] + 1) * ns[nxt] // k[nxt])
        nhi = -(-(doc[nxt] + 2) * ns[nxt] // k[nxt])
        ok = nhi > nlo
        npick = nlo[ok] + (rng.random(int(ok.sum())) * (nhi - nlo)[ok]).astype(np.int64)
        src = np.concatenate([src, base_s[comp[nxt]][ok] + npick])
        dst = np.concatenate([dst, ids[nxt][ok]])
    return src, dst


def _wide_fanin(
    rng: np.random.Generator,
    table: str,
    comp: np.ndarray,
    idx: np.ndarray,
    ids: np.ndarray,
    n_t: np.ndarray,
    per_table: np.ndarray,
    base: dict[str, np.ndarray],
    names: list[str],
    n_large: int,
    scale: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The few values with 10-450 parents, drawn anywhere in their component."""
    parent = WORKFLOW[table][1][0][0]
    ns = per_table[names.index(parent)]
    eligible = np.flatnonzero((comp < n_large + max(1, int(MEDIUM[0] * scale))) & (ns[comp] >= 10))
    if table == "ENTITY":
        count, lo, hi = max(1, int(MID_FANIN_VALUES * scale)), 10, 90  # + own-document parents stays < 100
    else:
        count, lo, hi = max(1, HUBS // 2), 101, HUB_MAX + 1
    chosen = rng.choice(eligible, size=min(count, len(eligible)), replace=False)
    f = rng.integers(lo, hi, size=len(chosen))
    if table == "KBFACT" and len(f):
        f[0] = HUB_MAX
    f = np.minimum(f, ns[comp[chosen]])
    rep = np.repeat(chosen, f)
    pick = (rng.random(len(rep)) * ns[comp[rep]]).astype(np.int64)
    return base[parent][comp[rep]] + pick, ids[rep]


Arrays = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]


def replicate(arrays: Arrays, copy: int) -> Arrays:
    """Copy ``copy`` of a trace: every value id shifted by ``copy * COPY_STRIDE``."""
    triples, values = arrays
    if copy < 0:
        raise ValueError(f"copy must be >= 0, not {copy}")
    if copy == 0:
        return arrays
    if len(values["value_id"]) and int(values["value_id"].max()) >= COPY_STRIDE:
        raise ValueError(
            f"trace ids reach {int(values['value_id'].max()):,}: too large to replicate (stride {COPY_STRIDE:,})"
        )
    shift = np.int64(copy) * COPY_STRIDE
    return (
        {"src": triples["src"] + shift, "dst": triples["dst"] + shift, "op": triples["op"]},
        {"value_id": values["value_id"] + shift, "table": values["table"]},
    )


def write_files(
    folder: str, scale: float = 1.0, seed: int = 0, copy: int = 0, arrays: Arrays | None = None
) -> tuple[str, str]:
    """Write ``triples.parquet`` and ``values.parquet`` of copy ``copy`` for
    ``provplug import`` (``arrays``: the trace already generated)."""
    triples, values = replicate(arrays or generate_arrays(scale, seed), copy)
    names = list(WORKFLOW)
    op_names = pa.array([f"{names[c // 10]}_{c % 10}" for c in range(len(names) * 10)])
    tp, vp = os.path.join(folder, "triples.parquet"), os.path.join(folder, "values.parquet")
    pq.write_table(
        pa.table(
            {
                "src": triples["src"],
                "dst": triples["dst"],
                "op": pa.DictionaryArray.from_arrays(pa.array(triples["op"]), op_names),
            }
        ),
        tp,
    )
    pq.write_table(
        pa.table(
            {"value_id": values["value_id"], "table": pa.DictionaryArray.from_arrays(values["table"], pa.array(names))}
        ),
        vp,
    )
    return tp, vp


def generate(
    path: str | os.PathLike[str], scale: float = 1.0, seed: int = 0, progress: Any = None, copies: int = 1
) -> dict[str, Any]:
    """Create a store at ``path`` holding ``copies`` copies of the trace (one
    import run each); ``triples`` and ``duplicates`` are summed over them."""
    from provplug.ingest.importer import import_provenance
    from provplug.progress import SILENT
    from provplug.store.open import open_store

    if copies < 1:
        raise ValueError(f"copies must be >= 1, not {copies}")
    arrays = generate_arrays(scale, seed)
    store = open_store(path)
    runs, triples, duplicates = [], 0, 0
    for copy in range(copies):
        with tempfile.TemporaryDirectory(prefix="provplug-trace-") as tmp:
            tp, vp = write_files(tmp, copy=copy, arrays=arrays)
            result = import_provenance(store, tp, vp, progress=progress or SILENT)
        runs.append(result["run_id"])
        triples += int(result["triples"])
        duplicates += int(result["duplicates"])
    return {
        "store": os.fspath(path),
        "scale": scale,
        "seed": seed,
        "copies": copies,
        "run_id": runs[0],
        "run_ids": runs,
        "triples": triples,
        "duplicates": duplicates,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", help="store directory to create (must not hold a trace already)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--copies", type=int, default=1, help="replication factor: copies with fresh ids, one run each")
    args = parser.parse_args(argv)
    if args.copies < 1:
        parser.error("--copies must be at least 1")
    from provplug.progress import Progress

    t0 = time.monotonic()
    result = generate(args.store, args.scale, args.seed, progress=Progress(), copies=args.copies)
    print(f"wrote {result['triples']:,} triples to {args.store} in {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
