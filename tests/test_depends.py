"""Lipstick's subgraph and dependency queries (003 §4.3, §5.1) on the
paper's running example, captured from PySpark (provplug/demo.py):

Person1 (Name, City, Age)      R1: Age >= 25     Person2         R2: avg(Age) per City   AvgAge
Steve NY 30                    ------------->    Steve NY 30     ------------------->    NY 35.0
Mark  NY 40                                      Mark  NY 40                             LA 40.0
Shane LA 40                                      Shane LA 40
Mary  NY 20 (filtered out)

Hand-derived: Person2.Age[Steve] has one ancestor, Person1.Age[Steve]; one
descendant, AvgAge.Age[NY]; and that descendant has one other parent,
Person2.Age[Mark]. AvgAge.Age[NY] depends on Person1.Age of Steve and Mark
(through Person2), not of Mary (filtered out) nor Shane (LA).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.errors import LineageQueryError
from provplug.query.answer import LineageAnswer


@pytest.fixture
def people(demo_store: Path) -> Path:
    return demo_store


def _cell(record: dict[str, Any]) -> tuple[str, str, Any, Any]:
    """(table, column, value, the row's Name or City): ids aside."""
    row = record["row"] or {}
    return record["table"], record["column"], record["value"], row.get("Name", row.get("City"))


def _by_role(answer: Any) -> dict[str, set[tuple[str, str, Any, Any]]]:
    roles: dict[str, set[tuple[str, str, Any, Any]]] = {}
    for r in answer.lineage:
        roles.setdefault(r["role"], set()).add(_cell(r))
    return roles


# -- subgraph ------------------------------------------------------------------
@pytest.mark.parametrize("method", ["auto", "rq"])
def test_subgraph_of_steves_person2_age(people: Path, method: str) -> None:
    answer = provplug.open(people).lineage(table="Person2", column="Age", where="Name = 'Steve'",
                                           subgraph=True, method=method)
    assert answer.direction == "both"
    assert [_cell(q) for q in answer.query] == [("Person2", "Age", 30, "Steve")]
    assert _by_role(answer) == {
        "ancestor": {("Person1", "Age", 30, "Steve")},
        "descendant": {("AvgAge", "Age", 35.0, "NY")},
        "other parent": {("Person2", "Age", 40, "Mark")},
    }
    cells = {r["value_id"]: _cell(r) for r in [*answer.query, *answer.lineage]}
    assert {(cells[e["src"]], cells[e["dst"]], e["op"]) for e in answer.edges} == {
        (("Person1", "Age", 30, "Steve"), ("Person2", "Age", 30, "Steve"), "R1"),
        (("Person2", "Age", 30, "Steve"), ("AvgAge", "Age", 35.0, "NY"), "R2"),
        (("Person2", "Age", 40, "Mark"), ("AvgAge", "Age", 35.0, "NY"), "R2"),
    }
    assert answer.stats["subgraph"] == {"ancestors": 1, "descendants": 1, "other_parents": 1}


def test_subgraph_cli_text_json_and_summary(people: Path, cli: Any) -> None:
    target = ("lineage", people, "Person2.Age", "--where", "Name = 'Steve'", "--subgraph")
    text = cli(*target)
    assert text.code == 0, text
    assert "ancestors:" in text.out and "descendants:" in text.out
    assert "<- R2 from Person2.Age = 40" in text.out
    assert "subgraph: 1 ancestors, 1 descendants, 1 other parents, 3 triples" in text.out
    data = json.loads(cli(*target, "--json").out)
    assert data["direction"] == "both"
    assert sorted(c["role"] for c in data["lineage"]) == ["ancestor", "descendant", "other parent"]
    back = LineageAnswer.from_dict(data)
    assert back.ends() == {c["value_id"] for c in data["lineage"] if c["role"] != "other parent"}
    summary = cli(*target, "--summary")
    assert summary.code == 0 and "3 subgraph cells" in summary.out, summary


def test_subgraph_of_a_final_cell_has_no_descendants(people: Path) -> None:
    answer = provplug.open(people).lineage(table="AvgAge", column="Age", where="City = 'LA'", subgraph=True)
    assert _by_role(answer) == {"ancestor": {("Person2", "Age", 40, "Shane"), ("Person1", "Age", 40, "Shane")}}


# -- dependency ------------------------------------------------------------------
NY = {"b": "AvgAge.Age", "b_where": "City = 'NY'"}


@pytest.mark.parametrize(("name", "expected"), [("Steve", True), ("Mark", True), ("Mary", False), ("Shane", False)])
def test_ny_average_depends_on_steves_and_marks_age_only(people: Path, name: str, expected: bool) -> None:
    answer = provplug.open(people).depends("Person1.Age", a_where=f"Name = '{name}'", **NY)
    assert answer.depends is expected
    if expected:
        age = {"Steve": 30, "Mark": 40}[name]
        assert [_cell(c) for c in answer.path] == [
            ("Person1", "Age", age, name), ("Person2", "Age", age, name), ("AvgAge", "Age", 35.0, "NY")]
        assert answer.ops == ["R1", "R2"]
        assert [_cell(c) for c in answer.a] == [("Person1", "Age", age, name)]
    else:
        assert answer.path == [] and answer.ops == [] and answer.reached == []


def test_depends_on_a_whole_row_and_by_value_id(people: Path) -> None:
    store = provplug.open(people)
    row = store.depends("Person1.*", a_where="Name = 'Mark'", **NY)  # Name, City, Age of Mark's row
    assert row.depends and len(row.a) == 3
    assert [_cell(c) for c in row.reached_records()] == [("Person1", "Age", 40, "Mark")]
    # A cell names of another column: Steve's Name reaches Person2.Name only, not the average.
    assert not store.depends("Person1.Name", a_where="Name = 'Steve'", **NY).depends
    mark = store.cells(table="Person1", column="Age", where="Name = 'Mark'")
    ny = store.cells(table="AvgAge", column="Age", where="City = 'NY'")
    by_id = store.depends(mark, ny[0])
    assert by_id.depends and by_id.ops == ["R1", "R2"]
    assert not store.depends(ny, mark).depends  # the other way round: an ancestor depends on no descendant


def test_depends_cli(people: Path, cli: Any) -> None:
    yes = cli("depends", people, "Person1.Age", "AvgAge.Age", "--a-where", "Name = 'Mark'", "--b-where", "City = 'NY'")
    assert yes.code == 0, yes
    assert yes.out.startswith("yes: AvgAge.Age = 35.0")
    assert "  -> R1 -> Person2.Age = 40" in yes.out and "  -> R2 -> AvgAge.Age = 35.0" in yes.out
    no = cli("depends", people, "--json", "Person1.Age", "AvgAge.Age", "--a-where", "Name = 'Mary'",
             "--b-where", "City = 'NY'")
    data = json.loads(no.out)
    assert (data["format"], data["depends"], data["path"], data["ancestors"]) == ("provplug-depends", False, [], 4)
    bad = cli("depends", people, "Person1.Age", "Person1.Age", "--a-where", "Name = 'Mark'", "--b-where", "Age > 30")
    assert bad.code == 2 and "share" in bad.err, bad


def test_depends_errors(people: Path) -> None:
    store = provplug.open(people)
    with pytest.raises(LineageQueryError, match=r"needs TABLE\.COLUMN"):
        store.depends(1, "AvgAge.Age", a_where="Age > 1")
    with pytest.raises(LineageQueryError, match="no column"):
        store.depends("Person1.Nope", "AvgAge.Age")
