"""The sorting set operations give NumPy's answers (random arrays, duplicates, empties)."""

from __future__ import annotations

import numpy as np
import pytest

from provplug.index import sortedints


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
