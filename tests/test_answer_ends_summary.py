"""``LineageAnswer.ends`` and ``LineageAnswer.summary`` computed the fast way
(one side of the triples; C-level counting) give what their definitions give,
on random answers: ends from ``_following`` (the values with no next value in
the answer's direction), the summary from a plain per-cell count."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from provplug import ids
from provplug.query.answer import LineageAnswer, finite, row_key

TABLES = {1: ("A", ["x", "y"]), 2: ("B", ["z"]), 3: ("C", ["(no column)", "w"])}


def _random_answer(rng: random.Random, direction: str) -> LineageAnswer:
    """Cells of captured tables (rows stored or not) and imported ones (no
    column for some), random triples among them, a few queried values."""
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    cells: dict[int, dict[str, Any]] = {}
    while len(cells) < rng.randint(5, 60):
        if rng.random() < 0.25:  # an imported value: no packed id, no stored row
            vid = rng.randint(1, 500)
            cells[vid] = {
                "value_id": vid,
                "table": rng.choice(["IMP", "B"]),
                "column": rng.choice([None, "z"]),
                "row": None,
                "value": None,
            }
            continue
        table_id = rng.choice(list(TABLES))
        name, columns = TABLES[table_id]
        column, row = rng.randrange(len(columns)), rng.randint(0, 6)
        stored = rng.random() < 0.7
        shared = rows.setdefault((table_id, row), {c: rng.choice([1.5, float("nan"), "v", None]) for c in columns})
        vid = ids.value_id(table_id, column, row)
        cells[vid] = {
            "value_id": vid,
            "table": name,
            "column": columns[column] if rng.random() < 0.9 else None,
            "row": shared if stored else None,
            "value": shared[columns[column]] if stored else None,
        }
    values = list(cells)
    queried = values[: rng.randint(1, 3)]
    edges = [
        {"src": rng.choice(values), "dst": rng.choice(values), "op": rng.choice(["R1", "R2", "J"])}
        for _ in range(rng.randint(0, 3 * len(values)))
    ]
    return LineageAnswer(
        [cells[v] for v in queried],
        "csprov",
        direction,
        [cells[v] for v in values[len(queried) :]],
        edges,
        {"run": None},
    )


def _ends_by_definition(answer: LineageAnswer) -> set[int]:
    following = answer._following()
    return {r["value_id"] for r in answer.lineage if not following.get(r["value_id"])}


def _summary_by_definition(answer: LineageAnswer) -> dict[str, Any]:
    """The summary counted cell by cell (its definition before the fast one)."""
    tables: dict[str, dict[str, Any]] = {}
    rows_seen: dict[str, set[str]] = defaultdict(set)
    for r in answer.lineage:
        entry = tables.setdefault(r["table"], {"table": r["table"], "cells": 0, "rows": 0, "columns": {}})
        entry["cells"] += 1
        column = r["column"] if r["column"] is not None else "(no column)"
        entry["columns"][column] = entry["columns"].get(column, 0) + 1
        key = row_key(r)
        if key is not None and key not in rows_seen[r["table"]]:
            rows_seen[r["table"]].add(key)
            entry["rows"] += 1
    ops: dict[str, int] = defaultdict(int)
    for e in answer.edges:
        ops[e["op"]] += 1
    ends = _ends_by_definition(answer) if answer.direction != "both" else answer.ends()
    source_rows: dict[str, dict[str, Any]] = {}
    unstored: dict[str, int] = defaultdict(int)
    for r in answer.lineage:
        if r["value_id"] not in ends:
            continue
        key = row_key(r)
        if key is None:
            unstored[r["table"]] += 1
        elif key not in source_rows:
            source_rows[key] = {"table": r["table"], "row": finite(r["row"])}
    return {
        "format": "provplug-lineage-summary",
        "version": 2,
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
    }


@pytest.mark.parametrize("direction", ["up", "down"])
def test_ends_are_the_values_with_no_next_value_in_the_direction(direction: str) -> None:
    rng = random.Random(f"ends-{direction}")
    for _ in range(300):
        answer = _random_answer(rng, direction)
        assert answer.ends() == _ends_by_definition(answer)


def test_ends_of_a_chain_up_and_down() -> None:
    # 1 -> 2 -> 3 (src -> dst): upstream of 3 the source is 1; downstream of 1 the final value is 3.
    cell = {k: {"value_id": k, "table": "T", "column": None, "row": None, "value": None} for k in (1, 2, 3)}
    edges = [{"src": 1, "dst": 2, "op": "f"}, {"src": 2, "dst": 3, "op": "g"}]
    assert LineageAnswer([cell[3]], "csprov", "up", [cell[2], cell[1]], edges, {}).ends() == {1}
    assert LineageAnswer([cell[1]], "csprov", "down", [cell[2], cell[3]], edges, {}).ends() == {3}


@pytest.mark.parametrize("direction", ["up", "down"])
def test_summary_equals_its_cell_by_cell_definition(direction: str) -> None:
    rng = random.Random(f"summary-{direction}")
    for _ in range(300):
        answer = _random_answer(rng, direction)
        fast, slow = answer.summary(), _summary_by_definition(answer)
        assert repr(fast) == repr(slow)  # repr: equal dict orders too (the JSON's order), and NaN-safe
