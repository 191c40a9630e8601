"""Arrow schemas of the store's Parquet datasets (see README, "Store layout")."""

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

# Column of every stored rows dataset that holds the row number of the id layout.
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
    digits = stem[len(POSITIONAL_PREFIX):len(POSITIONAL_PREFIX) + _POSITIONAL_DIGITS]
    if not stem.startswith(POSITIONAL_PREFIX) or not digits.isdigit():
        return None
    return int(digits)
