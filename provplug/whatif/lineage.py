"""The row-lineage records one op's what-if step needs, read with filters.

Every read is a filtered scan of the run's ``rowlineage/`` dataset
(:func:`provplug.ingest.rowlineage.lineage_of`): on ``op`` and ``out_table`` first
(the writers keep an op's records together, so Parquet statistics skip the
others), then on ``(in_table, in_row)`` to find the output rows an input row
reaches, or on ``out_row`` to read those rows' members whole.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from provplug.rowrules import OpRowRules
from provplug.store import files as storefiles

if TYPE_CHECKING:
    from provplug.plugin.protocols import Store

COLUMNS = ["out_row", "member", "in_table", "in_row", "optional"]
EMPTY = pa.schema(
    [
        ("out_row", pa.int64()),
        ("member", pa.int32()),
        ("in_table", pa.int32()),
        ("in_row", pa.int64()),
        ("optional", pa.bool_()),
    ]
).empty_table()


class RowLineage:
    """Filtered reads of a store's row-lineage records; counts what it read."""

    def __init__(self, store: Store[Any]) -> None:
        from provplug.ingest import rowlineage

        self.store = store
        self.dataset = rowlineage.lineage_of(store)
        self.records_read = 0
        self.scans = 0

    def _scan(self, where: pc.Expression) -> pa.Table:
        if self.dataset is None:
            return EMPTY
        self.scans += 1
        with storefiles.damage_reported(f"row lineage of {self.store.uri}"):
            table = self.dataset.to_table(columns=COLUMNS, filter=where)
        self.records_read += table.num_rows
        return table

    @staticmethod
    def _of_op(rules: OpRowRules) -> pc.Expression:
        return (pc.field("op") == rules.op) & (pc.field("out_table") == rules.out_table)

    def touching(self, rules: OpRowRules, rows: Mapping[int, np.ndarray]) -> pa.Table:
        """The records of ``rules``' op whose input row is one of ``rows``
        (input table -> row numbers)."""
        wanted = [
            (pc.field("in_table") == t) & pc.field("in_row").isin(pa.array(r, pa.int64()))
            for t, r in rows.items()
            if len(r)
        ]
        if not wanted:
            return EMPTY
        return self._scan(self._of_op(rules) & functools.reduce(operator.or_, wanted))

    def of_rows(self, rules: OpRowRules, out_rows: np.ndarray) -> pa.Table:
        """Every record of the op's output rows ``out_rows``."""
        if not len(out_rows):
            return EMPTY
        return self._scan(self._of_op(rules) & pc.field("out_row").isin(pa.array(out_rows, pa.int64())))

    def reads_input(self, rules: OpRowRules, table: int) -> bool:
        """Whether any record of the op names an input row of ``table``."""
        if self.dataset is None:
            return False
        where = self._of_op(rules) & (pc.field("in_table") == table)
        with storefiles.damage_reported(f"row lineage of {self.store.uri}"):
            return bool(self.dataset.head(1, columns=["in_row"], filter=where).num_rows)
