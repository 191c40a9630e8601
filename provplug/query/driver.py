"""Recursive querying on the driver (the paper's ``RQ_on_DriverMachine``).

A breadth-first walk over triples held as NumPy arrays: values are mapped to
dense indices once, edges are put in CSR order by the walked-from end, and each
BFS level is one vectorised gather. No Python loop runs per value, so a few
hundred thousand triples are walked in milliseconds.

Whether a query's recursion runs here is decided by memory, not by a fixed
count of triples: :func:`fits_driver` compares what the walk would take
(about :data:`BYTES_PER_TRIPLE` a triple) with the driver's budget, by
default half the memory this process could still get (``MemAvailable``, or
less under a cgroup limit), or ``PROVPLUG_QUERY_DRIVER_MB``.
"""

from __future__ import annotations

import os

import numpy as np

from provplug import sortedints
from provplug.errors import LineageQueryError
from provplug.index.mapped import gather_ranges
from provplug.plugin.query_results import Direction, Edges, Walk

DRIVER_ENV = "PROVPLUG_QUERY_DRIVER_MB"
# Peak bytes a triple costs on the driver: read as three int64 columns (24),
# then the walk's value table, inverse, CSR order and kept edges (about 104,
# measured with tracemalloc on 2M triples), and the sorted answer.
BYTES_PER_TRIPLE = 160
_FALLBACK_MEMORY = 4 << 30  # when neither /proc nor sysconf says


def available_memory() -> int:
    """Bytes this process could still allocate: the kernel's ``MemAvailable``,
    or less when a cgroup (container) limit leaves less room."""
    room = [m for m in (_meminfo_available(), _cgroup_room()) if m is not None]
    if room:
        return min(room)
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_MEMORY


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """Limit minus usage of this process's memory cgroup (v2, then v1)."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            with open(limit_file, encoding="ascii") as f:
                limit = f.read().strip()
            with open(usage_file, encoding="ascii") as f:
                usage = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:  # "max" or v1's huge number: no limit
            return max(0, int(limit) - usage)
        return None
    return None


def megabytes_from_env(name: str) -> int | None:
    """``name``'s value in bytes (it is given in MiB), or None when unset."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        mb = float(text)
    except ValueError:
        mb = -1.0
    if mb < 0:
        raise LineageQueryError(f"{name} must be a non-negative number of MiB, not {text!r}")
    return int(mb * (1 << 20))


def driver_budget() -> int:
    """Bytes one query's recursion may take on the driver."""
    given = megabytes_from_env(DRIVER_ENV)
    return available_memory() // 2 if given is None else given


def fits_driver(triples: int, budget: int | None = None) -> bool:
    """Would recursing over ``triples`` triples fit the driver's budget?"""
    return triples * BYTES_PER_TRIPLE <= (driver_budget() if budget is None else budget)


def walk(triples: Edges, seeds: np.ndarray, direction: Direction) -> Walk:
    """Every value reachable from ``seeds`` against (up) or along (down) the
    edges, and the triples among the seeds and those values."""
    seeds = sortedints.unique(np.asarray(seeds, dtype=np.int64))
    if len(triples) == 0 or len(seeds) == 0:
        return Walk(np.empty(0, np.int64), Edges.empty())
    nodes, inverse = np.unique(np.concatenate([triples.src, triples.dst]), return_inverse=True)
    src_i, dst_i = inverse[: len(triples)], inverse[len(triples) :]
    # Walking up follows an edge from its dst to its src; down the other way.
    from_i, to_i = (dst_i, src_i) if direction == "up" else (src_i, dst_i)
    order = np.argsort(from_i, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(from_i, minlength=len(nodes)))])
    targets = to_i[order]

    pos = np.searchsorted(nodes, seeds)
    pos = np.minimum(pos, len(nodes) - 1)
    present = nodes[pos] == seeds
    reached = np.zeros(len(nodes), dtype=bool)
    is_seed = np.zeros(len(nodes), dtype=bool)
    is_seed[pos[present]] = True
    frontier = pos[present]
    visited = is_seed.copy()
    while len(frontier):
        step = targets[gather_ranges(indptr[frontier], indptr[frontier + 1])]
        step = sortedints.unique(step)
        reached[step] = True
        frontier = step[~visited[step]]
        visited[frontier] = True
    lineage_mask = reached & ~is_seed
    # Triples among query+lineage: exactly those whose walked-from end is in it.
    keep = visited[from_i]
    edges = Edges(triples.src[keep], triples.dst[keep], triples.op[keep])
    return Walk(nodes[lineage_mask], edges.sorted())
