"""A term of a cell's provenance: the one notion both the writer (triples)
and the row lineage (which input cells a column reads) are built on; its own
module so that neither imports the other for it."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Term:
    """Part of a cell's provenance: the ids ``base + r`` for every row number
    ``r`` that the row-number column ``rows`` holds in the cell's row."""

    rows: str  # a bigint column (one row number, or null for none) or an array<bigint> column
    scalar: bool  # ``rows`` holds one row number, not an array of them
    base: int  # value id of row 0 of the source column (ids.value_id(table, column, 0))
    # ``rows`` is a member list whose elements are structs: the row numbers are
    # this field of each element (see rowlineage.MemberField); None: the elements themselves.
    field: str | None = None
