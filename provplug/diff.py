"""``provplug diff``: which cells differ between two runs, and why.

For each table name both runs wrote (or the one named), rows of run A are
matched with rows of run B, and every matched cell whose value differs is a
*changed cell*; unmatched rows are *removed* (only in A) or *added* (only in
B). For a changed cell the lineage of the cell is traced in each run (one
query per run, so the store must be indexed) and its source cells — the
ancestors with no parent — are compared through the same row matching: the
ones whose value changed, whose row was added or removed, or that entered or
left the lineage, explain the change ("why did today's number change").

Row matching rule (the same for the compared tables and the tables of the
source cells):

1. the ``--key`` columns, for every table that has them all;
2. else the table's non-numeric columns (text, booleans, dates, times,
   binary): a re-run of a pipeline on changed input changes measures, and
   keeps names, cities, dates and ids that are text;
3. rows with equal keys are matched in row-number order (the first with the
   first, ...), so duplicate keys — and a table without non-numeric columns,
   whose key is empty — fall back to row position.

Values are equal when both are null, both NaN, floats within a relative 1e-9
(the order in which Spark adds a group's values may differ between runs), or
else exactly equal.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provplug import schema
from provplug.errors import LineageQueryError, NotIndexedError
from provplug.export.scope import Table, resolve_run, stored_rows, tables_of
from provplug.store.runs import run_summary

if TYPE_CHECKING:
    import pyarrow as pa

    from provplug.plugin.protocols import Store

FLOAT_TOLERANCE = 1e-9
POSITION = "#"  # the key of a row matched by position


@dataclass
class Matching:
    """Rows of one table in run A and run B, matched by ``key``."""

    key: tuple[str, ...]
    a: pa.Table
    b: pa.Table
    pairs: list[tuple[int, int]]  # (row number in A, row number in B)
    only_a: list[int]
    only_b: list[int]
    labels_a: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels_b: dict[int, dict[str, Any]] = field(default_factory=dict)
    a_to_b: dict[int, int] = field(default_factory=dict)
    b_to_a: dict[int, int] = field(default_factory=dict)
    _index_a: dict[int, int] = field(default_factory=dict)
    _index_b: dict[int, int] = field(default_factory=dict)

    def value(self, side: str, row: int, column: str) -> Any:
        table, index = (self.a, self._index_a) if side == "a" else (self.b, self._index_b)
        if column not in table.column_names or row not in index:
            return None
        return _plain(table.column(column)[index[row]].as_py())


def diff_runs(
    store: Store,
    run_a: str | None,
    run_b: str | None,
    table: str | None = None,
    column: str | None = None,
    where: str | None = None,
    key: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The differences between runs ``run_a`` and ``run_b`` (anything
    ``--run`` takes: a number, ``latest~N``, a label, an id prefix). Without
    runs, ``table`` is compared in the two latest runs that wrote it."""
    store.check()
    if (run_a is None) != (run_b is None):
        raise LineageQueryError("give two runs to compare, or none (then the two latest runs that wrote TABLE)")
    if run_a is None or run_b is None:
        a, b = _two_latest_writers(store, table)
    else:
        a, b = resolve_run(store, run_a), resolve_run(store, run_b)
    tables_a = {t.name: t for t in tables_of(store, {a})}
    tables_b = {t.name: t for t in tables_of(store, {b})}
    names = _compared_names(tables_a, tables_b, table, a, b)
    differ = _Differ(store, a, b, tuple(key or ()))
    entries = [differ.table(tables_a[n], tables_b[n], column, where) for n in names]
    explained = differ.explain(entries)
    manifests = {m["run_id"]: m for m in store.runs()}
    return {
        "run_a": a,
        "run_b": b,
        "runs": {
            "a": run_summary(manifests[a]),
            "b": run_summary(manifests[b]),
            "chosen": "given" if run_a is not None else "latest two",
        },
        "tables": entries,
        "only_in_a": sorted(set(tables_a) - set(tables_b)) if table is None else [],
        "only_in_b": sorted(set(tables_b) - set(tables_a)) if table is None else [],
        "explained": explained,
    }


def _two_latest_writers(store: Store, table: str | None) -> tuple[str, str]:
    """The ids of the two latest runs (by number) that wrote ``table``."""
    if table is None:
        raise LineageQueryError("give two runs to compare, or a TABLE (then its two latest runs are compared)")
    wrote = {t.run_id for t in tables_of(store) if t.name == table}
    writers = [m["run_id"] for m in store.runs() if m["run_id"] in wrote]
    if len(writers) < 2:
        have = "no run" if not writers else "only one run"
        raise LineageQueryError(f"{have} wrote a table {table!r}: nothing to compare (give two runs)")
    return writers[-2], writers[-1]


