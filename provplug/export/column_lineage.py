"""Column lineage of ops, derived from their stored triples.

For every op, the distinct ``(input table, input column) -> (output table,
output column)`` pairs its triples link, each with an OpenLineage
transformation. The pairs come from one pushed-down scan of the triples
(only ``src``, ``dst``, ``op`` of the wanted ops), value ids decoded with
array arithmetic (:mod:`provplug.ids`, the catalogue for imported ids) and
grouped with one sort: no Python runs per triple.

How a pair's transformation is chosen (provplug's capture semantics say
which cells are parents; the op's kind and operations, the pair's fan-in —
several input cells of the column per output cell — and whether every output
cell equals its input cell tell which kind of derivation it is):

========  =============================================  ==============================  =====================
op kind   the pair's triples                             field transformation            dataset-level (INDIRECT)
========  =============================================  ==============================  =====================
builtin   one input cell per output cell, equal values   DIRECT / IDENTITY ("copied")    —
builtin   one input cell per output cell, values differ  DIRECT / TRANSFORMATION         —
builtin   several input cells, values differ             DIRECT / AGGREGATION            —
builtin   several input cells, all equal to the output   DIRECT / IDENTITY ("group key") GROUP_BY on the input
          (a group key, or a distinct column)
builtin   an op with a join, equal values, and the same  DIRECT / IDENTITY ("join key")  JOIN on each input
          output column fed so from two input tables
          (a merged ``using`` key)
udf       one / several input cells per output cell      DIRECT / TRANSFORMATION /       —
                                                         AGGREGATION ("black-box UDF")
imported  one / several                                  DIRECT / TRANSFORMATION /       —
                                                         AGGREGATION ("imported op")
coarse    none: its coarse edges name the columns        DIRECT / TRANSFORMATION         —
                                                         ("coarse step: REASON")
========  =============================================  ==============================  =====================

Values are compared only where both tables' rows are stored (else the pair
is classified by fan-in alone). Filter predicates, sort keys and join keys
that are not merged into an output column are not parents of any cell (see
the docs/capture-semantics.md), so no INDIRECT FILTER / SORT field can be
named for them. Imported values without a column are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provplug.export.scope import Table, stored_rows

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from provplug.plugin.protocols import Store

# Column index of imported values whose column is not recorded.
_NO_COLUMN = -1
# Bits of one (table, column) code: ids.TABLE_BITS + ids.COLUMN_BITS.
_CODE_BITS = 27


@dataclass(frozen=True)
class Transformation:
    type: str
    subtype: str
    description: str


@dataclass(frozen=True)
class ColumnPair:
    """``src_table.src_column`` feeds ``dst_table.dst_column`` in op ``op_id``."""

    op_id: int
    src_table: int
    src_column: str
    dst_table: int
    dst_column: str
    field: Transformation
    dataset: Transformation | None = None


def column_pairs(
    store: Store, ops: list[dict[str, Any]], tables: dict[int, Table], triples: Any = None
) -> dict[int, list[ColumnPair]]:
    """The column pairs of each op (by op id), from ``triples`` (a pyarrow
    table of ``src, dst, op``) or else from the ops' stored triples."""
    import numpy as np

    from provplug.progress import Progress
    from provplug.query.catalog import catalog_for

    by_op: dict[int, list[ColumnPair]] = {int(o["op_id"]): [] for o in ops}
    if triples is None:
        progress = Progress()  # millions of triples take seconds: say so
        progress.update("export: reading the ops' triples", force=True)
        triples = _scan(store, list(by_op))
        progress.done("export: read the ops' triples", triples.num_rows, "triples")
    if triples.num_rows == 0:
        return by_op
    catalog = catalog_for(store)
    src_t, src_c, src_r = catalog.locate(triples.column("src").to_numpy())
    dst = triples.column("dst").to_numpy()
    dst_t, dst_c, dst_r = catalog.locate(dst)
    op = triples.column("op").to_numpy().astype(np.int64)
    known = (src_c != _NO_COLUMN) & (dst_c != _NO_COLUMN) & (src_t >= 0) & (dst_t >= 0)
    if not known.all():
        op, src_t, src_c, src_r, dst, dst_t, dst_c, dst_r = (
            a[known] for a in (op, src_t, src_c, src_r, dst, dst_t, dst_c, dst_r)
        )
    # One integer per (input column, output column): table and column fit 27 bits each.
    pair = (_column_code(src_t, src_c) << _CODE_BITS) | _column_code(dst_t, dst_c)
    del src_t, src_c, dst_t, dst_c
    order = np.lexsort((dst, pair, op))
    op, pair, src_r, dst, dst_r = op[order], pair[order], src_r[order], dst[order], dst_r[order]
    del order
    starts = np.flatnonzero(np.r_[True, (op[1:] != op[:-1]) | (pair[1:] != pair[:-1])])
    ends = np.r_[starts[1:], len(op)]
    kinds = {int(o["op_id"]): o for o in ops}
    values = _ValueCache(store, tables)
    raw: list[tuple[int, int, int, int, int, bool, bool | None]] = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        o, code = int(op[start]), int(pair[start])
        (st, sc), (dt, dc) = _column_of(code >> _CODE_BITS), _column_of(code & ((1 << _CODE_BITS) - 1))
        fan_in = bool((dst[start + 1 : end] == dst[start : end - 1]).any())  # an output cell with several inputs
        identical = None
        if kinds.get(o, {}).get("kind") == "builtin":
            identical = values.identical((st, sc, src_r[start:end]), (dt, dc, dst_r[start:end]))
        raw.append((o, st, sc, dt, dc, fan_in, identical))
    for classified in _classified(raw, kinds, tables):
        by_op.setdefault(classified.op_id, []).append(classified)
    return by_op


