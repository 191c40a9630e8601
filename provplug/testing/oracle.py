"""The triple oracle: a store read back, and lineage by plain graph traversal.

Two pieces, both deliberately naive so that they are obviously right:

* :class:`TripleOracle` — the lineage a set of triples implies, by
  breadth-first search over ``(src, dst, op)``. It knows nothing of indexes,
  connected sets or Spark, so it is the reference every query method is
  compared with (:func:`provplug.testing.assert_lineage_matches_oracle`).
* :class:`StoreContents` — a committed store read back whole: its catalogue,
  every table's stored rows by row number, and every triple (the stored ones
  and those its location edges stand for, through the store's one triple
  scan). Each value id can be *labelled* ``(table name, column name, row
  identity)``, so expectations derived by hand never depend on the row numbers
  an engine happens to assign. The row identity is a function of the stored
  row:

  - :func:`keyed` — read from the row's columns (by default its table's first
    column; ``"#row"`` is the stored row number). Tests that key their rows get
    unique labels and compare triples as a set:
    :meth:`StoreContents.labelled_triples` against :func:`expect`.
  - :func:`content` — the whole row (frozen). An engine that defines no order
    for a step's output, or whose rows need not be unique (Beam), is compared
    per output value: the set of its parents' labels, counted —
    :meth:`StoreContents.lineage` against :func:`expect_lineage`.

Both forms state the same thing — which input values each output value was
derived from, and (for triples) by which op — in the same labels.
"""

from __future__ import annotations

import collections
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from provplug import ids, schema
from provplug.errors import LineageQueryError
from provplug.plugin.protocols import Store
from provplug.store.open import open_store
from provplug.store.runs import select_run
from provplug.store.triples import TripleFilter, triple_table

Direction: TypeAlias = Literal["up", "down"]
Edge: TypeAlias = tuple[int, int]  # (src value id, dst value id)
Label: TypeAlias = tuple[str, str, Any]  # (table name, column name, row identity)
Triple: TypeAlias = tuple[Label, Label, str]  # (src label, dst label, op name)
Row: TypeAlias = dict[str, Any]
# One entry per output value: (table, column, row identity, frozenset of its parents' labels).
Lineage: TypeAlias = "collections.Counter[tuple[str, str, Any, frozenset[Label]]]"
# (table catalogue entry, row number, row) -> the row's identity in labels.
RowIdentity: TypeAlias = Callable[[Mapping[str, Any], int, Mapping[str, Any]], Any]
StoreLike: TypeAlias = "Store[Any] | str | Path"

DIRECTIONS: tuple[Direction, Direction] = ("up", "down")


@dataclass(frozen=True)
class OracleAnswer:
    """What a lineage query must answer: the values reached (the queried
    ones excluded), and the triples among them as ``(src, dst)`` pairs
    (``edges``) and as ``(src, dst, op)`` (``triples``; op as the oracle was
    given it: a name for :meth:`TripleOracle.of_store`, None when not given)."""

    values: frozenset[int]
    edges: frozenset[Edge]
    triples: frozenset[tuple[int, int, Any]]


