"""Deletion propagation (Lipstick Def. 4.2 lifted to rows; docs/queries.md "What-if").

Tables are visited in the topological order of the ops that wrote them.
For each op reached by an affected input row, its row lineage names the
output rows those rows reach (a filtered read, never a table scan); their
members decide existence (:mod:`.members`) and their column rules the new
cell values:

* ``copy``: the new value of the copied input cell (null once its row is
  padded away); a union's copy per table reads the member's own table;
* ``aggregate``: recomputed over the members left, from stored values and
  the new values upstream (:mod:`.values`);
* ``computed``: "changed, value unknown" when a referenced cell changed or a
  member went; ``literal``: unchanged.

An op whose existence is ``always_one_row`` (a global aggregate) keeps
its row when no member is left: counts 0, the other aggregates null.

What cannot be told is said, never guessed: a changed cell in a column that
decides existence (filter, join or group key), an op whose existence is
``opaque`` or a touched ``opaque_inputs`` table makes the rows reached
"unknown" (and the table "rows may appear"); an op that recorded no row
lineage, or an input whose rows may appear, makes every row of its output
unknown; and unknown spreads downstream like any change.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from provplug import ids, schema
from provplug.errors import LineageQueryError
from provplug.model import coarse_reason
from provplug.plugin.protocols import Store
from provplug.query.catalog import Catalog
from provplug.rowrules import ColumnRule, OpRowRules
from provplug.whatif.lineage import RowLineage
from provplug.whatif.members import ALIVE, CHANGED, DEAD, MAYBE, PADDED, Cause, Members, TableState, distinct, member_of
from provplug.whatif.values import UNKNOWN, StoredRows, aggregate, same


@dataclasses.dataclass(frozen=True)
class Op:
    op_id: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    coarse: str | None = None  # a coarse step: why (its rows are not traced)


@dataclasses.dataclass
class Propagation:
    """The states of every table a deletion reached, in propagation order;
    ``old`` the stored rows of the rows listed (table -> row -> values)."""

    states: dict[int, TableState]
    old: dict[int, dict[int, dict[str, Any]]]
    ops: dict[int, Op]
    stats: dict[str, Any]
    columns: dict[int, tuple[str, ...]]  # the column names of the tables in ``states``
    catalog: Catalog


def ordered_ops(store: Store[Any]) -> list[Op]:
    """The store's ops, each after the ops that wrote its inputs."""
    rows = store.ops().select(["op_id", "name", "inputs", "outputs", "kind", "params"]).to_pylist()
    ops = [Op(int(r["op_id"]), r["name"], tuple(r["inputs"]), tuple(r["outputs"]), _coarse_reason(r)) for r in rows]
    writer = {t: op.op_id for op in ops for t in op.outputs}
    done: set[int] = set()
    order: list[Op] = []
    pending = sorted(ops, key=lambda o: o.op_id)
    while pending:
        ready = [o for o in pending if all(writer.get(t) in done or writer.get(t) in (None, o.op_id) for t in o.inputs)]
        if not ready:  # a cycle cannot be captured; keep id order rather than loop
            ready = pending[:1]
        for o in ready:
            done.add(o.op_id)
            order.append(o)
        pending = [o for o in pending if o.op_id not in done]
    return order


def _coarse_reason(op: Mapping[str, Any]) -> str | None:
    return coarse_reason(op) if op["kind"] == "coarse" else None


