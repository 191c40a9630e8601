"""Arrow schemas of the store's Parquet datasets (see docs/store-format.md)."""

from __future__ import annotations

import pyarrow as pa

TRIPLES = pa.schema(
    [
        pa.field("src", pa.int64(), nullable=False),
        pa.field("dst", pa.int64(), nullable=False),
        pa.field("op", pa.int64(), nullable=False),
        pa.field("src_table", pa.int32(), nullable=False),
        pa.field("dst_table", pa.int32(), nullable=False),
    ]
)

# Imported values only: captured ids carry table and column in their bits.
VALUES = pa.schema(
    [
        pa.field("value_id", pa.int64(), nullable=False),
        pa.field("table_id", pa.int32(), nullable=False),
        pa.field("column_id", pa.int32(), nullable=True),
    ]
)

TABLES = pa.schema(
    [
        pa.field("table_id", pa.int32(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("origin", pa.string(), nullable=False),
        pa.field("columns", pa.list_(pa.string()), nullable=False),
        pa.field("rows", pa.int64(), nullable=True),
        pa.field("stored_rows", pa.bool_(), nullable=False),
        pa.field("namespace", pa.string(), nullable=True),  # TableInfo.namespace; absent from older stores
        pa.field("dataset", pa.string(), nullable=True),
    ]
)

OPS = pa.schema(
    [
        pa.field("op_id", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("inputs", pa.list_(pa.int32()), nullable=False),
        pa.field("outputs", pa.list_(pa.int32()), nullable=False),
        pa.field("operations", pa.list_(pa.string()), nullable=False),
        pa.field("params", pa.string(), nullable=False),
        pa.field("started", pa.timestamp("us", tz="UTC"), nullable=True),
        pa.field("finished", pa.timestamp("us", tz="UTC"), nullable=True),
        pa.field("triples", pa.int64(), nullable=True),
    ]
)

# Row lineage (see provplug.ingest.rowlineage): one record per (output row, member, input row).
ROW_LINEAGE = pa.schema(
    [
        pa.field("op", pa.int64(), nullable=False),
        pa.field("out_table", pa.int32(), nullable=False),
        pa.field("out_row", pa.int64(), nullable=False),
        pa.field("member", pa.int32(), nullable=False),
        pa.field("in_table", pa.int32(), nullable=False),
        pa.field("in_row", pa.int64(), nullable=False),
        pa.field("optional", pa.bool_(), nullable=False),
    ]
)

# Column of every stored rows dataset that holds the row number of the id layout.
# An import's value -> row mapping (from the values file's ``row`` column),
# one file per imported run; its tables are named UNKNOWN_TABLE when the
# values file names none.
VALUE_ROWS = "valuerows.parquet"
VALUE_ROWS_SCHEMA = pa.schema(
    [pa.field("value_id", pa.int64(), nullable=False), pa.field("row", pa.int64(), nullable=False)]
)
UNKNOWN_TABLE = "unknown"

ROW_COLUMN = "_provplug_row"

# Stored rows come in two layouts. Rows written by provplug carry ROW_COLUMN.
# A source read from Parquet files is stored as copies of those files, each
# named after the row number of its first row (``pos-<12 digits>.parquet``):
# a row's number is that offset plus its position in the file, so the source
# is never rewritten.
POSITIONAL_PREFIX = "pos-"
_POSITIONAL_DIGITS = 12


def positional_name(offset: int) -> str:
    return f"{POSITIONAL_PREFIX}{offset:0{_POSITIONAL_DIGITS}d}.parquet"


def positional_offset(file_name: str) -> int | None:
    """The first row number of a positional rows file; None for other files."""
    stem = file_name.rsplit("/", 1)[-1]
    digits = stem[len(POSITIONAL_PREFIX) : len(POSITIONAL_PREFIX) + _POSITIONAL_DIGITS]
    if not stem.startswith(POSITIONAL_PREFIX) or not digits.isdigit():
        return None
    return int(digits)


# Arrow view types and their plain equivalents: Arrow-based writers (e.g.
# tpchgen-cli) produce views, which few compute kernels (filter) accept.
_PLAIN = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}


def plain_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with every string/binary view, at any depth of lists,
    structs and maps, replaced by plain string/binary. (List views are left
    as they are: pyarrow cannot yet cast them to lists correctly.)"""
    if arrow_type in _PLAIN:
        return _PLAIN[arrow_type]
    if pa.types.is_map(arrow_type):
        return pa.map_(plain_field(arrow_type.key_field), plain_field(arrow_type.item_field), arrow_type.keys_sorted)
    if pa.types.is_list(arrow_type):
        return pa.list_(plain_field(arrow_type.value_field))
    if pa.types.is_large_list(arrow_type):
        return pa.large_list(plain_field(arrow_type.value_field))
    if pa.types.is_fixed_size_list(arrow_type):
        return pa.list_(plain_field(arrow_type.value_field), arrow_type.list_size)
    if pa.types.is_struct(arrow_type):
        return pa.struct([plain_field(arrow_type.field(i)) for i in range(arrow_type.num_fields)])
    return arrow_type


def plain_field(field: pa.Field) -> pa.Field:
    return field.with_type(plain_type(field.type))


def plain_schema(arrow_schema: pa.Schema) -> pa.Schema:
    return pa.schema([plain_field(f) for f in arrow_schema], metadata=arrow_schema.metadata)


def without_views(table: pa.Table) -> pa.Table:
    """``table`` cast to :func:`plain_schema` (itself when it has no views)."""
    target = plain_schema(table.schema)
    return table if target == table.schema else table.cast(target)