class TripleOracle:
    """Lineage by breadth-first search over triples: nothing but the graph.

    ``TripleOracle(triples)`` takes ``(src, dst)`` or ``(src, dst, op)``
    items; :meth:`of_store` reads them from a committed store (ops by name).
    """

    def __init__(self, triples: Iterable[Sequence[Any]]) -> None:
        self.triples: frozenset[tuple[int, int, Any]] = frozenset(
            (int(t[0]), int(t[1]), t[2] if len(t) > 2 else None) for t in triples
        )
        self.edges: frozenset[Edge] = frozenset((s, d) for s, d, _ in self.triples)
        self._parents: dict[int, list[int]] = collections.defaultdict(list)
        self._children: dict[int, list[int]] = collections.defaultdict(list)
        for src, dst in self.edges:
            self._parents[dst].append(src)
            self._children[src].append(dst)

    @classmethod
    def of_store(cls, store: StoreLike, run: str | None = None) -> TripleOracle:
        """The oracle of every triple of ``store`` (of run ``run`` only, when given:
        anything :func:`provplug.store.runs.select_run` accepts), ops by name."""
        opened = _opened(store)
        where = TripleFilter.of(runs=[_run_id(opened, run)]) if run is not None else TripleFilter()
        table = triple_table(opened, ("src", "dst", "op"), where)
        names = dict(
            zip(opened.ops().column("op_id").to_pylist(), opened.ops().column("name").to_pylist(), strict=True)
        )
        ops = [names[o] for o in table.column("op").to_pylist()]
        return cls(zip(table.column("src").to_pylist(), table.column("dst").to_pylist(), ops, strict=True))

    @property
    def values(self) -> frozenset[int]:
        """Every value id some triple names."""
        return frozenset(self._parents) | frozenset(self._children)

    def reach(self, values: Iterable[int], direction: str) -> frozenset[int]:
        """Ancestors (``"up"``) or descendants (``"down"``) of ``values``, the
        queried values excluded (even one that another reaches). Another
        direction is a one-line :class:`~provplug.errors.LineageQueryError`."""
        if direction not in DIRECTIONS:
            raise LineageQueryError(f"unknown direction {direction!r} (use up or down)")
        step = self._parents if direction == "up" else self._children
        start = set(values)
        seen: set[int] = set()
        queue = deque(start)
        while queue:
            for nxt in step.get(queue.popleft(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return frozenset(seen - start)

    def ancestors(self, values: Iterable[int]) -> frozenset[int]:
        return self.reach(values, "up")

    def descendants(self, values: Iterable[int]) -> frozenset[int]:
        return self.reach(values, "down")

    def answer(self, values: Iterable[int], direction: str) -> OracleAnswer:
        """The values reached from ``values`` and the triples that reach them:
        going up, every triple whose destination is a queried or reached
        value; going down, every triple whose source is one."""
        queried = frozenset(values)
        reached = self.reach(queried, direction)
        nodes = reached | queried
        end = 1 if direction == "up" else 0
        among = frozenset(t for t in self.triples if t[end] in nodes)
        return OracleAnswer(reached, frozenset((s, d) for s, d, _ in among), among)


class StoreContents:
    """A committed store read back: catalogue, rows (by row number) and triples.

    ``run`` (optional; a run number, id, prefix, label, ``latest``) limits the
    tables, ops and triples to that run. Attributes:

    * ``by_id`` / ``tables`` — catalogue entries by table id / by table name
      (of several same-named tables, the last run's),
    * ``rows_by_id`` — ``{table id: {row number: row}}`` for tables with stored
      rows (row dicts without the row-number column),
    * ``ops_by_id`` / ``ops`` / ``op_names`` — op entries by op id, by name
      (of several same-named ops, the last run's), op names by op id,
    * ``triples`` — every triple as a dict (``src``, ``dst``, ``op``,
      ``src_table``, ``dst_table``), location edges expanded.
    """

    def __init__(self, store: StoreLike, run: str | None = None) -> None:
        self.store: Store[Any] = _opened(store)
        self.run_id = _run_id(self.store, run) if run is not None else None
        tables = [t for t in self.store.tables().to_pylist() if self._in_run(t)]
        self.by_id: dict[int, dict[str, Any]] = {t["table_id"]: t for t in tables}
        self.tables: dict[str, dict[str, Any]] = {t["name"]: t for t in tables}
        self.rows_by_id: dict[int, dict[int, Row]] = {}
        for t in tables:
            numbered = _numbered_rows(self.store, t)
            if numbered is not None:
                self.rows_by_id[t["table_id"]] = numbered
        where = TripleFilter.of(runs=[self.run_id]) if self.run_id is not None else TripleFilter()
        self.triples: list[dict[str, Any]] = triple_table(self.store, where=where).to_pylist()
        op_list = [o for o in self.store.ops().to_pylist() if self._in_run(o)]
        self.ops_by_id: dict[int, dict[str, Any]] = {o["op_id"]: o for o in op_list}
        self.ops: dict[str, dict[str, Any]] = {o["name"]: o for o in op_list}
        self.op_names: dict[int, str] = {o["op_id"]: o["name"] for o in op_list}

    def _in_run(self, entry: Mapping[str, Any]) -> bool:
        return self.run_id is None or entry["run_id"] == self.run_id

    @property
    def rows(self) -> dict[str, dict[int, Row]]:
        """Rows by table name, then row number (without the row-number column)."""
        return {self.by_id[tid]["name"]: rows for tid, rows in self.rows_by_id.items()}

    @property
    def oracle(self) -> TripleOracle:
        """The :class:`TripleOracle` of these triples (ops by name)."""
        return TripleOracle((t["src"], t["dst"], self.op_names[t["op"]]) for t in self.triples)

    def cell(self, vid: int) -> tuple[str, str, int]:
        """(table name, column name, row number) of a value id."""
        table, column, row = ids.unpack(vid)
        entry = self.by_id[table]
        return entry["name"], entry["columns"][column], row

    def label(self, vid: int, row_id: RowIdentity) -> Label:
        """(table name, column name, ``row_id`` of its stored row) of a value id."""
        table, column, row = ids.unpack(vid)
        entry = self.by_id[table]
        return entry["name"], entry["columns"][column], row_id(entry, row, self.rows_by_id[table][row])

    def labelled_triples(self, row_id: RowIdentity) -> set[Triple]:
        """Every triple as (src label, dst label, op name). The labels must
        tell the triples apart (an AssertionError otherwise), and the tables
        carried beside the ids must agree with the ids."""
        labelled = {
            (self.label(t["src"], row_id), self.label(t["dst"], row_id), self.op_names[t["op"]]) for t in self.triples
        }
        if len(labelled) != len(self.triples):
            raise AssertionError(f"{len(self.triples) - len(labelled)} triples share their labels with another")
        for t in self.triples:
            if (t["src_table"], t["dst_table"]) != (ids.unpack(t["src"])[0], ids.unpack(t["dst"])[0]):
                raise AssertionError(f"triple {t} carries tables its ids do not name")
        return labelled

    def lineage(self, op: str | None = None, row_id: RowIdentity | None = None) -> Lineage:
        """Per output value (of op ``op``, or of any): its label and the set of
        its parents' labels, counted (labels need not be unique). Rows are
        identified by :func:`content` unless ``row_id`` says otherwise."""
        identity = row_id or content
        parents: dict[int, set[Label]] = collections.defaultdict(set)
        for t in self.triples:
            if op is not None and self.ops[op]["op_id"] != t["op"]:
                continue
            parents[t["dst"]].add(self.label(t["src"], identity))
        return collections.Counter((*self.label(dst, identity), frozenset(ps)) for dst, ps in parents.items())


# -- row identities -------------------------------------------------------------------------
def freeze(value: Any) -> Any:
    """A hashable, order-independent rendering of a row (dicts as sorted pairs, lists as tuples)."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def content(table: Mapping[str, Any], number: int, row: Mapping[str, Any]) -> Any:
    """A row identified by its content (frozen, see :func:`freeze`)."""
    return freeze(dict(row))


def keyed(keys: Mapping[str, Sequence[str]] | None = None) -> RowIdentity:
    """Rows identified by key columns: ``keys[table name]`` (default: the
    table's first column); ``"#row"`` names the stored row number. One key
    column gives the bare value, several a tuple."""
    chosen: Mapping[str, Sequence[str]] = keys or {}

    def identity(table: Mapping[str, Any], number: int, row: Mapping[str, Any]) -> Any:
        cols = chosen.get(table["name"], (table["columns"][0],))
        key = tuple(number if c == "#row" else row[c] for c in cols)
        return key[0] if len(key) == 1 else key

    return identity


# -- expectations, derived by hand ----------------------------------------------------------
def expect(op: str, out: str, parents: Mapping[tuple[str, Any], Sequence[Label]]) -> set[Triple]:
    """``{(out column, out row identity): [input labels]}`` as the triples of
    ``op`` into table ``out`` (compare with :meth:`StoreContents.labelled_triples`)."""
    return {(src, (out, col, key), op) for (col, key), srcs in parents.items() for src in srcs}


def expect_lineage(*values: tuple[str, str, Any, Sequence[tuple[str, str, Any]]]) -> Lineage:
    """Output values ``(table, column, row, [parent (table, column, row)])`` as
    a :data:`Lineage` by content (rows frozen, see :func:`freeze`); compare
    with :meth:`StoreContents.lineage`."""
    return collections.Counter(
        (t, c, freeze(row), frozenset((st, sc, freeze(sr)) for st, sc, sr in ps)) for t, c, row, ps in values
    )


# -- reading ----------------------------------------------------------------------------------
def _opened(store: StoreLike) -> Store[Any]:
    return open_store(store) if isinstance(store, (str, Path)) else store


def _run_id(store: Store[Any], run: str) -> str:
    """The id of run ``run`` (a one-line ``LineageQueryError`` when the store has no such run)."""
    return str(select_run(store.runs(), run)["run_id"])


def _numbered_rows(store: Store[Any], table: Mapping[str, Any]) -> dict[int, Row] | None:
    """The stored rows of ``table`` by row number, or None when it stores none."""
    rows = store.read_rows(table["run_id"], table["table_id"])
    if rows is None:
        return None
    numbered = {r.pop(schema.ROW_COLUMN): r for r in rows.to_pylist()}
    if len(numbered) != rows.num_rows:
        raise AssertionError(f"table {table['name']!r} stores {rows.num_rows} rows under {len(numbered)} row numbers")
    return numbered


__all__ = [
    "DIRECTIONS",
    "Direction",
    "Label",
    "OracleAnswer",
    "RowIdentity",
    "StoreContents",
    "Triple",
    "TripleOracle",
    "content",
    "expect",
    "expect_lineage",
    "freeze",
    "keyed",
]
