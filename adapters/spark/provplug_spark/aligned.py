"""Row-aligned step outputs: stored as one location edge, not as triples.

A step output whose analyzed plan is a chain of projections (``select``,
``withColumn``, ``cast``, renames, scalar Python or pandas UDFs) and aliases
over ONE read of a stored table of the run makes exactly one output row of
each input row. Its triples say nothing but "row r of the output comes from
row r of the input, and column c from these columns" (docs/capture-semantics.md "Location lineage"): the
capture numbers each output row with its input row's number — the value of
the row-number column the rewrite carries — writes no triple and records one
aligned :class:`~provplug.location.LocationEdge` per (op, input, output)
with the column map the triples would have had.

Detection is structural and conservative: any other node (filter, join,
aggregate, generate, limit, sort, repartition, window, black box, ...) and
any provenance the rewrite did not express as one scalar row-number column
of the one input keep the triples. After the write, the numbers the tasks
used are checked to be exactly the input's rows, once each
(:func:`checked_runs`), so the edge can never stand for wrong triples.

``spark.provplug.locationLineage=false`` (or ``provplug.capture(...,
location_lineage=False)``) turns it off: every step stores its triples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from pyspark.sql import SparkSession

from provplug import ids
from provplug.errors import CaptureError
from provplug.location import LocationEdge, RowRuns, location_edge

from ._jvm import Catalyst
from .rewrite import Rewritten
from .rules import NODE_KINDS, is_table_leaf

LOCATION_LINEAGE_CONF = "spark.provplug.locationLineage"


def enabled(spark: SparkSession, requested: bool = True) -> bool:
    """Location lineage is on unless the run or the session's conf turns it off."""
    setting = (spark.conf.get(LOCATION_LINEAGE_CONF, "true") or "true").strip().lower()
    if setting not in ("true", "false"):
        raise CaptureError(f"{LOCATION_LINEAGE_CONF} must be 'true' or 'false', not {setting!r}")
    return requested and setting == "true"


@dataclasses.dataclass(frozen=True)
class Aligned:
    """A row-aligned output: its rows are numbered by ``rows``, the
    rewritten frame's row-number column of input table ``input``."""

    input: int
    rows: str
    columns: dict[int, tuple[int, ...]]  # output column -> the input columns its cells come from


def aligned_output(jvm: Catalyst, plan: Any, rewritten: Rewritten) -> Aligned | None:
    """How ``rewritten`` (the rewrite of ``plan``) is row-aligned, or None
    when it is not certainly so (its triples are then stored)."""
    if len(rewritten.inputs) != 1 or rewritten.groups or rewritten.hidden or not rewritten.cells:
        return None
    if not _projections_over_one_read(jvm, plan):
        return None
    (table,) = rewritten.inputs
    row_columns = {t.rows for c in rewritten.cells for t in c.terms}
    if len(row_columns) != 1 or not all(t.scalar for c in rewritten.cells for t in c.terms):
        return None
    columns = column_map(rewritten, table)
    return None if columns is None else Aligned(table, row_columns.pop(), columns)


def column_map(rewritten: Rewritten, table: int) -> dict[int, tuple[int, ...]] | None:
    """Output column -> the columns of input ``table`` its cells come from;
    None when a cell reads another table (or a term is not a whole column)."""
    columns: dict[int, tuple[int, ...]] = {}
    for cell in rewritten.cells:
        sources = set()
        for term in cell.terms:
            source_table, column, row = ids.unpack(term.base)
            if source_table != table or row != 0:
                return None
            sources.add(column)
        columns[cell.column] = tuple(sorted(sources))
    return columns


def _projections_over_one_read(jvm: Catalyst, plan: Any) -> bool:
    """``plan`` is projections and aliases down to one table leaf."""
    node = plan
    while _keeps_rows_aligned(node.nodeName()):
        children = jvm.items(node.children())
        if len(children) != 1:
            return False
        node = children[0]
    return bool(is_table_leaf(node.nodeName()) and not jvm.items(node.children()))


def _keeps_rows_aligned(name: str) -> bool:
    """Plan node ``name`` keeps its child's rows one for one, in the same tasks (:attr:`.NodeKind.aligned`)."""
    kind = NODE_KINDS.get(name)
    return kind is not None and kind.aligned


def checked_runs(step: str, runs: Iterable[tuple[int, int]], written: int, input_rows: int | None) -> RowRuns:
    """The output's rows as runs in row order, checked to be ``input_rows``
    distinct row numbers (every input row once: the input's own rows)."""
    merged = RowRuns.of(sorted(runs))  # a row number used twice makes two runs overlap: a LocationError
    if merged.size != written or input_rows is None or written != input_rows:
        raise CaptureError(
            f"internal: step {step!r} was taken for row-aligned but wrote {written} rows "
            f"numbered {merged.size} ways from an input of {input_rows} rows"
        )
    return merged


def edge_of(op_id: int, table_id: int, aligned: Aligned, runs: RowRuns) -> LocationEdge:
    """The aligned edge standing for the output's triples."""
    return location_edge(op_id, aligned.input, table_id, aligned.columns, runs)