class Engine:
    """Propagates deletions through one store's row lineage (read-only)."""

    def __init__(self, store: Store[Any], catalog: Catalog) -> None:
        from provplug.ingest import rowlineage

        self.store = store
        self.catalog = catalog
        self.rules = rowlineage.rules_of(store)
        self.lineage = RowLineage(store)
        self.values = StoredRows(store, catalog.tables)

    def name(self, table_id: int) -> str:
        entry = self.catalog.tables.get(table_id)
        return entry.name if entry else str(table_id)

    def propagate(self, deleted: Mapping[int, np.ndarray]) -> Propagation:
        """What deleting ``deleted`` (table id -> row numbers) does downstream."""
        started = time.perf_counter()
        states = {t: TableState(t, dead=dict.fromkeys(np.unique(rows).tolist())) for t, rows in deleted.items()}
        old: dict[int, dict[int, dict[str, Any]]] = {}
        ops = ordered_ops(self.store)
        for op in ops:
            for out in op.outputs:
                inputs = {t: states[t] for t in op.inputs if t in states and states[t].touched()}
                if not inputs:
                    continue
                state, shown = self._step(op, out, inputs)
                if out in states:  # deleted itself: the deletion stands
                    state = _merged(states[out], state)
                states[out] = state
                old[out] = {**shown, **old.get(out, {})}
        for t, rows in deleted.items():  # after the ops: a table they read whole is read once
            old[t] = {**self._deleted_rows(t, rows), **old.get(t, {})}
        stats = {
            "seconds": round(time.perf_counter() - started, 6),
            "lineage_records_read": self.lineage.records_read,
            "lineage_scans": self.lineage.scans,
            "stored_rows_read": self.values.rows_read,
        }
        columns = {t: self.catalog.tables[t].columns for t in states if t in self.catalog.tables}
        return Propagation(states, old, {o.op_id: o for o in ops}, stats, columns, self.catalog)

    def _deleted_rows(self, table: int, rows: np.ndarray) -> dict[int, dict[str, Any]]:
        """The stored values of the rows to delete; each must exist."""
        found = self.values.as_dicts(table, rows)
        entry = self.catalog.tables.get(table)
        if entry is not None and entry.stored_rows:
            missing = sorted(set(rows.tolist()) - set(found))
            if missing:
                raise LineageQueryError(
                    f"{entry.name} has no row {missing[0]} (value id "
                    f"{ids.value_id(table, 0, missing[0])} names no cell of this store)"
                )
        return found

    # -- one op ------------------------------------------------------------------
    def _step(self, op: Op, out: int, inputs: dict[int, TableState]) -> tuple[TableState, dict[int, dict[str, Any]]]:
        rules = self.rules.get(out)
        unknown = self._all_unknown(op, rules, inputs)
        if unknown:
            return TableState(out, whole=unknown, op=op.op_id), {}
        assert rules is not None
        if rules.existence == "opaque":
            return self._opaque(op, rules, inputs)
        return _OpStep(self, op, rules, inputs).run()

    def _all_unknown(self, op: Op, rules: OpRowRules | None, inputs: dict[int, TableState]) -> str | None:
        """Why every row of the op's output is unknown, if it is."""
        if op.coarse is not None:
            return f"{op.name} is a coarse step, its rows are not traced ({op.coarse})"
        if rules is None:
            return f"op {op.name} recorded no row lineage"
        for t, state in inputs.items():
            if state.whole:
                return f"every row of its input {self.name(t)} is unknown"
            if state.may_appear:
                return f"rows of its input {self.name(t)} may appear"
        for t in rules.opaque_inputs:
            if t in inputs and not self.lineage.reads_input(rules, t):
                return f"{rules.reason or op.name} needs {self.name(t)}, whose rows its row lineage does not name"
        return None

    def _opaque(
        self, op: Op, rules: OpRowRules, inputs: dict[int, TableState]
    ) -> tuple[TableState, dict[int, dict[str, Any]]]:
        reason = f"{op.name}: {rules.reason or 'existence not derivable from deletions'}"
        records = self.lineage.touching(rules, {t: s.touched_rows() for t, s in inputs.items()})
        state = TableState(rules.out_table, may_appear=reason, op=op.op_id)
        causes = zip(
            records.column("out_row").to_pylist(),
            records.column("in_table").to_pylist(),
            records.column("in_row").to_pylist(),
            strict=True,
        )
        for row, t, r in causes:
            state.maybe.setdefault(int(row), (reason, (int(t), int(r))))
        rows = np.fromiter(state.maybe, dtype=np.int64)
        return state, self.values.as_dicts(rules.out_table, rows)


def _merged(deleted: TableState, computed: TableState) -> TableState:
    for row in deleted.dead:
        computed.maybe.pop(row, None)
        computed.changed.pop(row, None)
    computed.dead.update(deleted.dead)
    computed._arrays = None
    return computed


