"""The sorting set operations give NumPy's answers (random arrays, duplicates, empties)."""

from __future__ import annotations

import numpy as np
import pytest

from provplug import sortedints


@pytest.mark.parametrize("size", [0, 1, 2, 7, 1_000])
def test_sorting_set_operations_equal_numpy(size: int) -> None:
    rng = np.random.default_rng(size)
    values = rng.integers(-50, 50, size).astype(np.int64)
    among = rng.integers(-30, 80, max(size // 2, 1) if size else 0).astype(np.int64)
    assert sortedints.unique(values).tolist() == np.unique(values).tolist()
    keys, counts = sortedints.unique_counts(values)
    want_keys, want_counts = np.unique(values, return_counts=True)
    assert (keys.tolist(), counts.tolist()) == (want_keys.tolist(), want_counts.tolist())
    assert sortedints.isin(values, among).tolist() == np.isin(values, among).tolist()
    pairs = rng.integers(0, 6, (size, 2)).astype(np.int64)
    assert sortedints.unique_rows(pairs).tolist() == np.unique(pairs, axis=0).reshape(-1, 2).tolist()


@pytest.mark.parametrize("size", [0, 1, 50, 2_000])
def test_rows_isin_and_mark_present_equal_numpy(size: int) -> None:
    rng = np.random.default_rng(size + 1)
    pairs = rng.integers(0, 9, (size, 2)).astype(np.int64)
    among = rng.integers(0, 12, (size // 3, 2)).astype(np.int64)
    as_rows = np.dtype([("a", np.int64), ("b", np.int64)])
    want = np.isin(pairs.view(as_rows).ravel(), among.view(as_rows).ravel()) if size else np.zeros(0, bool)
    assert sortedints.rows_isin(pairs, among).tolist() == want.tolist()
    values = np.unique(rng.integers(0, 100, size))
    seen = rng.integers(-5, 105, size * 2)
    alive = np.zeros(len(values), bool)
    sortedints.mark_present(values, seen[:size], alive)
    sortedints.mark_present(values, seen[size:], alive)
    assert alive.tolist() == np.isin(values, seen).tolist()
