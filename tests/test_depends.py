"""Lipstick's subgraph and dependency queries (003 §4.3, §5.1) on the
paper's running example, captured from PySpark (provplug/cli/demo.py):

Person1 (Name, City, Age)      R1: Age >= 25     Person2         R2: avg(Age) per City   AvgAge
Steve NY 30                    ------------->    Steve NY 30     ------------------->    NY 35.0
Mark  NY 40                                      Mark  NY 40                             LA 40.0
Shane LA 40                                      Shane LA 40
Mary  NY 20 (filtered out)

Hand-derived: Person2.Age[Steve] has one ancestor, Person1.Age[Steve]; one
descendant, AvgAge.Age[NY]; and that descendant has one other parent,
Person2.Age[Mark]. Dependency is deletion (Lipstick §4.3): AvgAge.Age[NY]
depends on the rows of Steve and Mark (deleting either changes it: to 40.0,
to 30.0; deleting both removes the row), not on Mary's (filtered out) nor
Shane's (LA). The dependency tests run on the example with its row lineage
written by hand (test_whatif_support) and, in test_whatif_spark.py, captured.
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
    answer = provplug.open(people).lineage(
        table="Person2", column="Age", where="Name = 'Steve'", subgraph=True, method=method
    )
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


# -- dependency (deletion semantics) -------------------------------------------------
NY = {"b": "AvgAge.Age", "b_where": "City = 'NY'"}


@pytest.fixture
def rows_store(tmp_path: Path) -> Path:
    from test_whatif_support import paper_store

    path = tmp_path / "people.prov"
    paper_store(path)
    return path


def _step(step: dict[str, Any]) -> tuple[str, Any, str]:
    row = step["row"] or {}
    return step["table"], row.get("Name", row.get("City")), step["effect"]


@pytest.mark.parametrize(("name", "new"), [("Steve", 40.0), ("Mark", 30.0)])
def test_ny_average_depends_on_steves_and_marks_rows(rows_store: Path, name: str, new: float) -> None:
    answer = provplug.open(rows_store).depends("Person1.Age", a_where=f"Name = '{name}'", **NY)
    assert (answer.answer, answer.depends) == ("yes", True)
    assert [_step(s) for s in answer.path] == [
        ("Person1", name, "deleted"),
        ("Person2", name, "vanishes"),
        ("AvgAge", "NY", "changes"),
    ]
    assert answer.ops == ["R1", "R2"]
    assert answer.path[-1]["cells"] == {"Age": {"old": 35.0, "new": new, "known": True}}
    assert (answer.path[-1]["column"], answer.path[-1]["value"]) == ("Age", 35.0)


@pytest.mark.parametrize("name", ["Mary", "Shane"])
def test_ny_average_does_not_depend_on_mary_or_shane(rows_store: Path, name: str) -> None:
    answer = provplug.open(rows_store).depends("Person1.Age", a_where=f"Name = '{name}'", **NY)
    assert (answer.answer, answer.depends, answer.path, answer.ops) == ("no", False, [], [])


def test_depends_on_rows_whatever_the_column_and_by_value_id(rows_store: Path) -> None:
    store = provplug.open(rows_store)
    # Deletion is of rows: Steve's Name cell names his row, whose deletion changes NY's average.
    assert store.depends("Person1.Name", a_where="Name = 'Steve'", **NY).depends
    both = store.depends("Person1.*", "AvgAge.*", a_where="City = 'NY' AND Age >= 25", b_where="City = 'NY'")
    assert both.depends and both.path[-1]["effect"] == "vanishes" and len(both.a) == 6
    mark = store.cells(table="Person1", column="Age", where="Name = 'Mark'")
    ny = store.cells(table="AvgAge", column="Age", where="City = 'NY'")
    by_id = store.depends(mark, ny[0])
    assert by_id.depends and by_id.ops == ["R1", "R2"]
    assert not store.depends(ny, mark).depends  # deleting the average removes no input
    # The other city's average and the group key of NY stay as they are when Mark goes.
    assert not store.depends(mark, "AvgAge.Age", b_where="City = 'LA'").depends
    assert not store.depends(mark, "AvgAge.City", b_where="City = 'NY'").depends


def test_depends_cli(rows_store: Path, cli: Any) -> None:
    yes = cli(
        "depends", rows_store, "Person1.Age", "AvgAge.Age", "--a-where", "Name = 'Mark'", "--b-where", "City = 'NY'"
    )
    assert yes.code == 0, yes
    lines = yes.out.splitlines()
    assert lines[0].startswith("yes: AvgAge.Age = 35.0") and "depends on Person1.Age = 40" in lines[0]
    assert lines[2:] == [
        "  Person1 row Name=Mark, City=NY, Age=40: deleted",
        "  -> R1 -> Person2 row Name=Mark, City=NY, Age=40: vanishes",
        "  -> R2 -> AvgAge.Age = 35.0  (row City=NY, Age=35.0): changes Age to 30.0",
    ]
    no = cli(
        "depends",
        rows_store,
        "--json",
        "Person1.Age",
        "AvgAge.Age",
        "--a-where",
        "Name = 'Mary'",
        "--b-where",
        "City = 'NY'",
    )
    data = json.loads(no.out)
    assert (data["format"], data["version"], data["depends"], data["answer"], data["path"]) == (
        "provplug-depends",
        2,
        False,
        "no",
        [],
    )
    bad = cli(
        "depends", rows_store, "Person1.Age", "Person1.Age", "--a-where", "Name = 'Mark'", "--b-where", "Age > 30"
    )
    assert bad.code == 2 and "share" in bad.err, bad


def test_depends_is_unknown_when_existence_cannot_be_told(tmp_path: Path) -> None:
    """A filter on the average (Old: Age > 32) decides on a changed cell."""
    from test_whatif_support import AVGAGE, PERSON1, PERSON2, R1, R2, Step, Table, stage

    old = Table("Old", ("City", "Age"), [("NY", 35.0), ("LA", 40.0)])
    r3 = Step(
        "R3",
        ["AvgAge"],
        "Old",
        [(0, 0, "AvgAge", 0), (1, 0, "AvgAge", 1)],
        {"City": ("copy", "AvgAge", "City"), "Age": ("copy", "AvgAge", "Age")},
        {"AvgAge": ["Age"]},
    )
    path = tmp_path / "old.prov"
    stage(path, [PERSON1, PERSON2, AVGAGE, old], [R1, R2, r3])
    answer = provplug.open(path).depends("Person1.Age", "Old.City", a_where="Name = 'Mark'", b_where="City = 'NY'")
    assert (answer.answer, answer.depends) == ("unknown", None)
    assert answer.path[-1]["effect"] == "unknown" and "AvgAge.Age decides it" in answer.path[-1]["reason"]
    assert answer.render().startswith("unknown: Old.City = 'NY'")


def test_depends_errors(rows_store: Path) -> None:
    store = provplug.open(rows_store)
    with pytest.raises(LineageQueryError, match=r"needs TABLE\.COLUMN"):
        store.depends(1, "AvgAge.Age", a_where="Age > 1")
    with pytest.raises(LineageQueryError, match="no column"):
        store.depends("Person1.Nope", "AvgAge.Age")