def _compared_names(
    tables_a: dict[str, Table], tables_b: dict[str, Table], table: str | None, a: str, b: str
) -> list[str]:
    if table is None:
        return [t.name for t in sorted(tables_a.values(), key=lambda t: t.table_id) if t.name in tables_b]
    for run, tables in ((a, tables_a), (b, tables_b)):
        if table not in tables:
            raise LineageQueryError(
                f"run {run} has no table {table!r} (its tables: {', '.join(sorted(tables)) or 'none'})"
            )
    return [table]


class _Differ:
    def __init__(self, store: Store, run_a: str, run_b: str, key: tuple[str, ...]) -> None:
        self.store = store
        self.runs = (run_a, run_b)
        self.key = key
        self.tables = {t.table_id: t for t in tables_of(store)}
        self._matchings: dict[tuple[int, int], Matching] = {}

    # -- matching -------------------------------------------------------------------
    def matching(self, ta: Table, tb: Table) -> Matching:
        cached = self._matchings.get((ta.table_id, tb.table_id))
        if cached is None:
            cached = match_rows(stored_rows(self.store, ta), stored_rows(self.store, tb), self._key_for(ta, tb))
            self._matchings[(ta.table_id, tb.table_id)] = cached
        return cached

    def _key_for(self, ta: Table, tb: Table) -> tuple[str, ...]:
        if self.key and all(k in ta.columns and k in tb.columns for k in self.key):
            return self.key
        return default_key(stored_rows(self.store, ta), stored_rows(self.store, tb))

    # -- one table ------------------------------------------------------------------
    def table(self, ta: Table, tb: Table, column: str | None, where: str | None) -> dict[str, Any]:
        if self.key and column is not None and self._key_for(ta, tb) != self.key:
            raise LineageQueryError(
                f"--key {','.join(self.key)}: table {ta.name} lacks a key column (columns: {', '.join(ta.columns)})"
            )
        if column is not None and (column not in ta.columns or column not in tb.columns):
            raise LineageQueryError(f"table {ta.name!r} has no column {column!r} in both runs")
        m = self.matching(ta, tb)
        pairs, only_a, only_b = m.pairs, m.only_a, m.only_b
        if where is not None:
            chosen_a, chosen_b = _where_rows(m.a, where), _where_rows(m.b, where)
            pairs = [(x, y) for x, y in pairs if x in chosen_a or y in chosen_b]
            only_a = [x for x in only_a if x in chosen_a]
            only_b = [y for y in only_b if y in chosen_b]
        columns = [c for c in ta.columns if c in tb.columns and c not in m.key and (column is None or c == column)]
        changed = []
        for c in columns:
            for x, y in _differing(m, pairs, c):
                changed.append(
                    {
                        "column": c,
                        "key": m.labels_a[x],
                        "old": m.value("a", x, c),
                        "new": m.value("b", y, c),
                        "value_id_a": _value_id(ta, c, x),
                        "value_id_b": _value_id(tb, c, y),
                        "because": [],
                    }
                )
        return {
            "table": ta.name,
            "origin": tb.origin,
            "table_ids": [ta.table_id, tb.table_id],
            "key": list(m.key),
            "changed": changed,
            "added": [{"key": m.labels_b[y], "row": _row(m, "b", y)} for y in only_b],
            "removed": [{"key": m.labels_a[x], "row": _row(m, "a", x)} for x in only_a],
            "matched_rows": len(pairs),
            "columns_only_in_a": [c for c in ta.columns if c not in tb.columns],
            "columns_only_in_b": [c for c in tb.columns if c not in ta.columns],
        }

    # -- why ------------------------------------------------------------------------
    def explain(self, entries: list[dict[str, Any]]) -> bool | str:
        """Fill ``because`` of every changed cell; True, or why it could not be done."""
        cells = [c for e in entries for c in e["changed"]]
        if not cells:
            return True
        try:
            sources_a = self._sources([c["value_id_a"] for c in cells])
            sources_b = self._sources([c["value_id_b"] for c in cells])
        except NotIndexedError as exc:
            return f"not explained: {exc}"
        for cell in cells:
            cell["because"] = self._causes(sources_a[cell["value_id_a"]], sources_b[cell["value_id_b"]])
        return True

    def _sources(self, cells: list[int]) -> dict[int, set[int]]:
        """The source cells (ancestors without a parent) of each cell, from one lineage query."""
        from provplug.query.lineage import LineageQueries

        answer = LineageQueries(self.store).lineage(sorted(set(cells)))
        parents: dict[int, list[int]] = {}
        for e in answer.edges:
            parents.setdefault(e["dst"], []).append(e["src"])
        out = {}
        for cell in set(cells):
            roots, seen, todo = set(), {cell}, [cell]
            while todo:
                value = todo.pop()
                above = parents.get(value, [])
                if not above and value != cell:
                    roots.add(value)
                for p in above:
                    if p not in seen:
                        seen.add(p)
                        todo.append(p)
            out[cell] = roots
        return out

    def _causes(self, sources_a: set[int], sources_b: set[int]) -> list[dict[str, Any]]:
        from provplug import ids

        causes: dict[tuple[str, str, str], dict[str, Any]] = {}
        for side, sources, other in (("a", sources_a, sources_b), ("b", sources_b, sources_a)):
            for vid in sorted(sources):
                table_id, col, row = ids.unpack(vid)
                table = self.tables.get(table_id)
                if not ids.is_packed(vid) or table is None or col >= len(table.columns):
                    continue
                cause = self._cause(side, table, table.columns[col], row, other)
                if cause is not None:
                    causes.setdefault((cause["table"], cause["column"], json.dumps(cause["key"], default=str)), cause)
        return list(causes.values())

    def _cause(self, side: str, table: Table, column: str, row: int, other: set[int]) -> dict[str, Any] | None:
        """How the source cell (``table.column``, ``row``) of run ``side`` differs in the other run, or None."""
        counterpart = self._counterpart(table, side)
        if counterpart is None:  # the other run has no table of this name
            value = self._lone_value(table, row, column)
            old, new = (value, None) if side == "a" else (None, value)
            return {
                "table": table.name,
                "column": column,
                "key": {POSITION: row},
                "status": "removed" if side == "a" else "added",
                "old": old,
                "new": new,
            }
        m, ta, tb = counterpart
        theirs = tb if side == "a" else ta
        key = (m.labels_a if side == "a" else m.labels_b).get(row, {})
        match = (m.a_to_b if side == "a" else m.b_to_a).get(row)
        value = m.value(side, row, column)
        entry = {"table": table.name, "column": column, "key": key}
        if match is None:
            old, new = (value, None) if side == "a" else (None, value)
            return {**entry, "status": "removed" if side == "a" else "added", "old": old, "new": new}
        other_value = m.value("b" if side == "a" else "a", match, column)
        old, new = (value, other_value) if side == "a" else (other_value, value)
        if not _equal(old, new):
            return {**entry, "status": "changed", "old": old, "new": new}
        if column not in theirs.columns:
            return None
        if _value_id(theirs, column, match) not in other:
            return {**entry, "status": "left" if side == "a" else "entered", "old": old, "new": new}
        return None

    def _lone_value(self, table: Table, row: int, column: str) -> Any:
        import pyarrow.compute as pc

        rows = self.store.read_rows(table.run_id, table.table_id, pc.field(schema.ROW_COLUMN) == row)
        return None if rows is None or rows.num_rows == 0 else _plain(rows.column(column)[0].as_py())

    def _counterpart(self, table: Table, side: str) -> tuple[Matching, Table, Table] | None:
        """The matching of ``table`` (of run ``side``) with the other run's table of its name."""
        other_run = self.runs[1] if side == "a" else self.runs[0]
        if table.run_id not in self.runs:  # a table of a third run both read: itself on both sides
            return self.matching(table, table), table, table
        other = next((t for t in self.tables.values() if t.run_id == other_run and t.name == table.name), None)
        if other is None:
            return None
        ta, tb = (table, other) if side == "a" else (other, table)
        return self.matching(ta, tb), ta, tb