def _column_code(table: NDArray[np.int64], column: NDArray[np.int64]) -> NDArray[np.int64]:
    from provplug import ids

    return (table << ids.COLUMN_BITS) | column


def _column_of(code: int) -> tuple[int, int]:
    from provplug import ids

    return code >> ids.COLUMN_BITS, code & (ids.MAX_COLUMNS - 1)


def _scan(store: Store, op_ids: list[int]) -> Any:
    from provplug.store.triples import TripleFilter, triple_table

    # The stored triples and the location edges' (provplug.store.triples), of these ops only.
    return triple_table(store, ["src", "dst", "op"], TripleFilter.of(ops=op_ids))


def _classified(
    raw: list[tuple[int, int, int, int, int, bool, bool | None]],
    ops: dict[int, dict[str, Any]],
    tables: dict[int, Table],
) -> list[ColumnPair]:
    """Each pair with its transformation (see the module's table)."""
    # Output columns fed, unchanged, from two or more input tables: merged join keys.
    feeders: dict[tuple[int, int, int], set[int]] = {}
    for o, st, _, dt, dc, _, identical in raw:
        if identical:
            feeders.setdefault((o, dt, dc), set()).add(st)
    out = []
    for o, st, sc, dt, dc, fan_in, identical in raw:
        if st not in tables or dt not in tables:
            continue
        op = ops.get(o, {})
        joins = any("join" in name.lower() for name in op.get("operations", ()))
        field, dataset = _transformation(
            op.get("kind", "imported"), fan_in, identical, joins and len(feeders.get((o, dt, dc), ())) > 1
        )
        src, dst = tables[st], tables[dt]
        if sc >= len(src.columns) or dc >= len(dst.columns):
            continue
        out.append(ColumnPair(o, st, src.columns[sc], dt, dst.columns[dc], field, dataset))
    return out


