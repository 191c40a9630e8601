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