# -- row matching -------------------------------------------------------------------


def default_key(a: pa.Table, b: pa.Table) -> tuple[str, ...]:
    """The non-numeric columns both runs' rows have (see the module's rule)."""
    import pyarrow as pa

    def keyish(t: pa.DataType) -> bool:
        return bool(
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_boolean(t)
            or pa.types.is_temporal(t)
            or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)
        )

    return tuple(
        f.name
        for f in a.schema
        if f.name != schema.ROW_COLUMN
        and f.name in b.column_names
        and keyish(f.type)
        and keyish(b.schema.field(f.name).type)
    )


def match_rows(a: pa.Table, b: pa.Table, key: Sequence[str]) -> Matching:
    """Match rows of ``a`` and ``b`` by ``key``; equal keys in row-number order."""
    import pandas as pd

    frames = [_keyed_frame(t, key) for t in (a, b)]
    on = [*key, "_occurrence"]
    merged = pd.merge(frames[0], frames[1], how="outer", on=on, suffixes=("_a", "_b"), indicator=True)
    both = merged[merged["_merge"] == "both"]
    pairs = list(zip(both["_row_a"].astype("int64").tolist(), both["_row_b"].astype("int64").tolist(), strict=True))
    only_a = sorted(merged.loc[merged["_merge"] == "left_only", "_row_a"].astype("int64").tolist())
    only_b = sorted(merged.loc[merged["_merge"] == "right_only", "_row_b"].astype("int64").tolist())
    m = Matching(tuple(key), a, b, sorted(pairs), only_a, only_b)
    m.a_to_b = dict(m.pairs)
    m.b_to_a = {y: x for x, y in m.pairs}
    m._index_a = _positions(a)
    m._index_b = _positions(b)
    m.labels_a = _labels(frames[0], key)
    m.labels_b = _labels(frames[1], key)
    return m