def _transformation(
    kind: str, fan_in: bool, identical: bool | None, merged_join_key: bool
) -> tuple[Transformation, Transformation | None]:
    if kind == "udf":
        return Transformation("DIRECT", "AGGREGATION" if fan_in else "TRANSFORMATION", "black-box UDF"), None
    if kind != "builtin":
        return Transformation("DIRECT", "AGGREGATION" if fan_in else "TRANSFORMATION", "imported op"), None
    if merged_join_key:
        return Transformation("DIRECT", "IDENTITY", "join key"), Transformation("INDIRECT", "JOIN", "join key")
    if identical and fan_in:
        return (Transformation("DIRECT", "IDENTITY", "group key"), Transformation("INDIRECT", "GROUP_BY", "group key"))
    if identical:
        return Transformation("DIRECT", "IDENTITY", "copied"), None
    if fan_in:
        return Transformation("DIRECT", "AGGREGATION", "aggregated over a group"), None
    return Transformation("DIRECT", "TRANSFORMATION", "computed"), None


class _ValueCache:
    """Stored cell values by (table, column, row numbers), each table read once."""

    def __init__(self, store: Store, tables: dict[int, Table]) -> None:
        self.store = store
        self.tables = tables
        self._rows: dict[int, tuple[np.ndarray, np.ndarray, Any] | None] = {}

    def identical(self, src: tuple[int, int, np.ndarray], dst: tuple[int, int, np.ndarray]) -> bool | None:
        """Whether every dst cell equals its src cell; None when a table's rows are not stored."""
        import pyarrow.compute as pc

        left, right = self._cells(*src), self._cells(*dst)
        if left is None or right is None:
            return None
        if left.type != right.type:
            try:
                left = left.cast(right.type)
            except Exception:  # types that cannot be compared are not a copy
                return False
        try:
            equal = pc.equal(left, right)
        except Exception:  # nested types have no equality kernel
            return bool(left.to_pylist() == right.to_pylist())
        both_null = pc.and_(pc.is_null(left), pc.is_null(right))
        return bool(pc.all(pc.or_(pc.fill_null(equal, False), both_null)).as_py())

    def _cells(self, table_id: int, column: int, rows: np.ndarray) -> Any:
        import numpy as np

        if table_id not in self._rows:
            self._rows[table_id] = self._read(table_id)
        held = self._rows[table_id]
        if held is None:
            return None
        numbers, order, data = held
        if len(numbers) and numbers[0] == 0 and numbers[-1] == len(numbers) - 1:
            # Row numbers 0..n-1 (the usual case): a row number is its sorted position.
            if len(rows) and (rows.min() < 0 or rows.max() >= len(numbers)):
                return None
            return data.column(column).take(order[rows])
        at = np.searchsorted(numbers, rows)
        at = np.minimum(at, len(numbers) - 1)
        if len(numbers) == 0 or not (numbers[at] == rows).all():
            return None  # a row the store does not hold
        return data.column(column).take(order[at])

    def _read(self, table_id: int) -> tuple[np.ndarray, np.ndarray, Any] | None:
        import numpy as np

        from provplug import schema

        table = self.tables.get(table_id)
        if table is None or not table.stored_rows:
            return None
        rows = stored_rows(self.store, table)
        if schema.ROW_COLUMN not in rows.column_names:
            return None
        numbers = rows.column(schema.ROW_COLUMN).to_numpy()
        order = np.argsort(numbers, kind="stable")
        data = rows.select(list(table.columns))
        return numbers[order], order, data


def coarse_pairs(edges: Any, ops: list[dict[str, Any]], tables: dict[int, Table]) -> list[ColumnPair]:
    """The column pairs of coarse steps, from their coarse edges (they have
    no triple): each output column on each input column it may derive from."""
    from provplug.model import coarse_reason

    reasons = {int(o["op_id"]): coarse_reason(o) for o in ops if o.get("kind") == "coarse"}
    pairs = []
    for edge in edges:
        src, dst = tables.get(edge.src_table), tables.get(edge.dst_table)
        if src is None or dst is None or edge.op not in reasons:
            continue
        how = Transformation("DIRECT", "TRANSFORMATION", f"coarse step: {reasons[edge.op]}")
        for j, out in enumerate(dst.columns):
            for i in edge.sources_of(j, len(src.columns)):
                pairs.append(ColumnPair(edge.op, edge.src_table, src.columns[i], edge.dst_table, out, how))
    return pairs
