"""The answer to a lineage query: JSON that stores each row once, a text tree
that stays readable when large, and the views ``--depth``, ``--sources-only``
and ``--summary`` of ``provplug lineage``."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any

from provplug import ids
from provplug.query.coarse import crossing_lines

MAX_TREE_LINES = 400
# Rows shown per (op, table) group of a tree level; the rest are counted.
MAX_SIBLINGS = 10
# Lines a queried row's tree gets at least, however many rows were queried.
MIN_QUERY_LINES = 12
# Source rows listed by the text summary (the JSON summary lists them all).
MAX_SUMMARY_ROWS = 20
JSON_FORMAT = "provplug-lineage"
JSON_VERSION = 2
SEE_MORE = "see more with --depth N, --summary, --sources-only or --format json|html"

Record = dict[str, Any]


@dataclass
class LineageAnswer:
    """See :mod:`provplug.query` for the meaning of each field. A record's
    ``row`` is the whole stored row (a dict shared by the cells of one row)."""

    query: list[Record]
    method: str
    direction: str
    lineage: list[Record]
    edges: list[dict[str, Any]]
    stats: dict[str, Any]
    # A zoomed-out answer (provplug.query.zoom): the fine-grained answer it
    # was made from, which zooming in restores, and the modules zoomed out.
    fine: LineageAnswer | None = field(default=None, repr=False, compare=False)
    zoomed: tuple[str, ...] = field(default=(), compare=False)
    # The coarse steps the answer crosses (provplug.query.coarse): where the
    # cell-level answer ends and goes on from whole columns.
    coarse: list[dict[str, Any]] = field(default_factory=list)
    # Where the answer goes from a table of one run to a table of another
    # (a run read what an earlier run wrote), and the versions it reaches
    # whose writing run was deleted since (provplug.query.lineage._mark_runs).
    run_boundaries: list[dict[str, Any]] = field(default_factory=list)
    missing_versions: list[dict[str, Any]] = field(default_factory=list)

    # -- JSON ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The answer as valid JSON data (NaN and infinities become null):
        each stored row once in ``rows``, cells referring to it by key."""
        rows: dict[str, Any] = {}
        return {
            "format": JSON_FORMAT,
            "version": JSON_VERSION,
            "method": self.method,
            "direction": self.direction,
            "run": self.stats.get("run"),  # the run answered from (provplug.store.runs.run_used)
            "stats": {k: v for k, v in self.stats.items() if k != "run"},
            "query": [_cell(r, rows) for r in self.query],
            "lineage": [_cell(r, rows) for r in self.lineage],
            "edges": self.edges,
            "rows": rows,
            **({"coarse": self.coarse} if self.coarse else {}),
            "run_boundaries": self.run_boundaries,
            **({"missing_versions": self.missing_versions} if self.missing_versions else {}),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text with one row, cell or triple per line
        (greppable, and no indentation bytes repeated per cell)."""
        return dumps_by_line(self.to_dict(), ("query", "lineage", "edges", "rows", "coarse"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LineageAnswer:
        """The answer back from :meth:`to_dict`'s JSON (rows shared again)."""
        if data.get("format") != JSON_FORMAT or data.get("version") != JSON_VERSION:
            raise ValueError(f"not a {JSON_FORMAT} answer of version {JSON_VERSION}")
        rows = data["rows"]

        def record(cell: dict[str, Any]) -> Record:
            return {**cell, "row": rows[cell["row"]] if cell["row"] is not None else None}

        return cls(
            query=[record(c) for c in data["query"]],
            method=data["method"],
            direction=data["direction"],
            lineage=[record(c) for c in data["lineage"]],
            edges=[dict(e) for e in data["edges"]],
            stats={**data["stats"], **({"run": data["run"]} if data.get("run") else {})},
            coarse=[dict(c) for c in data.get("coarse", ())],
            run_boundaries=[dict(b) for b in data.get("run_boundaries", ())],
            missing_versions=[dict(m) for m in data.get("missing_versions", ())],
        )

    @property
    def value_ids(self) -> set[int]:
        """Ids of the lineage values (query values excluded)."""
        return {r["value_id"] for r in self.lineage}

    # -- views -----------------------------------------------------------------
    def within_depth(self, depth: int) -> LineageAnswer:
        """Only the lineage within ``depth`` triples of the queried values,
        and the triples among what is kept."""
        if depth < 0:
            raise ValueError(f"depth must be >= 0, not {depth}")
        hops = self.hops()
        kept = {v for v, h in hops.items() if h <= depth}
        return self._restricted(kept, {"depth": depth})

    def sources_only(self) -> LineageAnswer:
        """Only the lineage's ends: values with no further triple in the
        answer's direction (for ancestors, the source cells), no triples."""
        ends = self.ends()
        return replace(
            self,
            lineage=[r for r in self.lineage if r["value_id"] in ends],
            edges=[],
            stats={**self.stats, "view": "sources-only"},
        )

    def summary(self) -> dict[str, Any]:
        """Counts per table, column and op, and the source rows once each."""
        return _summary(self)

    def hops(self) -> dict[int, int]:
        """Fewest triples from a queried value to each value of the answer."""
        following = self._following()
        hops = {q["value_id"]: 0 for q in self.query}
        frontier = list(hops)
        level = 0
        while frontier:
            level += 1
            found = []
            for value in frontier:
                for _, other in following.get(value, ()):
                    if other not in hops:
                        hops[other] = level
                        found.append(other)
            frontier = found
        return hops

    def ends(self) -> set[int]:
        """Lineage values the answer's triples lead no further from (a
        subgraph's: its source ancestors and its final descendants)."""
        if self.direction == "both":
            up, down, _ = self.subgraph_parts()
            return up.ends() | down.ends()
        # A value leads further when a triple leaves it in the answer's
        # direction: for ancestors (up) when it is a triple's dst (its src is
        # the next ancestor), for descendants (down) when it is a src. A set
        # of one side, not the whole _following() map: a summary's cost.
        side = {"up": "dst", "down": "src"}.get(self.direction)
        if side is None:  # not a direction of its own: either way along a triple
            following = self._following()
            return {r["value_id"] for r in self.lineage if not following.get(r["value_id"])}
        leading = set(map(itemgetter(side), self.edges))
        return {v for v in map(itemgetter("value_id"), self.lineage) if v not in leading}

    def _following(self) -> dict[int, list[tuple[str, int]]]:
        """Per value, ``(op, next value)`` in the answer's direction (a
        subgraph's, ``both``: either way along a triple)."""
        ways = {"up": ((1, 0),), "down": ((0, 1),)}.get(self.direction, ((1, 0), (0, 1)))
        following: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for e in self.edges:
            ends = (e["src"], e["dst"])
            for frm, to in ways:
                following[ends[frm]].append((e["op"], ends[to]))
        return following

    def subgraph_parts(self) -> tuple[LineageAnswer, LineageAnswer, list[Record]]:
        """A subgraph answer (:mod:`provplug.query.subgraph`) split for
        reading: its ancestors (an ``up`` answer), its descendants (a
        ``down`` answer) and the other parents of the descendants."""
        by_role: dict[str, list[Record]] = {"ancestor": [], "descendant": [], "other parent": []}
        for r in self.lineage:
            by_role[r.get("role", "ancestor")].append(r)
        queried = {q["value_id"] for q in self.query}
        ancestors = queried | {r["value_id"] for r in by_role["ancestor"]}
        descendants = queried | {r["value_id"] for r in by_role["descendant"]}

        def part(direction: str, role: str, cells: set[int]) -> LineageAnswer:
            edges = [e for e in self.edges if e["src"] in cells and e["dst"] in cells]
            return LineageAnswer(self.query, self.method, direction, by_role[role], edges, self.stats)

        return part("up", "ancestor", ancestors), part("down", "descendant", descendants), by_role["other parent"]

    def _restricted(self, kept: set[int], view: dict[str, Any]) -> LineageAnswer:
        keep = kept | {q["value_id"] for q in self.query}
        return replace(
            self,
            lineage=[r for r in self.lineage if r["value_id"] in keep],
            edges=[e for e in self.edges if e["src"] in keep and e["dst"] in keep],
            stats={**self.stats, **view},
        )

    # -- text ------------------------------------------------------------------
    def render(self, max_lines: int = MAX_TREE_LINES, max_siblings: int = MAX_SIBLINGS) -> str:
        """The answer as a tree, headed by the line naming its run (when known)."""
        return _run_heading(self.stats) + self._body(max_lines, max_siblings) + self._coarse_text()

    def _coarse_text(self) -> str:
        """The coarse steps the answer crosses, a line each (nothing when none)."""
        lines = [*crossing_lines(self.coarse, self.direction), *_run_lines(self)]
        return "".join("\n" + line for line in lines)

    def _body(self, max_lines: int, max_siblings: int) -> str:
        if self.direction == "both":
            return _subgraph_text(self, max_lines, max_siblings)
        return _TreeRenderer(self, max_lines, max_siblings).render()

    def render_summary(self, max_rows: int = MAX_SUMMARY_ROWS) -> str:
        return _run_heading(self.stats) + _summary_text(self.summary(), max_rows) + self._coarse_text()

    def summary_json(self) -> str:
        """:meth:`summary` as JSON, one table, op or source row per line."""
        return dumps_by_line(self.summary(), ("tables", "ops", "source_rows"))


def finite(value: Any) -> Any:
    """``value`` with every NaN, inf and -inf float replaced by None: JSON has
    no such numbers (``json.dumps`` would write the invalid ``NaN``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def row_key(record: Record) -> str | None:
    """``"TABLE_ID:ROW"`` of a cell whose row is stored (only captured, packed
    ids have stored rows), else None."""
    if record.get("row") is None or not ids.is_packed(record["value_id"]):
        return None
    table_id, _, row = ids.unpack(record["value_id"])
    return f"{table_id}:{row}"


def _cell(record: Record, rows: dict[str, Any]) -> Record:
    key = row_key(record)
    if key is not None and key not in rows:
        rows[key] = finite(record["row"])
    return {**finite({k: v for k, v in record.items() if k != "row"}), "row": key}


def dumps_by_line(data: dict[str, Any], listed: Iterable[str]) -> str:
    """``data`` as one JSON object whose ``listed`` members (lists or dicts)
    have one item per line; everything else compact."""
    listed = set(listed)
    parts = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in data.items() if k not in listed]
    for key in (k for k in data if k in listed):
        value = data[key]
        if isinstance(value, dict):
            items = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()]
            parts.append(f"{json.dumps(key)}: {{" + "".join(f"\n  {i}," for i in items).rstrip(",") + "\n}")
        else:
            parts.append(f"{json.dumps(key)}: [" + "".join(f"\n  {json.dumps(v)}," for v in value).rstrip(",") + "\n]")
    return "{" + ",\n".join(parts) + "}"


# -- summary -------------------------------------------------------------------
def _summary(answer: LineageAnswer) -> dict[str, Any]:
    # One pass of C-level counting per figure (Counter, set, map): a ~100,000
    # cell answer is summarised in tens of milliseconds (the explorer opens a
    # large answer on its summary).
    lineage = answer.lineage
    names = list(map(itemgetter("table"), lineage))
    keys = [row_key(r) for r in lineage]
    tables: dict[str, dict[str, Any]] = {}
    for (table, column), n in Counter(zip(names, map(itemgetter("column"), lineage), strict=True)).items():
        entry = tables.setdefault(table, {"table": table, "cells": 0, "rows": 0, "columns": {}})
        entry["cells"] += n
        shown = column if column is not None else "(no column)"
        entry["columns"][shown] = entry["columns"].get(shown, 0) + n
    for table, key in set(zip(names, keys, strict=True)):
        if key is not None:
            tables[table]["rows"] += 1
    ops = Counter(map(itemgetter("op"), answer.edges))
    ends = answer.ends()
    source_rows: dict[str, dict[str, Any]] = {}
    unstored: dict[str, int] = defaultdict(int)
    for r, key in zip(lineage, keys, strict=True):
        if r["value_id"] not in ends:
            continue
        if key is None:
            unstored[r["table"]] += 1
        elif key not in source_rows:
            source_rows[key] = {"table": r["table"], "row": finite(r["row"])}
    return {
        "format": "provplug-lineage-summary",
        "version": JSON_VERSION,
        "direction": answer.direction,
        "run": answer.stats.get("run"),
        "query": [{k: finite(q[k]) for k in ("value_id", "table", "column", "value")} for q in answer.query],
        "cells": len(answer.lineage),
        "triples": len(answer.edges),
        "tables": sorted(tables.values(), key=lambda t: t["table"]),
        "ops": [{"op": op, "triples": n} for op, n in sorted(ops.items())],
        "source_cells": len(ends),
        "source_rows": list(source_rows.values()),
        "source_cells_without_stored_rows": dict(sorted(unstored.items())),
        **({"coarse": answer.coarse} if answer.coarse else {}),
    }


def _summary_text(s: dict[str, Any], max_rows: int) -> str:
    word = {"up": "ancestors", "down": "descendants"}.get(s["direction"], "subgraph cells")
    ends = {"up": "source", "down": "final"}.get(s["direction"], "source and final")
    queried = sorted({f"{q['table']}.{q['column']}" if q["column"] else q["table"] for q in s["query"]})
    lines = [
        f"{s['cells']:,} {word} of {len(s['query']):,} queried value(s) ({', '.join(queried)}), {s['triples']:,} triples"
    ]
    if s["tables"]:
        width = max(len(t["table"]) for t in s["tables"])
        lines.append(f"{'table':<{width}}  {'cells':>9}  {'rows':>9}  columns (cells)")
        for t in s["tables"]:
            columns = ", ".join(f"{c} {n:,}" for c, n in sorted(t["columns"].items()))
            rows = f"{t['rows']:,}" if t["rows"] else "-"
            lines.append(f"{t['table']:<{width}}  {t['cells']:>9,}  {rows:>9}  {columns}")
    if s["ops"]:
        width = max(len(o["op"]) for o in s["ops"])
        lines.append(f"{'op':<{width}}  {'triples':>9}")
        lines.extend(f"{o['op']:<{width}}  {o['triples']:>9,}" for o in s["ops"])
    rows = s["source_rows"]
    lines.append(f"{s['source_cells']:,} {ends} cells (no further {word} in the answer), in {len(rows):,} stored rows:")
    for r in rows[:max_rows]:
        lines.append(f"  {r['table']}  {_row_text(r['row'])}")
    if len(rows) > max_rows:
        lines.append(f"  ... {len(rows) - max_rows:,} more rows (all: --summary --format json)")
    for table, n in s["source_cells_without_stored_rows"].items():
        lines.append(f"  {table}: {n:,} cells (rows not stored)")
    return "\n".join(lines)


def _run_heading(stats: dict[str, Any]) -> str:
    """The line naming the run the answer used (nothing when one run wrote
    its table, or the answer does not know its run) and the line saying
    newer runs are not indexed yet (when the index lacks them), each ended
    by a line break."""
    from provplug.store.runs import run_note

    lines = [run_note(stats.get("run"))]
    index = stats.get("index")
    if isinstance(index, dict) and index.get("note"):
        lines.append(f"index: {index['note']}")  # newer runs are not indexed yet
    return "".join(f"{line}\n" for line in lines if line)


def _run_lines(answer: LineageAnswer) -> list[str]:
    """A line per run boundary the answer crosses and per missing version it reaches."""

    def run(mark: dict[str, Any]) -> str:
        label = f" ({mark['label']})" if mark.get("label") else ""
        return f"run {mark.get('number', '?')}{label}"

    lines = [
        f"run boundary: {b['from']['table']} of {run(b['from'])} -> {b['op']} -> {b['to']['table']} of {run(b['to'])}"
        for b in answer.run_boundaries
    ]
    lines += [
        f"missing version: {m['table']} of {run(m)} is the version {run(m['version_of'])} wrote; "
        "that run was deleted, lineage stops here"
        for m in answer.missing_versions
    ]
    return lines


# -- subgraph --------------------------------------------------------------------
def _subgraph_text(answer: LineageAnswer, max_lines: int, max_siblings: int) -> str:
    """A subgraph answer as its ancestors' tree, its descendants' tree, then
    each triple from an other parent into a descendant."""
    up, down, _ = answer.subgraph_parts()
    records = {r["value_id"]: r for r in [*answer.query, *answer.lineage]}
    inside = {q["value_id"] for q in answer.query} | down.value_ids
    into = sorted(
        (e for e in answer.edges if e["dst"] in down.value_ids and e["src"] not in inside),
        key=lambda e: (e["dst"], e["op"], e["src"]),
    )
    counts = answer.stats.get("subgraph", {})
    lines = [
        "ancestors:",
        up._body(max_lines // 2, max_siblings),
        "",
        "descendants:",
        down._body(max_lines // 2, max_siblings),
        "",
        f"other parents of the descendants ({len(into)} triples):",
    ]
    for e in into[:max_lines]:
        lines.append(f"  {_label(records[e['dst']])}\n    <- {e['op']} from {_label(records[e['src']])}")
    if len(into) > max_lines:
        lines.append(f"  ... {len(into) - max_lines:,} more (all: --format json)")
    lines.append(
        f"subgraph: {counts.get('ancestors', 0)} ancestors, {counts.get('descendants', 0)} descendants, "
        f"{counts.get('other_parents', 0)} other parents, {len(answer.edges)} triples"
    )
    return "\n".join(lines)


# -- tree ----------------------------------------------------------------------
def _label(record: Record) -> str:
    name = f"{record['table']}.{record['column']}" if record.get("column") else str(record["table"])
    text = f"{name} = {record['value']!r}" if record.get("row") is not None else name
    row = record.get("row")
    context = f"; row {_row_text(row)}" if row else ""
    return f"{text}  (value {record['value_id']}{context})"


def _row_text(row: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in row.items())


def _group_label(records: list[Record]) -> str:
    """One line for cells of one row: the row once, then each cell's value."""
    if len(records) == 1:
        return _label(records[0])
    first = records[0]
    cells = ", ".join(f"{r['column']} = {r['value']!r}" for r in records)
    values = ", ".join(str(r["value_id"]) for r in records)
    return f"{first['table']} row ({_row_text(first['row'])}): {cells}  (values {values})"


class _TreeRenderer:
    """One tree per queried row: each level groups the next values by the op
    that links them and by their table, and the cells of one row on one line;
    a value already shown is only referred to, at most ``max_siblings`` rows
    of a group are shown, and the tree stops at ``max_lines`` — saying what
    was left out and how to see it."""

    def __init__(self, answer: LineageAnswer, max_lines: int, max_siblings: int) -> None:
        self.answer = answer
        self.max_lines = max_lines
        self.max_siblings = max_siblings
        self.records = {r["value_id"]: r for r in [*answer.query, *answer.lineage]}
        self.next = answer._following()
        self.lines: list[str] = []
        self.shown: set[int] = set()
        self.limit = max_lines
        self.stopped = False  # the current tree hit its line budget
        self.cut = False  # some tree did

    def record(self, value: int) -> Record:
        return self.records.get(value, {"value_id": value, "table": "?", "column": None, "row": None})

    def emit(self, line: str) -> bool:
        """Add ``line``; False (and the tree stops) once the budget is spent."""
        if len(self.lines) >= self.limit:
            self.stopped = True
            return False
        self.lines.append(line)
        return True

    def by_row(self, values: Iterable[int]) -> list[list[int]]:
        """``values`` grouped by stored row (a value without one alone), in id order."""
        groups: dict[Any, list[int]] = {}
        for v in sorted(set(values)):
            key = row_key(self.record(v))
            groups.setdefault(key if key is not None else v, []).append(v)
        return list(groups.values())

    def render(self) -> str:
        queried = self.by_row(q["value_id"] for q in self.answer.query)
        for i, group in enumerate(queried):
            # Each queried row gets its share of the lines left, so that one
            # deep tree does not hide the others.
            share = max(MIN_QUERY_LINES, (self.max_lines - len(self.lines)) // (len(queried) - i))
            self.limit = min(self.max_lines, len(self.lines) + share)
            self.stopped = False
            if not self.emit(_group_label([self.record(v) for v in group])):
                self.lines.append(f"... {len(queried) - i:,} more queried rows or values not shown")
                break
            self.node(group, "")
            if self.stopped:
                self.cut = True
                self.lines.append("└─ ... cut here (line budget)")
        if self.answer.stats.get("view") == "sources-only":
            self.limit = self.max_lines
            self.flat_list()
        lineage_shown = len(self.shown & self.answer.value_ids)
        if lineage_shown < len(self.answer.lineage):
            self.lines.extend(self.left_out(lineage_shown))
        self.lines.append(self.footer())
        return "\n".join(self.lines)

    def node(self, members: list[int], indent: str) -> None:
        self.shown.update(members)
        groups: dict[tuple[str, str], set[int]] = defaultdict(set)
        for value in members:
            for op, other in self.next.get(value, []):
                groups[(op, self.record(other)["table"])].add(other)
        items = sorted(groups.items())
        preposition = "from" if self.answer.direction == "up" else "into"
        for gi, ((op, table), others) in enumerate(items):
            last_group = gi == len(items) - 1
            if not self.emit(f"{indent}{'└─' if last_group else '├─'} {op} {preposition} {table}"):
                return
            self.members(self.by_row(others), indent + ("   " if last_group else "│  "), table)
            if self.stopped:
                return

    def members(self, rows: list[list[int]], indent: str, table: str) -> None:
        shown_rows = rows[: self.max_siblings]
        hidden = rows[self.max_siblings :]
        for ri, group in enumerate(shown_rows):
            last = ri == len(shown_rows) - 1 and not hidden
            seen = all(v in self.shown for v in group)
            label = _group_label([self.record(v) for v in group])
            if not self.emit(f"{indent}{'└─' if last else '├─'} {label}{'  [shown above]' if seen else ''}"):
                return
            if not seen:
                self.node([v for v in group if v not in self.shown], indent + ("   " if last else "│  "))
                if self.stopped:
                    return
        if hidden:
            cells = sum(len(g) for g in hidden)
            self.emit(f"{indent}└─ ... {cells:,} more {table} cells in {len(hidden):,} rows or values")

    def flat_list(self) -> None:
        """The lineage without triples (``--sources-only``): by table, a
        line per row."""
        by_table: dict[str, list[int]] = defaultdict(list)
        for r in self.answer.lineage:
            by_table[r["table"]].append(r["value_id"])
        word = "source" if self.answer.direction == "up" else "final"
        for ti, (table, values) in enumerate(sorted(by_table.items())):
            last_table = ti == len(by_table) - 1
            if not self.emit(f"{'└─' if last_table else '├─'} {word} cells in {table}"):
                return
            self.members(self.by_row(values), "   " if last_table else "│  ", table)
            if self.stopped:
                return

    def left_out(self, lineage_shown: int) -> list[str]:
        """What the tree did not show, by table, and how to see it."""
        word = "ancestors" if self.answer.direction == "up" else "descendants"
        why = f"{self.max_lines} lines and {self.max_siblings} rows per group are shown"
        missing: dict[str, int] = defaultdict(int)
        for r in self.answer.lineage:
            if r["value_id"] not in self.shown:
                missing[r["table"]] += 1
        per_table = ", ".join(f"{t} {n:,}" for t, n in sorted(missing.items()))
        return [
            f"... {lineage_shown:,} of {len(self.answer.lineage):,} {word} shown ({why}); not shown: {per_table}",
            f"... {SEE_MORE}",
        ]

    def footer(self) -> str:
        a = self.answer
        s = a.stats
        word = "ancestors" if a.direction == "up" else "descendants"
        view = f" (within {s['depth']} triples of the query)" if "depth" in s else ""
        view += " (sources only)" if s.get("view") == "sources-only" else ""
        view += f" (zoomed out: {', '.join(s['zoom_out'])})" if s.get("zoom_out") else ""
        return (
            f"{len(a.lineage)} {word}{view}, {len(a.edges)} triples; method {a.method} on {s['path']}: "
            f"{s['sets_read']} sets read, {s['triples_scanned']} triples scanned, {s['seconds']:.3f} s"
        ) + _reduction_note(s)


def _reduction_note(stats: dict[str, Any]) -> str:
    """A line per reduced run the answer reaches: its provenance is partial."""
    from provplug.plugin.reductions import describe_run_reduction

    return "".join(
        f"\nreduced provenance: run {run} kept only some source rows' ({describe_run_reduction(r)})"
        for run, r in sorted(stats.get("reduction", {}).items())
    )
