"""Weakly connected components on one machine, vectorised with NumPy.

Hook-and-compress (Shiloach-Vishkin style) over dense node indices:
every round each edge whose endpoints have different roots hooks the larger
root under the smaller one (``np.minimum.at``: all proposals for one root are
resolved to the smallest), then parents are compressed to roots by pointer
jumping. ``parent[x] <= x`` always holds, so there are no cycles, and the
smallest index of a component is always a root: at the end every node points
at the smallest index of its component. Edges whose endpoints already share a
root stay that way and are dropped from later rounds.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def wcc_labels(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``labels[i]`` = smallest node index in ``i``'s weakly connected component
    of the graph on nodes ``0..n-1`` with edges ``src[k] -- dst[k]``."""
    parent = np.arange(n, dtype=np.int64)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    while len(src):
        ps, pd = parent[src], parent[dst]
        open_ = ps != pd
        if not open_.any():
            break
        src, dst, ps, pd = src[open_], dst[open_], ps[open_], pd[open_]
        np.minimum.at(parent, np.maximum(ps, pd), np.minimum(ps, pd))
        parent = _compress(parent)
    return parent


def _compress(parent: np.ndarray) -> np.ndarray:
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            return parent
        parent = grand


# -- streamed: one chunk of edges at a time ----------------------------------------
def merge_groups(labels: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
    """Join, in place, the groups of ``labels`` that the edges ``src -- dst`` connect.

    ``labels`` is a forest with ``labels[x] <= x``: following it from any node
    ends at its group's root, the group's smallest index (``labels[r] == r``).
    Each round hooks the larger root of every edge whose ends still have
    different roots under the smaller one (``np.minimum.at``: the smallest
    proposal wins), so ``labels[x] <= x`` stays true, every such edge removes
    a root, and the smallest index of a group is always its root. Only the
    chunk's edges and the roots they reach are touched, never all nodes;
    the endpoints and hooked roots are pointed straight at their new roots,
    which keeps later lookups short. :func:`flatten` finishes the job.
    """
    rs, rd = find_roots(labels, src), find_roots(labels, dst)
    labels[src] = rs
    labels[dst] = rd
    while True:
        open_ = rs != rd
        if not open_.any():
            return
        rs, rd = rs[open_], rd[open_]
        np.minimum.at(labels, np.maximum(rs, rd), np.minimum(rs, rd))
        new_rs, new_rd = find_roots(labels, rs), find_roots(labels, rd)
        labels[rs] = new_rs
        labels[rd] = new_rd
        rs, rd = new_rs, new_rd


def find_roots(labels: NDArray[np.int64], nodes: NDArray[np.int64]) -> NDArray[np.int64]:
    roots = labels[nodes]
    while True:
        up = labels[roots]
        if np.array_equal(up, roots):
            return roots
        roots = up


def flatten(labels: np.ndarray, chunk: int = 1 << 22) -> None:
    """Point every node of a :func:`merge_groups` forest at its root, in place,
    ``chunk`` nodes at a time (pointer jumping; a node only ever moves closer
    to its root, so updating in place is safe and needs no copy of all nodes)."""
    changed = True
    while changed:
        changed = False
        for lo in range(0, len(labels), chunk):
            part = labels[lo : lo + chunk]
            up = labels[part]
            if not np.array_equal(up, part):
                part[:] = up
                changed = True
