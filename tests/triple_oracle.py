"""The triple oracle shared by the adapters' tests (tests/spark, tests/beam).

A committed store is read back (:class:`Stored`) and every value id of its
triples is labelled (table name, column name, row identity), so expectations
derived by hand never depend on the row numbers an engine happens to assign.
The row identity is a function of the stored row:

* :func:`keyed` — read from the row's columns (by default its table's first
  column; ``"#row"`` is the stored row number). The Spark tests key their
  rows, so their labels are unique and triples compare as a set:
  :meth:`Stored.labelled_triples` against :func:`expect`.
* :func:`content` — the whole row (frozen). Beam defines no order for step
  outputs and its rows need not be unique, so its tests compare, per output
  value, the set of its parents' labels, counted: :meth:`Stored.lineage`
  against :func:`expect_lineage`.

Both forms state the same thing — which input values each output value was
derived from, and (for triples) by which op — in the same labels.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from provplug import ids, schema
from provplug.store.open import open_store

Label = tuple[str, str, Any]  # (table name, column name, row identity)
Triple = tuple[Label, Label, str]  # (src label, dst label, op name)
Lineage = collections.Counter  # of (table, column, row identity, frozenset of parent labels), one per output value
RowIdentity = Callable[[Mapping[str, Any], int, Mapping[str, Any]], Any]  # (table entry, row number, row) -> identity


def freeze(value: Any) -> Any:
    """A hashable, order-independent rendering of a row (dicts as sorted pairs)."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def content(table: Mapping[str, Any], number: int, row: Mapping[str, Any]) -> Any:
    """A row identified by its content (frozen)."""
    return freeze(dict(row))


def keyed(keys: Mapping[str, Sequence[str]] | None = None) -> RowIdentity:
    """Rows identified by key columns: ``keys[table name]`` (default: the
    table's first column); ``"#row"`` names the stored row number. One key
    column gives the bare value, several a tuple."""
    keys = keys or {}

    def identity(table: Mapping[str, Any], number: int, row: Mapping[str, Any]) -> Any:
        cols = keys.get(table["name"], (table["columns"][0],))
        key = tuple(number if c == "#row" else row[c] for c in cols)
        return key[0] if len(key) == 1 else key

    return identity


class Stored:
    """A committed store read back: catalogue, rows (by row number) and triples."""

    def __init__(self, path: Path) -> None:
        self.store = open_store(path)
        tables = self.store.tables().to_pylist()
        self.by_id: dict[int, dict[str, Any]] = {t["table_id"]: t for t in tables}
        self.tables: dict[str, dict[str, Any]] = {t["name"]: t for t in tables}
        self.rows_by_id: dict[int, dict[int, dict[str, Any]]] = {}
        for t in tables:
            rows = self.store.read_rows(t["run_id"], t["table_id"])
            if rows is None:
                continue
            numbered = {r.pop(schema.ROW_COLUMN): r for r in rows.to_pylist()}
            assert len(numbered) == rows.num_rows, f"row numbers of {t['name']} must be unique"
            self.rows_by_id[t["table_id"]] = numbered
        from provplug.store.triples import triple_table

        self.triples: list[dict[str, Any]] = triple_table(self.store).to_pylist()  # stored + location edges
        op_list = self.store.ops().to_pylist()
        self.ops: dict[str, dict[str, Any]] = {o["name"]: o for o in op_list}
        self.op_names: dict[int, str] = {o["op_id"]: o["name"] for o in op_list}

    @property
    def rows(self) -> dict[str, dict[int, dict[str, Any]]]:
        """Rows by table name, then row number (without the row-number column)."""
        return {self.by_id[tid]["name"]: rows for tid, rows in self.rows_by_id.items()}

    def cell(self, vid: int) -> tuple[str, str, int]:
        """(table name, column name, row number) of a value id."""
        table, column, row = ids.unpack(vid)
        t = self.by_id[table]
        return t["name"], t["columns"][column], row

    def label(self, vid: int, row_id: RowIdentity) -> Label:
        table, column, row = ids.unpack(vid)
        t = self.by_id[table]
        return t["name"], t["columns"][column], row_id(t, row, self.rows_by_id[table][row])

    def labelled_triples(self, row_id: RowIdentity) -> set[Triple]:
        """Every triple as (src label, dst label, op name); the labels must
        tell the triples apart, and the tables carried beside the ids agree
        with the ids."""
        labelled = {
            (self.label(t["src"], row_id), self.label(t["dst"], row_id), self.op_names[t["op"]]) for t in self.triples
        }
        assert len(labelled) == len(self.triples), "no duplicate triples"
        for t in self.triples:
            assert (t["src_table"], t["dst_table"]) == (ids.unpack(t["src"])[0], ids.unpack(t["dst"])[0])
        return labelled

    def lineage(self, op: str | None = None, row_id: RowIdentity = content) -> Lineage:
        """Per output value (of op ``op``, or of any): its label and the set of
        its parents' labels, counted (labels need not be unique)."""
        parents: dict[int, set[Label]] = collections.defaultdict(set)
        for t in self.triples:
            if op is not None and self.ops[op]["op_id"] != t["op"]:
                continue
            parents[t["dst"]].add(self.label(t["src"], row_id))
        return collections.Counter((*self.label(dst, row_id), frozenset(ps)) for dst, ps in parents.items())


# -- expectations, derived by hand ----------------------------------------------------------
def expect(op: str, out: str, parents: Mapping[tuple[str, Any], Sequence[Label]]) -> set[Triple]:
    """{(out column, out row identity): [input labels]} as triples of ``op``."""
    return {(src, (out, col, key), op) for (col, key), srcs in parents.items() for src in srcs}


def expect_lineage(*values: tuple[str, str, Any, Sequence[tuple[str, str, Any]]]) -> Lineage:
    """Output values (table, column, row, [parent (table, column, row)]) as a
    :class:`Lineage` by content: rows are frozen (see :func:`freeze`)."""
    return collections.Counter(
        (t, c, freeze(row), frozenset((st, sc, freeze(sr)) for st, sc, sr in ps)) for t, c, row, ps in values
    )
