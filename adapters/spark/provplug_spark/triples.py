"""Turn a materialised step output into triples, written by Spark in the
store's TRIPLES schema.

Two sources of triples, written by one Spark job:

* per-row provenance: the output's ``__pv_N`` columns (one source id, or an
  array of them) beside its row numbers;
* group joins (:class:`~.jvm.GroupJoin`): the stored output rows joined back
  to the recomputed input rows of an aggregate on the grouping values, each
  joined pair giving (member cell -> output cell) triples directly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from provplug import ids, schema

from .jvm import GroupJoin, Rewritten

# Bytes per triple stay far below the 8-byte target without sorting (ids of
# one output column arrive in runs of equal dst / increasing src, which the
# v2 delta encodings and zstd store in a few bits), and sorting every file
# by (dst, src) cost about a third of the triple-writing time.
WRITE_OPTIONS = {
    "compression": "zstd",
    "parquet.writer.version": "v2",
    "parquet.enable.dictionary": "false",
}
MEMBER_KEY = "__member_key_"


def triples_frame(stored: DataFrame, rewritten: Rewritten, table_id: int, op_id: int) -> DataFrame | None:
    """Every triple of the output ``stored`` (its columns, row numbers,
    provenance and hidden group-join columns); None when it has none."""
    frames = []
    per_row = _per_row_frame(stored, rewritten, table_id)
    if per_row is not None:
        frames.append(per_row)
    by_group: dict[int, list[tuple[int, tuple[str, ...]]]] = {}
    for j, deferred in enumerate(rewritten.deferred):
        if deferred is not None and deferred[1]:
            by_group.setdefault(deferred[0], []).append((j, deferred[1]))
    for g, columns in sorted(by_group.items()):
        frames.append(_group_frame(stored, rewritten.groups[g], columns, table_id))
    if not frames:
        return None
    return functools.reduce(DataFrame.union, [f.select(*_typed(op_id, table_id)) for f in frames])


def _per_row_frame(stored: DataFrame, rewritten: Rewritten, table_id: int) -> DataFrame | None:
    columns = [
        (j, (p,)) for j, (p, none) in enumerate(zip(rewritten.prov_columns, rewritten.prov_none)) if not none
    ]
    scalar = dict(zip(rewritten.prov_columns, rewritten.prov_scalar))
    return _pairs_frame(stored, columns, scalar, table_id) if columns else None


def _group_frame(stored: DataFrame, group: GroupJoin, columns: Sequence[tuple[int, tuple[str, ...]]],
                 table_id: int) -> DataFrame:
    """(member cell, output cell) pairs of one aggregate's output columns."""
    out = stored.filter(F.col(group.marker).isNotNull()).select(F.col(schema.ROW_COLUMN), *[F.col(k) for k in group.keys])
    renamed = [f"{MEMBER_KEY}{i}" for i in range(len(group.keys))]
    members = group.child.select(*[F.col(k).alias(r) for k, r in zip(group.keys, renamed)], *[F.col(p) for p in group.scalar])
    if group.keys:
        condition = functools.reduce(Column.__and__, [F.col(k).eqNullSafe(F.col(r)) for k, r in zip(group.keys, renamed)])
        joined = out.join(members, condition)
    else:  # a global aggregate: its (at most one) row has every input row
        joined = out.crossJoin(members)
    frame = _pairs_frame(joined, columns, group.scalar, table_id)
    # Rows of a group may repeat a source id (a join or explode below the
    # aggregate); a triple is stored once.
    return frame.distinct() if group.distinct else frame


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


def _typed(op_id: int, table_id: int) -> list[Column]:
    return [
        F.col("src").cast("bigint").alias("src"),
        F.col("dst").cast("bigint").alias("dst"),
        F.lit(op_id).cast("bigint").alias("op"),
        F.shiftright(F.col("src"), ids.TABLE_SHIFT).cast("int").alias("src_table"),
        F.lit(table_id).cast("int").alias("dst_table"),
    ]


def write_triples(stored: DataFrame, rewritten: Rewritten, table_id: int, op_id: int, path: str) -> None:
    """Append the output's triples under ``path`` (an empty file when it has
    none, so the dataset always exists)."""
    frame = triples_frame(stored, rewritten, table_id, op_id)
    if frame is None:
        empty = stored.sparkSession.createDataFrame([], "src bigint, dst bigint")
        frame = empty.select(*_typed(op_id, table_id))
    frame.write.mode("append").options(**WRITE_OPTIONS).parquet(path)
