"""The triples of aggregates whose provenance is deferred to a group join
(:class:`~.jvm.GroupJoin`).

The stored output rows an aggregate produced (their row numbers and hidden
grouping values, found by its marker column) are joined back to the
recomputed input rows of the aggregate on the grouping values (null-safe
equality; a global aggregate's one group holds every input row: a cross
join). Each joined (output row, member row numbers) row goes to
:func:`.writer.write_pairs`, which expands it to triples. Per-row provenance
needs no join: :mod:`.writer` expands it in the task that writes the rows.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from provplug import schema

from .jvm import GroupJoin, Rewritten
from .writer import Cell

MEMBER_KEY = "__member_key_"


def group_jobs(stored: DataFrame, rewritten: Rewritten) -> list[tuple[DataFrame, tuple[Cell, ...]]]:
    """Per group join with output cells: the frame its triples come from and
    the cells to expand it by. ``stored`` holds the stored output rows'
    numbers and hidden group-join columns."""
    jobs = []
    for group in rewritten.groups:
        if group.cells:
            used = sorted({t.rows for cell in group.cells for t in cell.terms})
            jobs.append((_joined(stored, group).select(schema.ROW_COLUMN, *used), group.cells))
    return jobs


def _joined(stored: DataFrame, group: GroupJoin) -> DataFrame:
    """The stored output rows of ``group``'s aggregate joined to its members."""
    out = stored.filter(F.col(group.marker).isNotNull()).select(schema.ROW_COLUMN, *group.keys)
    renamed = [f"{MEMBER_KEY}{i}" for i in range(len(group.keys))]
    members = group.child.select(*[F.col(k).alias(r) for k, r in zip(group.keys, renamed)],
                                 *[c for c in group.child.columns if c not in group.keys])
    if not group.keys:  # a global aggregate: its (at most one) row has every input row
        return out.crossJoin(members)
    condition = functools.reduce(Column.__and__, [F.col(k).eqNullSafe(F.col(r)) for k, r in zip(group.keys, renamed)])
    return out.join(members, condition)
