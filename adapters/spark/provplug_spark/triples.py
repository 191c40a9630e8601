"""Turn a materialised step output (row numbers + one provenance array per
column) into triples, written by Spark in the store's TRIPLES schema."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from provplug import ids, schema

# Encoding tuned for bytes per triple: sorted by (dst, src) each column is a
# run of near-equal or increasing integers, which Parquet's v2 delta / RLE
# encodings plus zstd store in a few bits.
WRITE_OPTIONS = {
    "compression": "zstd",
    "parquet.writer.version": "v2",
    "parquet.enable.dictionary": "false",
}


def triples_frame(stored: DataFrame, prov_columns: Sequence[str], prov_scalar: Sequence[bool],
                  table_id: int, op_id: int) -> DataFrame:
    """One row per (source value, output value) pair of ``stored``.

    A scalar provenance column holds one source id (null: none), an array
    column several."""
    pairs = []
    for j, (p, scalar) in enumerate(zip(prov_columns, prov_scalar)):
        pair = _pair_with(ids.value_id(table_id, j, 0))
        if scalar:
            pairs.append(F.filter(F.array(pair(F.col(p))), lambda s: s["src"].isNotNull()))
        else:
            pairs.append(F.transform(F.coalesce(F.col(p), F.array().cast("array<bigint>")), pair))
    if not pairs:
        return stored.sparkSession.createDataFrame([], "src bigint, dst bigint").select(*_typed(op_id, table_id))
    exploded = stored.select(F.inline(F.concat(*pairs) if len(pairs) > 1 else pairs[0]))
    return exploded.select(*_typed(op_id, table_id))


def _pair_with(column_base: int) -> Callable[[Column], Column]:
    """(src) -> struct(src, dst) for the output column whose row-0 id is ``column_base``.

    A closure, not a default argument: PySpark reads a two-argument lambda
    as (element, index)."""
    dst = F.lit(column_base) + F.col(schema.ROW_COLUMN).cast("bigint")

    def pair(src: Column) -> Column:
        return F.struct(src.alias("src"), dst.alias("dst"))

    return pair


def _typed(op_id: int, table_id: int) -> list[Column]:
    return [
        F.col("src").cast("bigint").alias("src"),
        F.col("dst").cast("bigint").alias("dst"),
        F.lit(op_id).cast("bigint").alias("op"),
        F.shiftright(F.col("src"), ids.TABLE_SHIFT).cast("int").alias("src_table"),
        F.lit(table_id).cast("int").alias("dst_table"),
    ]


def write_triples(stored: DataFrame, prov_columns: Sequence[str], prov_scalar: Sequence[bool],
                  table_id: int, op_id: int, path: str) -> None:
    frame = triples_frame(stored, prov_columns, prov_scalar, table_id, op_id).sortWithinPartitions("dst", "src")
    frame.write.mode("append").options(**WRITE_OPTIONS).parquet(path)
