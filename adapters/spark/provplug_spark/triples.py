"""The triples of aggregates whose provenance is deferred to a group join
(:class:`~.jvm.GroupJoin`), as (src, dst) pairs computed by Spark.

The stored output rows (row number + hidden grouping values) are joined back
to the recomputed input rows of the aggregate on the grouping values, each
joined pair giving (member cell -> output cell) triples directly. Per-row
provenance needs no join: :mod:`.writer` expands it in the task that writes
the rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from provplug import ids, schema

from .jvm import GroupJoin, Rewritten
from .writer import Cell

MEMBER_KEY = "__member_key_"


def group_jobs(keys: DataFrame, rewritten: Rewritten, table_id: int) -> list[tuple[DataFrame, tuple[Cell, ...] | None]]:
    """Per aggregate with deferred output cells: the frame its triples come
    from and how (:func:`.writer.write_pairs`). ``keys`` holds the stored
    rows' numbers and hidden group-join columns.

    The joined (output row, member provenance) rows go to the writer as they
    are, which expands them to triples (fewer values cross from Spark to
    Arrow than as pairs); when a group's rows can repeat a source id, Spark
    makes the pairs and deduplicates them first."""
    by_group: dict[int, list[tuple[int, tuple[str, ...]]]] = {}
    for j, deferred in enumerate(rewritten.deferred):
        if deferred is not None and deferred[1]:
            by_group.setdefault(deferred[0], []).append((j, deferred[1]))
    jobs = []
    for g, columns in sorted(by_group.items()):
        group = rewritten.groups[g]
        joined = _joined(keys, group)
        if group.distinct:
            jobs.append((_pairs_frame(joined, columns, group.scalar, table_id).distinct(), None))
        else:
            members = sorted({n for _, names in columns for n in names})
            cells = tuple((j, tuple((n, group.scalar[n]) for n in names)) for j, names in columns)
            jobs.append((joined.select(F.col(schema.ROW_COLUMN), *[distinct_ids(n, group.scalar[n]) for n in members]), cells))
    return jobs


def distinct_ids(name: str, scalar: bool) -> Column:
    """Provenance column ``name`` as sent to the writer: arrays deduplicated."""
    return F.col(name) if scalar else F.array_distinct(F.col(name)).alias(name)


def _joined(stored: DataFrame, group: GroupJoin) -> DataFrame:
    """The stored output rows of ``group``'s aggregate joined to its members."""
    out = stored.filter(F.col(group.marker).isNotNull()).select(F.col(schema.ROW_COLUMN), *[F.col(k) for k in group.keys])
    renamed = [f"{MEMBER_KEY}{i}" for i in range(len(group.keys))]
    members = group.child.select(*[F.col(k).alias(r) for k, r in zip(group.keys, renamed)], *[F.col(p) for p in group.scalar])
    if not group.keys:  # a global aggregate: its (at most one) row has every input row
        return out.crossJoin(members)
    condition = functools.reduce(Column.__and__, [F.col(k).eqNullSafe(F.col(r)) for k, r in zip(group.keys, renamed)])
    return out.join(members, condition)


def _pairs_frame(frame: DataFrame, columns: Sequence[tuple[int, tuple[str, ...]]], scalar: Mapping[str, bool],
                 table_id: int) -> DataFrame:
    """(src, dst) rows: for output column ``j`` of each row of ``frame`` (which
    has the row number), one per distinct source id held by its provenance
    columns ``names``.

    Scalar ids become plain structs of one array (no lambda: Spark compiles
    it); only array-valued provenance needs ``transform``, which Spark
    interprets row by row."""
    structs: list[Column] = []
    arrays: list[Column] = []
    for j, names in columns:
        pair = _pair_with(ids.value_id(table_id, j, 0))
        singles = [n for n in names if scalar[n]]
        multi = [n for n in names if not scalar[n]]
        if multi:  # one distinct set of ids from every provenance column of the cell
            parts = [F.array_compact(F.array(*[F.col(n) for n in singles]))] if singles else []
            parts += [F.coalesce(F.col(n), F.array().cast("array<bigint>")) for n in multi]
            arrays.append(F.transform(F.array_distinct(F.concat(*parts)), pair))
            continue
        for i, n in enumerate(singles):
            # Two columns can hold the same id (``select a, a AS b``): keep the first.
            fresh = [F.coalesce(F.col(n) != F.col(m), F.lit(True)) for m in singles[:i]]
            src = F.when(functools.reduce(Column.__and__, fresh), F.col(n)) if fresh else F.col(n)
            structs.append(pair(src))
    generated = ([F.array(*structs)] if structs else []) + arrays
    pairs = frame.select(F.inline(F.concat(*generated) if len(generated) > 1 else generated[0]))
    return pairs.filter(F.col("src").isNotNull())


def _pair_with(column_base: int) -> Callable[[Column], Column]:
    """(src) -> struct(src, dst) for the output column whose row-0 id is ``column_base``.

    A closure, not a default argument: PySpark reads a two-argument lambda
    as (element, index)."""
    dst = F.lit(column_base) + F.col(schema.ROW_COLUMN).cast("bigint")

    def pair(src: Column) -> Column:
        return F.struct(src.cast("bigint").alias("src"), dst.alias("dst"))

    return pair
