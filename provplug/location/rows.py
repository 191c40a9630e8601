"""Positions of a table ↔ provplug row numbers, without a number per row.

004 names a token by its position in its container; provplug names a row by
its row number, which is sparse: Spark capture numbers row ``i`` of
partition ``q`` as ``(q << 26) | i`` (``provplug_spark.writer``), a source
stored as positional Parquet copies numbers rows from each file's offset. In
both, the numbers come in a few *runs* of consecutive integers, one per
partition or file. :class:`RowRuns` is that list of runs in position order:
position ``k`` (1-based) is the ``k``-th number when the runs are read one
after the other, so a table of any size costs two integers per partition.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from provplug import ids
from provplug.errors import LocationError

# Row numbers of a Spark step output: partition << ROW_IN_PARTITION_BITS | index
# (provplug_spark.writer: 10 partition bits of the 36 row bits).
ROW_IN_PARTITION_BITS = ids.ROW_IN_PARTITION_BITS


@dataclass(frozen=True)
class RowRuns:
    """Row numbers in position order: ``counts[i]`` numbers from ``firsts[i]`` on."""

    firsts: tuple[int, ...]
    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.firsts) != len(self.counts):
            raise LocationError(f"{len(self.firsts)} run starts for {len(self.counts)} run lengths")
        for first, count in zip(self.firsts, self.counts, strict=True):
            if (
                not isinstance(first, int)
                or not isinstance(count, int)
                or isinstance(first, bool)
                or isinstance(count, bool)
            ):
                raise LocationError(f"a run of row numbers holds integers, not {first!r}, {count!r}")
            if count < 1 or first < 0 or first + count > ids.MAX_ROWS:
                raise LocationError(f"rows {first}..{first + count - 1} are not a run of row numbers")
        order = np.argsort(self._firsts, kind="stable")
        ends = self._firsts[order] + self._counts[order]
        if np.any(ends[:-1] > self._firsts[order][1:]):
            raise LocationError("two runs of row numbers overlap: a row would have two positions")

    # -- constructors ------------------------------------------------------
    @classmethod
    def of(cls, runs: Sequence[tuple[int, int]]) -> RowRuns:
        """Runs ``(first, count)`` in position order; runs that continue each other are merged."""
        merged: list[list[int]] = []
        for first, count in runs:
            if merged and merged[-1][0] + merged[-1][1] == first:
                merged[-1][1] += int(count)
            elif count:
                merged.append([int(first), int(count)])
        return cls(tuple(f for f, _ in merged), tuple(c for _, c in merged))

    @classmethod
    def from_rows(cls, rows: Any) -> RowRuns:
        """The runs of an array of row numbers given in position order."""
        numbers = np.asarray(rows, dtype=np.int64)
        if numbers.size == 0:
            return cls((), ())
        breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
        starts = np.concatenate([[0], breaks])
        counts = np.diff(np.concatenate([starts, [numbers.size]]))
        return cls.of(list(zip(numbers[starts].tolist(), counts.tolist(), strict=True)))

    @classmethod
    def partitions(cls, counts: Sequence[int], bits: int = ROW_IN_PARTITION_BITS) -> RowRuns:
        """The rows of a Spark step output with ``counts[q]`` rows in partition ``q``."""
        return cls.of([(q << bits, n) for q, n in enumerate(counts)])

    # -- reading -----------------------------------------------------------
    @functools.cached_property
    def _firsts(self) -> NDArray[np.int64]:
        return np.asarray(self.firsts, dtype=np.int64)

    @functools.cached_property
    def _counts(self) -> NDArray[np.int64]:
        return np.asarray(self.counts, dtype=np.int64)

    @functools.cached_property
    def _ends(self) -> NDArray[np.int64]:
        """Cumulative counts: run ``i`` holds positions ``_ends[i-1]+1 .. _ends[i]``."""
        return np.cumsum(self._counts)

    @property
    def size(self) -> int:
        return int(self._ends[-1]) if self.counts else 0

    def rows_at(self, positions: Any) -> NDArray[np.int64]:
        """The row numbers at 1-based ``positions`` (an int64 array)."""
        where = np.asarray(positions, dtype=np.int64)
        if where.size and (where.min() < 1 or where.max() > self.size):
            raise LocationError(f"a position outside 1..{self.size}")
        run = np.searchsorted(self._ends, where, side="left")
        return self._firsts[run] + (where - (self._ends[run] - self._counts[run])) - 1

    def positions_of(self, rows: Any) -> np.ndarray:
        """The 1-based positions of row numbers (a LocationError for a row not here)."""
        numbers = np.asarray(rows, dtype=np.int64)
        positions, inside = self.locate(numbers)
        if not inside.all():
            raise LocationError(f"row {int(numbers[~inside][0])} is not a row of the table")
        return positions

    def locate(self, rows: Any) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        """The 1-based positions of row numbers (1 for a row not here) and
        which rows are here."""
        numbers = np.asarray(rows, dtype=np.int64)
        if len(self._firsts) == 0:
            return np.ones(len(numbers), dtype=np.int64), np.zeros(len(numbers), dtype=bool)
        order = np.argsort(self._firsts, kind="stable")
        firsts = self._firsts[order]
        run = np.searchsorted(firsts, numbers, side="right") - 1
        inside = run >= 0
        inside[inside] = numbers[inside] < firsts[run[inside]] + self._counts[order][run[inside]]
        original = order[np.maximum(run, 0)]
        positions = self._ends[original] - self._counts[original] + (numbers - self._firsts[original]) + 1
        return np.where(inside, positions, 1), inside

    def chunks(self, limit: int) -> Iterator[np.ndarray]:
        """Every row number in position order, at most ``limit`` at a time."""
        for first, count in zip(self.firsts, self.counts, strict=True):
            for offset in range(0, count, limit):
                yield np.arange(first + offset, first + min(count, offset + limit), dtype=np.int64)

    def to_json(self) -> dict[str, list[int]]:
        return {"firsts": list(self.firsts), "counts": list(self.counts)}
