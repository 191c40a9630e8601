"""Readable large answers: --depth, --sources-only, --summary, the JSON that
stores each row once, and the text tree of a large answer.

The paper's store (Tables 1-4 with rows, packed ids): AvgAge.Age of NY (23)
<- R2 <- Person2.Age of Steve (15) and Mark (18) <- R1 <- Person1.Age 3 and 6;
AvgAge.City of NY (22) <- Person2.City 14, 17 <- Person1.City 2, 5."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.index import build_index
from provplug.ingest.importer import import_provenance
from provplug.query.answer import LineageAnswer
from provplug.store.open import open_store

NY_AGE = ("AvgAge.Age", "--where", "City = 'NY'")


@pytest.fixture
def people(paper_rows_store: tuple[Path, dict[int, int]]) -> tuple[Path, dict[int, int]]:
    return paper_rows_store


def _json(cli: Any, *args: Any) -> dict[str, Any]:
    result = cli("lineage", *args)
    assert result.code == 0, result
    return dict(json.loads(result.out))


def _cells(answer: dict[str, Any]) -> set[tuple[str, str, Any]]:
    return {(c["table"], c["column"], c["value"]) for c in answer["lineage"]}


def test_depth_1_keeps_the_two_person2_cells_and_their_triples(people: Any, cli: Any) -> None:
    path, p = people
    answer = _json(cli, path, *NY_AGE, "--depth", "1", "--json")
    assert {c["value_id"] for c in answer["lineage"]} == {p[15], p[18]}
    assert _cells(answer) == {("Person2", "Age", 30), ("Person2", "Age", 40)}
    assert {(e["src"], e["dst"], e["op"]) for e in answer["edges"]} == {(p[15], p[23], "R2"), (p[18], p[23], "R2")}
    assert _json(cli, path, *NY_AGE, "--depth", "0", "--json")["lineage"] == []
    assert len(_json(cli, path, *NY_AGE, "--depth", "2", "--json")["lineage"]) == 4


def test_sources_only_gives_the_person1_cells(people: Any, cli: Any) -> None:
    path, p = people
    answer = _json(cli, path, *NY_AGE, "--sources-only", "--json")
    assert {c["value_id"] for c in answer["lineage"]} == {p[3], p[6]}
    assert _cells(answer) == {("Person1", "Age", 30), ("Person1", "Age", 40)}
    assert answer["edges"] == []
    text = cli("lineage", path, *NY_AGE, "--sources-only").out.splitlines()
    assert "└─ source cells in Person1" in text
    assert sum(line.lstrip("│ ├└─").startswith("Person1.Age = ") for line in text) == 2
    # Downstream, the ends are the final cells: Person1.Age of Steve (3) reaches AvgAge.Age of NY (23).
    down = _json(cli, path, "--value-id", str(p[3]), "--direction", "down", "--sources-only", "--json")
    assert {c["value_id"] for c in down["lineage"]} == {p[23]}


def test_summary_counts_tables_columns_ops_and_lists_source_rows_once(people: Any, cli: Any) -> None:
    path, p = people
    # City and Age of NY: 8 ancestors in 4 rows (Steve and Mark of Person2 and Person1).
    summary = _json(cli, path, "--value-id", str(p[22]), "--value-id", str(p[23]), "--summary", "--json")
    assert summary["cells"] == 8 and summary["triples"] == 8
    assert summary["tables"] == [
        {"table": "Person1", "cells": 4, "rows": 2, "columns": {"City": 2, "Age": 2}},
        {"table": "Person2", "cells": 4, "rows": 2, "columns": {"City": 2, "Age": 2}},
    ]
    assert summary["ops"] == [{"op": "R1", "triples": 4}, {"op": "R2", "triples": 4}]
    # Four source cells, two rows: each row once although two of its cells are sources.
    assert summary["source_cells"] == 4
    assert summary["source_rows"] == [
        {"table": "Person1", "row": {"Name": "Steve", "City": "NY", "Age": 30}},
        {"table": "Person1", "row": {"Name": "Mark", "City": "NY", "Age": 40}},
    ]
    text = cli("lineage", path, *NY_AGE, "--summary").out
    assert text.startswith("4 ancestors of 1 queried value(s) (AvgAge.Age), 4 triples")
    assert "Person2          2          2  Age 2" in text
    assert "R1          2" in text and "R2          2" in text
    assert "  Person1  Name=Steve, City=NY, Age=30" in text and "  Person1  Name=Mark, City=NY, Age=40" in text


def test_json_stores_each_row_once_and_round_trips(people: Any, cli: Any) -> None:
    path, p = people
    out = cli("lineage", path, "--value-id", str(p[22]), "--value-id", str(p[23]), "--json").out
    answer = json.loads(out)
    assert answer["format"] == "provplug-lineage" and answer["version"] == 2
    # 8 ancestor cells and 2 queried cells live in 5 rows: NY of AvgAge, Steve and Mark of Person1 and Person2.
    assert len(answer["lineage"]) == 8 and len(answer["rows"]) == 5
    by_row: dict[str, int] = {}
    for cell in answer["query"] + answer["lineage"]:
        by_row[cell["row"]] = by_row.get(cell["row"], 0) + 1
        assert answer["rows"][cell["row"]][cell["column"]] == cell["value"]
    assert sorted(by_row.values()) == [2, 2, 2, 2, 2]
    assert out.count('"Steve"') == 2  # Steve's Person1 and Person2 rows, once each (4 cells refer to them)
    # Back to the answer: the same cells (with their rows) and triples as the Python API's.
    again = LineageAnswer.from_dict(answer)
    direct = provplug.open(path).lineage(value_id=[p[22], p[23]])
    assert again.query == direct.query and again.lineage == direct.lineage and again.edges == direct.edges
    assert again.to_dict() == answer
    with pytest.raises(ValueError):
        LineageAnswer.from_dict({**answer, "version": 1})


def test_tree_groups_the_cells_of_one_row(people: Any, cli: Any) -> None:
    path, p = people
    lines = cli("lineage", path, "--value-id", str(p[22]), "--value-id", str(p[23])).out.splitlines()
    assert lines[0].startswith("AvgAge row (City=NY, Age=35.0): City = 'NY', Age = 35.0  (values ")
    steve = [line for line in lines if "Person2 row (Name=Steve, City=NY, Age=30)" in line]
    assert len(steve) == 1 and "City = 'NY', Age = 30" in steve[0]
    assert lines[-1].startswith("8 ancestors, 8 triples")


@pytest.fixture
def fan_in(tmp_path: Path) -> Path:
    """An imported store: 60 values of A, each the parent of one B value, every B a parent of C 1000."""
    triples = tmp_path / "t.csv"
    values = tmp_path / "v.csv"
    triples.write_text("src,dst,op\n" + "".join(f"{a},{a + 100},copy\n{a + 100},1000,total\n" for a in range(1, 61)))
    values.write_text("value_id,table\n" + "".join(f"{a},A\n{a + 100},B\n" for a in range(1, 61)) + "1000,C\n")
    path = tmp_path / "fan.prov"
    import_provenance(open_store(path), triples, values)
    build_index(path, engine="local")
    return path


def test_a_large_tree_says_what_it_left_out_and_how_to_see_it(fan_in: Path, cli: Any) -> None:
    lines = cli("lineage", fan_in, "--value-id", "1000").out.splitlines()
    # 10 of the 60 B values (rows per group), each with its A parent: 1 + 1 + 10 * 3 + 1 lines of tree.
    assert lines[1] == "└─ total from B"
    assert lines[32] == "   └─ ... 50 more B cells in 50 rows or values"
    assert (
        lines[33] == "... 20 of 120 ancestors shown (400 lines and 10 rows per group are shown); not shown: A 50, B 50"
    )
    assert lines[34].startswith("... see more with --depth N, --summary")
    short = cli("lineage", fan_in, "--value-id", "1000", "--depth", "1").out.splitlines()
    assert "... 10 of 60 ancestors shown" in short[-3]


def test_summary_of_an_imported_answer_counts_cells_without_rows(fan_in: Path, cli: Any) -> None:
    summary = _json(cli, fan_in, "--value-id", "1000", "--summary", "--json")
    assert [(t["table"], t["cells"], t["rows"]) for t in summary["tables"]] == [("A", 60, 0), ("B", 60, 0)]
    assert summary["ops"] == [{"op": "copy", "triples": 60}, {"op": "total", "triples": 60}]
    assert summary["source_cells"] == 60 and summary["source_rows"] == []
    assert summary["source_cells_without_stored_rows"] == {"A": 60}


def test_json_and_format_must_agree(people: Any, cli: Any) -> None:
    path, _ = people
    result = cli("lineage", path, *NY_AGE, "--json", "--format", "svg")
    assert result.code == 2 and result.out == "" and result.err.count("\n") == 1
    as_format, as_flag = _json(cli, path, *NY_AGE, "--format", "json"), _json(cli, path, *NY_AGE, "--json")
    assert as_format == {**as_flag, "stats": as_format["stats"]}
