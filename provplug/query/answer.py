"""The answer to a lineage query, as a dict (the CLI's ``--json``) or a tree."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

MAX_TREE_LINES = 400


@dataclass
class LineageAnswer:
    """See :mod:`provplug.query` for the meaning of each field."""

    query: list[dict[str, Any]]
    method: str
    direction: str
    lineage: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    stats: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The answer as valid JSON data (NaN and infinities become null)."""
        return {
            "query": [finite(r) for r in self.query],
            "method": self.method,
            "direction": self.direction,
            "lineage": [finite(r) for r in self.lineage],
            "edges": self.edges,
            "stats": self.stats,
        }

    @property
    def value_ids(self) -> set[int]:
        """Ids of the lineage values (query values excluded)."""
        return {r["value_id"] for r in self.lineage}

    def render(self, max_lines: int = MAX_TREE_LINES) -> str:
        return _TreeRenderer(self, max_lines).render()


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


def _label(record: dict[str, Any]) -> str:
    name = f"{record['table']}.{record['column']}" if record.get("column") else str(record["table"])
    text = f"{name} = {record['value']!r}" if record.get("row") is not None else name
    row = record.get("row")
    context = f"; row {', '.join(f'{k}={v}' for k, v in row.items())}" if row else ""
    return f"{text}  (value {record['value_id']}{context})"


class _TreeRenderer:
    """One tree per queried value: each level groups the next values by the
    op that links them and by their table; a value already shown is only
    referred to, so shared ancestry does not blow the tree up."""

    def __init__(self, answer: LineageAnswer, max_lines: int) -> None:
        self.answer = answer
        self.max_lines = max_lines
        self.records = {r["value_id"]: r for r in [*answer.query, *answer.lineage]}
        self.next: dict[int, list[tuple[str, int]]] = defaultdict(list)
        up = answer.direction == "up"
        for e in answer.edges:
            frm, to = (e["dst"], e["src"]) if up else (e["src"], e["dst"])
            self.next[frm].append((e["op"], to))
        self.lines: list[str] = []
        self.shown: set[int] = set()
        self.truncated = 0

    def emit(self, line: str) -> None:
        if len(self.lines) < self.max_lines:
            self.lines.append(line)
        else:
            self.truncated += 1

    def render(self) -> str:
        a = self.answer
        word = "ancestors" if a.direction == "up" else "descendants"
        for q in a.query:
            self.emit(_label(q))
            self.node(q["value_id"], "")
        if self.truncated:
            self.lines.append(f"... {self.truncated} more lines (use --json for the full answer)")
        s = a.stats
        self.lines.append(
            f"{len(a.lineage)} {word}, {len(a.edges)} triples; method {a.method} on {s['path']}: "
            f"{s['sets_read']} sets read, {s['triples_scanned']} triples scanned, {s['seconds']:.3f} s"
        )
        return "\n".join(self.lines)

    def node(self, value: int, indent: str) -> None:
        if value in self.shown:
            return
        self.shown.add(value)
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for op, other in self.next.get(value, []):
            groups[(op, self.records.get(other, {"table": "?"})["table"])].append(other)
        items = sorted(groups.items())
        preposition = "from" if self.answer.direction == "up" else "into"
        for gi, ((op, table), members) in enumerate(items):
            last_group = gi == len(items) - 1
            self.emit(f"{indent}{'└─' if last_group else '├─'} {op} {preposition} {table}")
            child_indent = indent + ("   " if last_group else "│  ")
            for mi, member in enumerate(sorted(set(members))):
                last = mi == len(set(members)) - 1
                record = self.records.get(member, {"value_id": member, "table": "?", "column": None})
                seen = member in self.shown
                self.emit(f"{child_indent}{'└─' if last else '├─'} {_label(record)}{'  [shown above]' if seen else ''}")
                if not seen:
                    self.node(member, child_indent + ("   " if last else "│  "))