def _keyed_frame(table: pa.Table, key: Sequence[str]) -> Any:
    """Key columns (hashable), the row number and the occurrence of the key among equal keys."""
    frame = table.select([*key, schema.ROW_COLUMN]).to_pandas()
    for k in key:
        if frame[k].dtype == object:
            frame[k] = frame[k].map(lambda v: json.dumps(_plain(v), default=str) if isinstance(v, (list, dict)) else v)
    frame = frame.rename(columns={schema.ROW_COLUMN: "_row"}).sort_values("_row", kind="stable")
    if key:
        frame["_occurrence"] = frame.groupby(list(key), dropna=False, sort=False).cumcount()
    else:
        frame["_occurrence"] = range(len(frame))
    return frame


def _labels(frame: Any, key: Sequence[str]) -> dict[int, dict[str, Any]]:
    """How a user names each row: its key values, or its position ``#`` when the key is empty or repeated."""
    rows = frame["_row"].astype("int64").tolist()
    occurrences = frame["_occurrence"].astype("int64").tolist()
    keys = frame[list(key)].to_dict("records") if key else [{} for _ in rows]
    repeated = frame.duplicated(subset=list(key), keep=False).tolist() if key else [True] * len(rows)
    return {
        r: {**{k: _plain(v) for k, v in kv.items()}, **({POSITION: o} if dup else {})}
        for r, kv, o, dup in zip(rows, keys, occurrences, repeated, strict=True)
    }


def _positions(table: pa.Table) -> dict[int, int]:
    return {int(r): i for i, r in enumerate(table.column(schema.ROW_COLUMN).to_pylist())}


def _where_rows(rows: pa.Table, where: str) -> set[int]:
    from provplug.query.where import select_rows

    return set(select_rows(rows, where, schema.ROW_COLUMN))