class _OpStep:
    """One exact op: its affected output rows, their existence and cells."""

    def __init__(self, engine: Engine, op: Op, rules: OpRowRules, inputs: dict[int, TableState]) -> None:
        self.engine = engine
        self.op = op
        self.rules = rules
        self.inputs = inputs
        self.states = inputs
        self.state = TableState(rules.out_table, op=op.op_id)

    def run(self) -> tuple[TableState, dict[int, dict[str, Any]]]:
        lineage = self.engine.lineage
        self._deciding_changes()
        if self.state.may_appear and self.rules.existence == "always_one_row":
            # Rows outside the members may join them: its one row's cells cannot be told.
            self.state.whole, self.state.may_appear = self.state.may_appear, None
            return self.state, {}
        touched = lineage.touching(self.rules, {t: s.touched_rows() for t, s in self.inputs.items()})
        out_rows = distinct(touched.column("out_row").to_numpy())
        if not len(out_rows):
            return self.state, {}
        members = Members.of(lineage.of_rows(self.rules, out_rows), self.inputs)
        anchors = members.anchors()
        if anchors:  # padding depends on the anchors' other output rows
            more = distinct(lineage.touching(self.rules, anchors).column("out_row").to_numpy())
            if len(np.setdiff1d(more, out_rows)):
                out_rows = np.union1d(out_rows, more)
                members = Members.of(lineage.of_rows(self.rules, out_rows), self.inputs)
        members.resolve_padding()
        old = self.engine.values.as_dicts(self.rules.out_table, out_rows)
        self._existence(members)
        self._cells(members, old)
        shown = {r: old[r] for r in [*self.state.dead, *self.state.maybe, *self.state.changed] if r in old}
        return self.state, shown

    def _deciding_changes(self) -> None:
        """A changed cell that decides rows (a key, a predicate) may make rows
        appear that are not there now."""
        for t, state in self.inputs.items():
            deciding = set(self.rules.deciding.get(t, ()))
            hit = next((c for cells in state.changed.values() for c in cells if c in deciding), None)
            if hit:
                self.state.may_appear = f"{self.engine.name(t)}.{hit} decides the rows of {self.op.name} and changes"

    # -- existence -------------------------------------------------------------
    def _existence(self, m: Members) -> None:
        member_row = m.out_row[m.starts]  # sorted
        live = (m.member_status == ALIVE) | (m.member_status == PADDED)
        first = (
            np.flatnonzero(np.concatenate([[True], member_row[1:] != member_row[:-1]]))
            if len(member_row)
            else np.zeros(0, dtype=np.int64)
        )
        rows = member_row[first]
        n_live = np.add.reduceat(live.astype(np.int64), first)
        n_maybe = np.add.reduceat((m.member_status == MAYBE).astype(np.int64), first)
        n_members = np.diff(np.append(first, len(member_row)))
        self.summary = {
            int(r): (int(a), int(b), int(c))
            for r, a, b, c in zip(rows.tolist(), n_live.tolist(), n_maybe.tolist(), n_members.tolist(), strict=True)
        }
        cause = self._causes(m)
        doubts = self._doubts(m, live)
        one_row = self.rules.existence == "always_one_row"  # no member left: the row stays, aggregates over none
        for r, (alive, maybe, _) in self.summary.items():
            if one_row and r not in doubts:
                continue
            if alive == 0 and maybe == 0:
                self.state.dead[r] = cause.get(r)
            elif alive == 0:
                self.state.maybe[r] = ("a member of it may be gone", cause.get(r))
            elif r in doubts:
                self.state.maybe[r] = doubts[r]

    def _causes(self, m: Members) -> dict[int, Cause]:
        """Per output row, the first affected input row it reads (a dead one first)."""
        out: dict[int, Cause] = {}
        for wanted in (DEAD, MAYBE, CHANGED):
            for i in np.flatnonzero(m.status == wanted).tolist():
                out.setdefault(int(m.out_row[i]), (int(m.in_table[i]), int(m.in_row[i])))
        return out

    def _doubts(self, m: Members, live: np.ndarray) -> dict[int, tuple[str, Cause]]:
        """Rows alive whose existence still cannot be told: a deciding cell
        of a live member changed, or a row of an opaque input is affected."""
        doubts: dict[int, tuple[str, Cause]] = {}
        record_live = live[m.group]
        for i in np.flatnonzero(m.status != ALIVE).tolist():
            t, r, row = int(m.in_table[i]), int(m.in_row[i]), int(m.out_row[i])
            if t in self.rules.opaque_inputs:
                doubts.setdefault(row, (f"{self.rules.reason or self.op.name} reads {self.engine.name(t)}", (t, r)))
            elif m.status[i] == CHANGED and record_live[i]:
                hit = set(self.rules.deciding.get(t, ())) & set(self.inputs[t].changed.get(r, {}))
                if hit:
                    doubts.setdefault(row, (f"{self.engine.name(t)}.{min(hit)} decides it and changes", (t, r)))
        return doubts

    # -- cells -----------------------------------------------------------------
    def _cells(self, m: Members, old: dict[int, dict[str, Any]]) -> None:
        alive = [r for r in self.summary if r not in self.state.dead and r not in self.state.maybe]
        if not alive:
            return
        notes = self._notes(m)
        new: dict[int, dict[str, Any]] = {r: {} for r in alive}
        self.pending: list[tuple[str, ColumnRule, np.ndarray]] = []
        for column, rule in self.rules.columns.items():
            for r, value in self._column(column, rule, alive, notes, m).items():
                new[r][column] = value
        for column, values in self._recompute(m).items():
            for r, value in values.items():
                new[r][column] = value
        for column in self._unruled(old, alive):  # no rule recorded: only an untouched row keeps it
            for r in alive:
                if notes.get(r) or self.summary[r][0] != self.summary[r][2]:
                    new[r][column] = UNKNOWN
        cause = self._causes(m)
        for r in alive:
            row = old.get(r)
            changes = {c: v for c, v in new[r].items() if row is None or not same(v, row.get(c))}
            if changes:
                self.state.changed[r] = changes
                self.state.changed_cause[r] = cause.get(r)

    def _unruled(self, old: dict[int, dict[str, Any]], rows: list[int]) -> list[str]:
        entry = self.engine.catalog.tables.get(self.rules.out_table)
        columns = entry.columns if entry else next((tuple(old[r]) for r in rows if r in old), ())
        return [c for c in columns if c not in self.rules.columns]

    def _notes(self, m: Members) -> dict[int, list[tuple[int, int, int, int]]]:
        """Per output row, the affected records of its live members:
        (member, input table, input row, status) — DEAD here means padded."""
        live = (m.member_status == ALIVE) | (m.member_status == PADDED)
        notes: dict[int, list[tuple[int, int, int, int]]] = {}
        for i in np.flatnonzero((m.status != ALIVE) & live[m.group]).tolist():
            notes.setdefault(int(m.out_row[i]), []).append(
                (int(m.group[i]), int(m.in_table[i]), int(m.in_row[i]), int(m.status[i]))
            )
        return notes

    def _column(
        self,
        column: str,
        rule: ColumnRule,
        rows: list[int],
        notes: dict[int, list[tuple[int, int, int, int]]],
        m: Members,
    ) -> dict[int, Any]:
        """New values of ``column`` in ``rows`` where they may differ."""
        if rule.kind == "literal":
            return {}
        if rule.kind == "copy":
            return {r: v for r in rows if (v := self._copied(rule, notes.get(r, []), self.summary[r][0])) is not _SAME}
        if rule.kind == "computed":
            refs = set(rule.references)
            return {
                r: UNKNOWN
                for r in rows
                if self.summary[r][0] != self.summary[r][2]
                or any(self._touches(note, refs) for note in notes.get(r, []))
            }
        return self._aggregated(column, rule, rows, notes, m)

    def _touches(self, note: tuple[int, int, int, int], refs: set[tuple[int, str]]) -> bool:
        _, t, r, status = note
        columns = {c for rt, c in refs if rt == t}
        if not columns:
            return False
        return status == DEAD or bool(columns & set(self.inputs[t].changed.get(r, {})))

    def _copied(self, rule: ColumnRule, notes: list[tuple[int, int, int, int]], live: int) -> Any:
        """A copied cell changes when every live member's copied cell changes
        (they agree, as group keys do): to the new value, or null when padded.
        A union's copy reads each member's own table (:attr:`ColumnRule.copies`)."""
        copies = rule.copies
        values: dict[int, Any] = {}
        for member, t, r, status in notes:
            column = copies.get(t)
            if column is None:
                continue
            if status == DEAD:
                values[member] = None
            elif status == CHANGED and column in self.inputs[t].changed.get(r, {}):
                values[member] = self.inputs[t].changed[r][column]
        if not values or len(values) < live:
            return _SAME
        first = next(iter(values.values()))
        return first if all(same(v, first) for v in values.values()) else UNKNOWN

    def _aggregated(
        self,
        column: str,
        rule: ColumnRule,
        rows: list[int],
        notes: dict[int, list[tuple[int, int, int, int]]],
        m: Members,
    ) -> dict[int, Any]:
        """Aggregates of the rows whose members or member values changed:
        unknown, a count of members, or queued for :meth:`_recompute`."""
        out: dict[int, Any] = {}
        redo = []
        for r in rows:
            alive, maybe, total = self.summary[r]
            hit = [
                n
                for n in notes.get(r, [])
                if n[1] == rule.table and (n[3] == DEAD or str(rule.column) in self.inputs[n[1]].changed.get(n[2], {}))
            ]
            if alive == total and not hit:
                continue
            if maybe or any(
                n[3] == CHANGED and self.inputs[n[1]].changed[n[2]][str(rule.column)] is UNKNOWN for n in hit
            ):
                out[r] = UNKNOWN
            elif rule.function == "count_star":
                out[r] = alive
            else:
                redo.append(r)
        if redo:
            self.pending.append((column, rule, np.array(redo, dtype=np.int64)))
        return out

    def _recompute(self, m: Members) -> dict[str, dict[int, Any]]:
        """The queued aggregates, over the live members' values: one read of
        the stored rows per input table for all of them."""
        out: dict[str, dict[int, Any]] = {}
        live = (m.member_status == ALIVE) | (m.member_status == PADDED)
        by_table: dict[int, list[tuple[str, ColumnRule, np.ndarray]]] = {}
        for job in self.pending:
            by_table.setdefault(int(job[1].table), []).append(job)  # type: ignore[arg-type]
        for table, jobs in by_table.items():
            rows = distinct(np.concatenate([j[2] for j in jobs]))
            at = np.flatnonzero(live[m.group] & (m.in_table == table) & member_of(m.out_row, rows))
            groups = m.group[at]
            duplicated = len(groups) > 1 and bool((groups[1:] == groups[:-1]).any())  # sorted by member
            columns = sorted({str(j[1].column) for j in jobs})
            stored = None if duplicated else self.engine.values.read(table, m.in_row[at], columns)
            for column, rule, job_rows in jobs:
                if not len(at):  # no member left (a global aggregate's one row): over no value
                    out[column] = self._over_nothing(rule, job_rows)
                    continue
                if stored is None or rule.column not in stored.column_names:  # a self join, or no stored rows
                    out[column] = dict.fromkeys(job_rows.tolist(), UNKNOWN)
                    continue
                mine = at if len(job_rows) == len(rows) else at[member_of(m.out_row[at], np.sort(job_rows))]
                out[column] = self._aggregate(column, rule, job_rows, mine, stored, m)
        return out

    @staticmethod
    def _over_nothing(rule: ColumnRule, rows: np.ndarray) -> dict[int, Any]:
        """Spark's aggregates over no value: counts 0, the others null."""
        return dict.fromkeys(rows.tolist(), 0 if rule.function in ("count", "count_distinct") else None)

    def _aggregate(
        self, column: str, rule: ColumnRule, rows: np.ndarray, at: np.ndarray, stored: pa.Table, m: Members
    ) -> dict[int, Any]:
        assert rule.column is not None and rule.function is not None
        in_rows = m.in_row[at]
        numbers = stored.column(schema.ROW_COLUMN).to_numpy()
        order = np.argsort(numbers)
        values = stored.column(rule.column).take(pa.array(order[np.searchsorted(numbers, in_rows, sorter=order)]))
        values = self._patched(values, rule, in_rows, m.status[at])
        table = pa.table({"out_row": pa.array(m.out_row[at], pa.int64()), "value": values})
        out_type = self.engine.values.column_type(self.rules.out_table, column)
        result = aggregate(rule.function, table, out_type)
        empty = None if rule.function not in ("count", "count_distinct") else 0
        return {r: result.get(r, empty) for r in rows.tolist()}

    def _patched(
        self, values: pa.Array | pa.ChunkedArray, rule: ColumnRule, in_rows: np.ndarray, status: np.ndarray
    ) -> pa.Array:
        """Stored member values with the new values upstream, null where padded."""
        values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        patch = np.flatnonzero(status != ALIVE)
        if not len(patch):
            return values
        assert rule.table is not None and rule.column is not None
        changed = self.inputs[rule.table].changed
        items = values.to_pylist()
        for i in patch.tolist():
            r = int(in_rows[i])
            items[i] = (
                None if status[i] == DEAD else changed[r].get(rule.column, items[i]) if r in changed else items[i]
            )
        return pa.array(items, type=values.type)


class _Same:
    """Marker: the cell keeps its value."""


_SAME = _Same()
