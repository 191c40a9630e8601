"""One op's affected output rows, member by member (the rules of
:mod:`provplug.ingest.rowlineage`): which members stay alive, which are null-padded
(outer joins), and so whether each output row exists, vanishes, or cannot be
told.

Statuses are small integers so that a row with a hundred thousand members
(a group) is decided with NumPy, not member by member in Python.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

# Status of an input row (record) and of a member.
ALIVE, CHANGED, MAYBE, DEAD, PADDED = 0, 1, 2, 3, 4
Cause = tuple[int, int] | None  # (table id, row) of the input row that made it so


def member_of(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_set)`` by binary search: no hashing of
    ``values`` (hundreds of thousands of group members), ``sorted_set`` sorted."""
    if not len(sorted_set) or not len(values):
        return np.zeros(len(values), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return np.asarray(sorted_set[pos] == values)


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort, not a hash)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.ones(len(ordered), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


@dataclasses.dataclass
class TableState:
    """What a deletion does to one table: rows that vanish, rows whose
    existence is unknown, cells that change (``UNKNOWN``: changed, value
    unknown); ``whole``: every row unknown (why); ``may_appear``: rows
    absent now may appear (why)."""

    table_id: int
    dead: dict[int, Cause] = dataclasses.field(default_factory=dict)
    maybe: dict[int, tuple[str, Cause]] = dataclasses.field(default_factory=dict)
    changed: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    changed_cause: dict[int, Cause] = dataclasses.field(default_factory=dict)
    whole: str | None = None
    may_appear: str | None = None
    op: int | None = None  # the op whose output this is (None: the deleted rows)
    _arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = dataclasses.field(default=None, repr=False)

    def touched(self) -> bool:
        return bool(self.dead or self.maybe or self.changed or self.whole or self.may_appear)

    def touched_rows(self) -> np.ndarray:
        return distinct(np.fromiter([*self.dead, *self.maybe, *self.changed], dtype=np.int64))

    def status(self, rows: np.ndarray) -> np.ndarray:
        """The status of each of ``rows``: ALIVE, CHANGED, MAYBE or DEAD."""
        if self._arrays is None:
            self._arrays = (
                np.sort(np.fromiter(self.dead, dtype=np.int64)),
                np.sort(np.fromiter(self.maybe, dtype=np.int64)),
                np.sort(np.fromiter(self.changed, dtype=np.int64)),
            )
        dead, maybe, changed = self._arrays
        out = np.zeros(len(rows), dtype=np.int8)
        out[member_of(rows, changed)] = CHANGED
        out[member_of(rows, maybe)] = MAYBE
        out[member_of(rows, dead)] = DEAD
        return out


@dataclasses.dataclass
class Members:
    """The records of an op's output rows with each record's and member's
    status. Record arrays are sorted by (out_row, member); ``group[i]`` is
    record i's member, ``starts`` the first record of each member."""

    out_row: np.ndarray
    member: np.ndarray
    in_table: np.ndarray
    in_row: np.ndarray
    optional: np.ndarray
    status: np.ndarray  # per record
    group: np.ndarray  # per record: its member's index
    starts: np.ndarray  # per member: its first record
    member_status: np.ndarray  # per member

    @classmethod
    def of(cls, records: pa.Table, states: Mapping[int, TableState]) -> Members:
        arrays = [records.column(c).to_numpy() for c in ("out_row", "member", "in_table", "in_row", "optional")]
        order = np.lexsort((arrays[1], arrays[0]))
        out_row, member, in_table, in_row, optional = (a[order] for a in arrays)
        status = np.zeros(len(out_row), dtype=np.int8)
        for t in np.unique(in_table).tolist():
            if t in states:
                at = in_table == t
                status[at] = states[t].status(in_row[at])
        new_member = np.ones(len(out_row), dtype=bool)
        new_member[1:] = (out_row[1:] != out_row[:-1]) | (member[1:] != member[:-1])
        starts = np.flatnonzero(new_member)
        group = np.cumsum(new_member) - 1
        members = cls(
            out_row,
            member,
            in_table,
            in_row,
            optional.astype(bool),
            status,
            group,
            starts,
            np.zeros(len(starts), dtype=np.int8),
        )
        members.member_status = members._member_status()
        return members

    def _member_status(self) -> np.ndarray:
        """DEAD if a required row went (or every row did); MAYBE if one may
        have; PADDED if an optional row went; else ALIVE."""
        if not len(self.starts):
            return np.zeros(0, dtype=np.int8)

        def any_of(flags: np.ndarray) -> np.ndarray:
            return np.logical_or.reduceat(flags, self.starts)

        required = ~self.optional
        dead_required = any_of(required & (self.status == DEAD))
        none_left = ~any_of(self.status != DEAD)
        maybe = any_of(self.status == MAYBE)
        padded = any_of(self.optional & (self.status == DEAD))
        out = np.full(len(self.starts), ALIVE, dtype=np.int8)
        out[padded] = PADDED
        out[maybe] = MAYBE
        out[dead_required | none_left] = DEAD
        return out

    # -- per member ------------------------------------------------------------
    def records_of(self, m: int) -> range:
        end = self.starts[m + 1] if m + 1 < len(self.starts) else len(self.out_row)
        return range(int(self.starts[m]), int(end))

    def rows_of(self, m: int) -> set[tuple[int, int]]:
        return {(int(self.in_table[i]), int(self.in_row[i])) for i in self.records_of(m)}

    def survivors(self, m: int) -> frozenset[tuple[int, int]]:
        return frozenset(
            (int(self.in_table[i]), int(self.in_row[i])) for i in self.records_of(m) if self.status[i] != DEAD
        )

    def key(self, m: int) -> tuple[int, int]:
        i = int(self.starts[m])
        return int(self.out_row[i]), int(self.member[i])

    def resolve_padding(self) -> None:
        """Outer joins: a member whose optional rows went keeps one
        null-padded row for its surviving rows S, unless another member
        holding all of S is still alive (a preserved row keeps a padded row
        only when its last match went); members that may be alive make it
        unknown. Larger survivor sets first: a kept padded member with more
        rows covers a smaller S."""
        padded = np.flatnonzero(self.member_status == PADDED).tolist()
        if not padded:
            return
        anchors = {min(self.survivors(m)) for m in padded}
        holders: dict[tuple[int, int], list[int]] = {}
        for t, rows in _by_table(anchors).items():
            for i in np.flatnonzero((self.in_table == t) & np.isin(self.in_row, rows)).tolist():
                holders.setdefault((t, int(self.in_row[i])), []).append(int(self.group[i]))
        kept: dict[frozenset[tuple[int, int]], int] = {}
        for m in sorted(padded, key=lambda m: (-len(self.survivors(m)), self.key(m))):
            s = self.survivors(m)
            anchor = min(s)
            others = [o for o in holders.get(anchor, []) if o != m and s <= self.rows_of(o)]
            alive = [
                o
                for o in others
                if self.member_status[o] == ALIVE
                or (self.member_status[o] == PADDED and o in kept.values() and s <= self.survivors(o))
            ]
            if alive or s in kept:
                self.member_status[m] = DEAD
            elif any(self.member_status[o] == MAYBE for o in others):
                self.member_status[m] = MAYBE
            else:
                kept[s] = m

    def anchors(self) -> dict[int, np.ndarray]:
        """For each padded member, one surviving input row (by table):
        the rows whose other members decide the padding."""
        return _by_table({min(self.survivors(m)) for m in np.flatnonzero(self.member_status == PADDED).tolist()})


def _by_table(rows: set[tuple[int, int]]) -> dict[int, np.ndarray]:
    out: dict[int, list[int]] = {}
    for t, r in sorted(rows):
        out.setdefault(t, []).append(r)
    return {t: np.array(r, dtype=np.int64) for t, r in out.items()}
