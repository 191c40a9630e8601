"""The triples of global aggregates whose provenance is deferred to a group
join (:class:`~.jvm.GroupJoin`).

The stored output rows the aggregate produced (their row numbers, found by
its marker column) are joined to the recomputed input rows of the aggregate:
the one group holds every input row, so this is a cross join with a small
side (the aggregate's output rows). Each joined (output row, member row
numbers) row goes to :func:`.writer.write_pairs`, which expands it to
triples. Per-row provenance needs no join: :mod:`.writer` expands it in the
task that writes the rows.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from provplug import schema

from .jvm import Rewritten
from .writer import Cell


def group_jobs(stored: DataFrame, rewritten: Rewritten) -> list[tuple[DataFrame, tuple[Cell, ...]]]:
    """Per group join with output cells: the frame its triples come from and
    the cells to expand it by. ``stored`` holds the stored output rows'
    numbers and marker columns."""
    jobs = []
    for group in rewritten.groups:
        if not group.cells:
            continue
        produced = stored.filter(F.col(group.marker).isNotNull()).select(schema.ROW_COLUMN)
        members = group.child.select(*sorted({t.rows for cell in group.cells for t in cell.terms}))
        jobs.append((produced.crossJoin(members), group.cells))
    return jobs
