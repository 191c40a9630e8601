from __future__ import annotations

import pytest

from provplug import ids
from provplug.errors import IdSpaceError


def test_layout_meets_the_required_capacity() -> None:
    assert ids.MAX_TABLES >= 10**5
    assert ids.MAX_COLUMNS >= 1000
    assert ids.MAX_ROWS >= 2**32
    assert ids.TABLE_BITS + ids.COLUMN_BITS + ids.ROW_BITS == 63  # sign bit stays 0


@pytest.mark.parametrize(
    "table,column,row",
    [(1, 0, 0), (ids.MAX_TABLES, ids.MAX_COLUMNS - 1, ids.MAX_ROWS - 1), (100_000, 999, 2**32 + 7)],
)
def test_pack_unpack_round_trip(table: int, column: int, row: int) -> None:
    vid = ids.value_id(table, column, row)
    assert 0 < vid < 2**63
    assert ids.unpack(vid) == (table, column, row)
    assert ids.is_packed(vid)


def test_imported_ids_are_never_packed() -> None:
    assert not ids.is_packed(25)
    assert not ids.is_packed(ids.IMPORTED_ID_LIMIT - 1)


@pytest.mark.parametrize(
    "table,column,row", [(0, 0, 0), (ids.MAX_TABLES + 1, 0, 0), (1, 1024, 0), (1, 0, -1), (1, 0, 2**36)]
)
def test_out_of_range_parts_are_rejected(table: int, column: int, row: int) -> None:
    with pytest.raises(IdSpaceError):
        ids.value_id(table, column, row)
