"""Sets of token positions as sorted runs of closed intervals.

A token's dependency on one container is usually one interval ``[start,
end]`` (004's ``L_S..L_E``); where several paths lead to a container, or a
feedback loop's rates differ, it is a union that may have gaps. A
:class:`Positions` holds such a union exactly: disjoint, non-adjacent,
sorted intervals of 1-based positions. The ``dependency`` relation writes one
row per interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from provplug.errors import LocationError


@dataclass(frozen=True)
class Positions:
    """A finite set of positions (1-based) as normalised closed intervals."""

    intervals: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, intervals: Iterable[tuple[int, int]]) -> Positions:
        """The union of ``intervals`` (each ``(start, end)``, start <= end), merged."""
        spans = sorted(intervals)
        for start, end in spans:
            if start < 1 or end < start:
                raise LocationError(f"positions {start}..{end} are not an interval of 1-based positions")
        merged: list[tuple[int, int]] = []
        for start, end in spans:
            if merged and start <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return cls(tuple(merged))

    @classmethod
    def span(cls, start: int, end: int) -> Positions:
        return cls.of([(start, end)])

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self.intervals)

    def __bool__(self) -> bool:
        return bool(self.intervals)

    def __contains__(self, position: object) -> bool:
        return isinstance(position, int) and any(s <= position <= e for s, e in self.intervals)

    def __or__(self, other: Positions) -> Positions:
        return Positions.of([*self.intervals, *other.intervals])

    def __sub__(self, other: Positions) -> Positions:
        """The positions of ``self`` that ``other`` lacks."""
        left: list[tuple[int, int]] = []
        cuts = other.intervals
        for start, end in self.intervals:
            cursor = start
            for cut_start, cut_end in cuts:
                if cut_end < cursor or cut_start > end:
                    continue
                if cut_start > cursor:
                    left.append((cursor, cut_start - 1))
                cursor = max(cursor, cut_end + 1)
                if cursor > end:
                    break
            if cursor <= end:
                left.append((cursor, end))
        return Positions(tuple(left))

    @property
    def size(self) -> int:
        """How many positions the set holds."""
        return sum(e - s + 1 for s, e in self.intervals)

    def to_set(self) -> set[int]:
        """Every position, one by one (for tests and small sets)."""
        return {p for s, e in self.intervals for p in range(s, e + 1)}

    def __str__(self) -> str:
        return ", ".join(f"{s}..{e}" if s != e else str(s) for s, e in self.intervals) or "none"


EMPTY = Positions()