def _differing(m: Matching, pairs: list[tuple[int, int]], column: str) -> list[tuple[int, int]]:
    """The matched row pairs whose ``column`` values differ (compared column-wise)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pairs:
        return []
    xs = np.array([m._index_a[x] for x, _ in pairs], dtype=np.int64)
    ys = np.array([m._index_b[y] for _, y in pairs], dtype=np.int64)
    left, right = m.a.column(column).take(xs), m.b.column(column).take(ys)
    floats = pa.types.is_floating(left.type) or pa.types.is_floating(right.type)
    numbers = floats and all(pa.types.is_integer(t.type) or pa.types.is_floating(t.type) for t in (left, right))
    if numbers:
        lv = left.cast(pa.float64()).to_numpy(zero_copy_only=False)
        rv = right.cast(pa.float64()).to_numpy(zero_copy_only=False)
        same = np.isclose(lv, rv, rtol=FLOAT_TOLERANCE, atol=0.0, equal_nan=True)
        same &= pc.is_null(left).to_numpy(zero_copy_only=False) == pc.is_null(right).to_numpy(zero_copy_only=False)
    else:
        same = (
            np.array([_equal(_plain(u), _plain(v)) for u, v in zip(left.to_pylist(), right.to_pylist(), strict=True)])
            if left.type != right.type or pa.types.is_nested(left.type)
            else _equal_arrow(left, right)
        )
    return [p for p, s in zip(pairs, same.tolist(), strict=True) if not s]


def _equal_arrow(left: Any, right: Any) -> Any:
    import pyarrow.compute as pc

    equal = pc.fill_null(pc.equal(left, right), False)
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    return pc.or_(equal, both_null).to_numpy(zero_copy_only=False)


def _equal(u: Any, v: Any) -> bool:
    numbers = isinstance(u, (int, float)) and isinstance(v, (int, float))
    if numbers and (isinstance(u, float) or isinstance(v, float)):
        if math.isnan(float(u)) and math.isnan(float(v)):
            return True
        return math.isclose(float(u), float(v), rel_tol=FLOAT_TOLERANCE, abs_tol=0.0)
    return bool(u == v)


def _plain(value: Any) -> Any:
    from provplug.query.catalog import jsonable

    return jsonable(value)


def _row(m: Matching, side: str, row: int) -> dict[str, Any]:
    table = m.a if side == "a" else m.b
    return {c: m.value(side, row, c) for c in table.column_names if c != schema.ROW_COLUMN}


def _value_id(table: Table, column: str, row: int) -> int:
    from provplug import ids

    return ids.value_id(table.table_id, table.columns.index(column), row)


# -- text ---------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    """The differences as lines a user reads."""
    lines = [_runs_heading(result)]
    differing = 0
    for entry in result["tables"]:
        counts = (len(entry["changed"]), len(entry["added"]), len(entry["removed"]))
        if not any(counts):
            continue
        differing += 1
        matched_by = ", ".join(entry["key"]) or "row position"
        lines.append(
            f"{entry['table']} ({entry['origin']}; rows matched by {matched_by}): "
            f"{counts[0]} changed cells, {counts[1]} added rows, {counts[2]} removed rows"
        )
        for cell in entry["changed"]:
            lines.append(
                f"  {entry['table']}.{cell['column']} {_key_text(cell['key'])}: "
                f"{_text(cell['old'])} → {_text(cell['new'])}"
            )
            for cause in cell["because"]:
                lines.append(f"    because {_cause_text(cause)}")
        lines.extend(f"  + {entry['table']} {_key_text(r['key'])}: {_row_text(r['row'])}" for r in entry["added"])
        lines.extend(f"  - {entry['table']} {_key_text(r['key'])}: {_row_text(r['row'])}" for r in entry["removed"])
    for side in ("only_in_a", "only_in_b"):
        if result[side]:
            lines.append(f"tables only in run {result['run_' + side[-1]]}: {', '.join(result[side])}")
    if result["explained"] is not True:
        lines.append(str(result["explained"]))
    if not differing:
        lines.append(f"no differences in {len(result['tables'])} tables both runs wrote")
    return "\n".join(lines)


def _runs_heading(result: dict[str, Any]) -> str:
    """``run 3 (label a) → run 4 (…): the two latest runs that wrote AvgAge`` (ids when numbers are unknown)."""
    runs = result.get("runs")
    if not runs:
        return f"runs {result['run_a']} → {result['run_b']}"

    def name(run: dict[str, Any]) -> str:
        return f"run {run['number']}" + (f" (label {run['label']})" if run.get("label") else "") + f" [{run['id']}]"

    how = ": the two latest runs that wrote the table" if runs.get("chosen") == "latest two" else ""
    return f"{name(runs['a'])} → {name(runs['b'])}{how}"


def _cause_text(cause: dict[str, Any]) -> str:
    name = f"{cause['table']}.{cause['column']} {_key_text(cause['key'])}"
    status = cause["status"]
    if status == "changed":
        return f"{name}: {_text(cause['old'])} → {_text(cause['new'])}"
    if status in ("added", "removed"):
        return f"{name}: row {status} ({_text(cause['new'] if status == 'added' else cause['old'])})"
    return f"{name} = {_text(cause['new'])}: {'entered' if status == 'entered' else 'left'} the lineage"


def _key_text(key: dict[str, Any]) -> str:
    return "[" + ", ".join(f"row {v}" if k == POSITION else f"{k}={v}" for k, v in key.items()) + "]"


def _row_text(row: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_text(v)}" for k, v in row.items())


def _text(value: Any) -> str:
    return "null" if value is None else str(value)
