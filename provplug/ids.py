"""Value ids: one signed 64-bit integer per cell, bit-packed so that the table
and column of a captured value follow from its id alone.

Layout (bit 63 is always 0, so ids are positive ``int64`` everywhere)::

    62 ........ 46 | 45 .... 36 | 35 ................ 0
      table (17 b) | column (10)|       row (36 b)

* 131,071 tables per store (table 0 is the imported-id namespace),
* 1,024 columns per table,
* 2^36 (~68.7 billion) rows per table.

Imported provenance keeps the ids of the system it came from; those must lie
in ``[0, 2**46)`` (table bits 0) and their table is carried beside them
(``src_table``/``dst_table`` on every triple), so no id ever needs a lookup
to be partitioned by table.
"""

from __future__ import annotations

from provplug.errors import IdSpaceError

TABLE_BITS = 17
COLUMN_BITS = 10
ROW_BITS = 36

ROW_SHIFT = 0
COLUMN_SHIFT = ROW_BITS
TABLE_SHIFT = ROW_BITS + COLUMN_BITS

MAX_TABLES = (1 << TABLE_BITS) - 1
MAX_COLUMNS = 1 << COLUMN_BITS
MAX_ROWS = 1 << ROW_BITS
IMPORTED_ID_LIMIT = 1 << TABLE_SHIFT

# A captured step output's row number: its Spark partition in the high bits,
# the row's index in the partition in the low ROW_IN_PARTITION_BITS (so that
# tasks number rows without talking to each other).
PARTITION_BITS = 10
ROW_IN_PARTITION_BITS = ROW_BITS - PARTITION_BITS


def table_base(table_id: int) -> int:
    """The id of row 0, column 0 of ``table_id``."""
    if not 1 <= table_id <= MAX_TABLES:
        raise IdSpaceError(f"table id {table_id} outside 1..{MAX_TABLES}")
    return table_id << TABLE_SHIFT


def column_offset(column: int) -> int:
    if not 0 <= column < MAX_COLUMNS:
        raise IdSpaceError(f"column index {column} outside 0..{MAX_COLUMNS - 1}")
    return column << COLUMN_SHIFT


def value_id(table_id: int, column: int, row: int) -> int:
    """Pack (table, column, row) into one value id."""
    if not 0 <= row < MAX_ROWS:
        raise IdSpaceError(f"row {row} outside 0..{MAX_ROWS - 1}")
    return table_base(table_id) | column_offset(column) | row


def unpack(vid: int) -> tuple[int, int, int]:
    """Split a captured value id into (table, column, row)."""
    return (
        vid >> TABLE_SHIFT,
        (vid >> COLUMN_SHIFT) & (MAX_COLUMNS - 1),
        vid & (MAX_ROWS - 1),
    )


def is_packed(vid: int) -> bool:
    """True for ids made by capture, False for imported ids."""
    return vid >= IMPORTED_ID_LIMIT
