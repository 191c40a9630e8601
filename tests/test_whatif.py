"""What-if (docs/queries.md "What-if", Lipstick Def. 4.2 on rows) over row lineage written by
hand through the recorder: every expectation here is derived by hand from
the tables in each test (the captured pipelines are in test_whatif_spark.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import snapshot
from test_whatif_support import AVGAGE, PERSON1, PERSON2, R1, R2, Step, Table, paper_store, stage

import provplug
from provplug import ids
from provplug.errors import DamagedStoreError, LineageQueryError
from provplug.rowrules import parse_rules, rules_text
from provplug.whatif.answer import WhatIfAnswer
from provplug.whatif.values import UNKNOWN


def _rows(answer: WhatIfAnswer, table: str, kind: str) -> list[Any]:
    effect = answer.table(table)
    return [] if effect is None else [r.values for r in getattr(effect, kind)]


def _changes(answer: WhatIfAnswer, table: str) -> list[tuple[Any, dict[str, tuple[Any, Any]]]]:
    effect = answer.table(table)
    return [] if effect is None else [(r.values, r.changes) for r in effect.changed]


# -- the paper's running example -------------------------------------------------
@pytest.fixture
def people(tmp_path: Path) -> Path:
    path = tmp_path / "people.prov"
    paper_store(path)
    return path


def test_deleting_mark_removes_his_person2_row_and_changes_ny_to_30(people: Path) -> None:
    before = snapshot(people)
    answer = provplug.open(people).whatif("Person1", "Name = 'Mark'")
    assert _rows(answer, "Person1", "deleted") == [{"Name": "Mark", "City": "NY", "Age": 40}]
    assert _rows(answer, "Person2", "vanished") == [{"Name": "Mark", "City": "NY", "Age": 40}]
    assert _changes(answer, "AvgAge") == [({"City": "NY", "Age": 35.0}, {"Age": (35.0, 30.0)})]
    assert [(t.table, t.untouched) for t in answer.tables] == [("Person1", 3), ("Person2", 2), ("AvgAge", 1)]
    assert snapshot(people) == before  # read-only


def test_deleting_steve_and_mark_removes_the_ny_row(people: Path) -> None:
    answer = provplug.open(people).whatif("Person1", "Name IN ('Steve', 'Mark')")
    assert len(_rows(answer, "Person2", "vanished")) == 2
    assert _rows(answer, "AvgAge", "vanished") == [{"City": "NY", "Age": 35.0}]
    assert _changes(answer, "AvgAge") == [] and answer.table("AvgAge").untouched == 1  # type: ignore[union-attr]


def test_deleting_mary_changes_nothing(people: Path) -> None:
    answer = provplug.open(people).whatif("Person1", "Name = 'Mary'")
    assert [t.table for t in answer.tables] == ["Person1"]
    assert "nothing downstream changes" in answer.render()


def test_by_value_id_repeated_deletions_and_an_intermediate_table(people: Path) -> None:
    store = provplug.open(people)
    mark_age = store.cells(table="Person1", column="Age", where="Name = 'Mark'")[0]
    by_id = store.whatif(value_id=mark_age)
    assert _changes(by_id, "AvgAge") == [({"City": "NY", "Age": 35.0}, {"Age": (35.0, 30.0)})]
    both = store.whatif(deletions=[("Person1", "Name = 'Mark'"), ("Person2", "Name = 'Shane'")])
    assert _rows(both, "AvgAge", "vanished") == [{"City": "LA", "Age": 40.0}]
    assert _changes(both, "AvgAge") == [({"City": "NY", "Age": 35.0}, {"Age": (35.0, 30.0)})]
    middle = store.whatif("Person2", "Name = 'Steve'")  # a step output: only what follows it
    assert [t.table for t in middle.tables] == ["Person2", "AvgAge"]
    assert _changes(middle, "AvgAge") == [({"City": "NY", "Age": 35.0}, {"Age": (35.0, 40.0)})]


def test_cli_text_and_json(people: Path, cli: Any) -> None:
    text = cli("whatif", people, "--delete", "Person1", "--where", "Name = 'Mark'")
    assert text.code == 0, text
    assert text.out.splitlines() == [
        "what if 1 row of Person1 were deleted:",
        "  Person1: 1 deleted, 3 untouched",
        "    - Name=Mark, City=NY, Age=40",
        "  Person2 (R1): 1 vanishes, 2 untouched",
        "    - Name=Mark, City=NY, Age=40",
        "  AvgAge (R2): 1 changes, 1 untouched",
        "    ~ City=NY, Age=35.0: Age 35.0 -> 30.0",
    ]
    data = json.loads(cli("whatif", people, "--json", "--delete", "Person1", "--where", "Name = 'Mark'").out)
    assert data["format"] == "provplug-whatif"
    avg = data["tables"][2]
    assert (avg["table"], avg["op"], avg["untouched"]) == ("AvgAge", "R2", 1)
    assert avg["changed"] == [
        {"row": 0, "values": {"City": "NY", "Age": 35.0}, "cells": {"Age": {"old": 35.0, "new": 30.0, "known": True}}}
    ]
    two = cli(
        "whatif",
        people,
        "--delete",
        "Person1",
        "--where",
        "Name = 'Mark'",
        "--delete",
        "Person1",
        "--where",
        "Name = 'Steve'",
        "--limit",
        "1",
    )
    assert "2 rows of Person1" in two.out and "... 1 more (all: --json)" in two.out, two


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--where", "Name = 'x'"], "--where must follow"),
        (
            ["--delete", "Person1", "--where", "Age > 1", "--where", "Age < 9"],
            "no row of Person1 satisfies '(Age > 1) AND (Age < 9)'",
        ),
        (["--delete", "Nope"], "unknown table 'Nope'"),
        (["--delete", "Person1", "--where", "Age > 100"], "no row of Person1 satisfies"),
        ([], "nothing to delete"),
        (["--value-id", str(ids.value_id(99, 0, 0))], "unknown value id"),
    ],
)
def test_cli_errors_are_one_line(people: Path, cli: Any, args: list[str], message: str) -> None:
    result = cli("whatif", people, *args)
    assert result.code == 2 and message in result.err, result
    assert result.err.count("error:") == 1


def test_the_api_refuses_a_where_without_a_table(people: Path) -> None:
    with pytest.raises(LineageQueryError, match="needs the table"):
        provplug.open(people).whatif(where="Age > 1")


# -- outer joins -------------------------------------------------------------------
LEFT = Table("L", ("k",), [("a1",), ("a2",)])
RIGHT = Table("R", ("k", "v"), [("a1", "x"), ("a1", "y"), ("a2", "z")])


def _outer(tmp_path: Path, full: bool) -> Path:
    """L left (or full) outer join R on k: (a1, x), (a1, y), (a2, z); full adds
    R (b, w) unmatched as (null, w)."""
    right = Table("R", RIGHT.columns, [*RIGHT.rows, ("b", "w")]) if full else RIGHT
    rows = [("a1", "a1", "x"), ("a1", "a1", "y"), ("a2", "a2", "z")] + ([(None, "b", "w")] if full else [])
    out = Table("J", ("k", "rk", "v"), rows)
    records: list[tuple[Any, ...]] = [
        (0, 0, "L", 0, full),
        (0, 0, "R", 0, True),
        (1, 0, "L", 0, full),
        (1, 0, "R", 1, True),
        (2, 0, "L", 1, full),
        (2, 0, "R", 2, True),
    ]
    if full:
        records.append((3, 0, "R", 3, True))
    step = Step(
        "join",
        ["L", "R"],
        "J",
        records,
        {"k": ("copy", "L", "k"), "rk": ("copy", "R", "k"), "v": ("copy", "R", "v")},
        {"L": ["k"], "R": ["k"]},
    )
    path = tmp_path / ("full.prov" if full else "left.prov")
    stage(path, [LEFT, right, out], [step])
    return path


def test_left_outer_join_keeps_one_padded_row_only_when_the_last_match_goes(tmp_path: Path) -> None:
    store = provplug.open(_outer(tmp_path, full=False))
    one = store.whatif("R", "v = 'x'")  # a1 still matches y
    assert _rows(one, "J", "vanished") == [{"k": "a1", "rk": "a1", "v": "x"}] and _changes(one, "J") == []
    both = store.whatif("R", "k = 'a1'")  # a1's last match goes: one (a1, null, null) stays
    assert _rows(both, "J", "vanished") == [{"k": "a1", "rk": "a1", "v": "y"}]
    assert _changes(both, "J") == [({"k": "a1", "rk": "a1", "v": "x"}, {"rk": ("a1", None), "v": ("x", None)})]
    only = store.whatif("R", "v = 'z'")
    assert _changes(only, "J") == [({"k": "a2", "rk": "a2", "v": "z"}, {"rk": ("a2", None), "v": ("z", None)})]
    left = store.whatif("L", "k = 'a1'")  # the preserved row goes: its rows go
    assert len(_rows(left, "J", "vanished")) == 2 and _changes(left, "J") == []


def test_full_outer_join_pads_either_side(tmp_path: Path) -> None:
    store = provplug.open(_outer(tmp_path, full=True))
    left = store.whatif("L", "k = 'a2'")  # (a2, z) becomes (null, a2, z)
    assert _changes(left, "J") == [({"k": "a2", "rk": "a2", "v": "z"}, {"k": ("a2", None)})]
    a1 = store.whatif("L", "k = 'a1'")  # x and y keep one row each, padded on the left
    assert sorted(c for _, ch in _changes(a1, "J") for c in ch) == ["k", "k"]
    lonely = store.whatif("R", "k = 'b'")  # its only row had no left side
    assert _rows(lonely, "J", "vanished") == [{"k": None, "rk": "b", "v": "w"}]


def test_a_union_copies_each_rows_cell_from_its_own_branch(tmp_path: Path) -> None:
    """U = J.v union L.k: a padded J row's v turns null in U too (a computed
    rule could only say "changed, value unknown")."""
    union = Table("U", ("v",), [("x",), ("y",), ("z",), ("a1",), ("a2",)])
    step = Step(
        "union",
        ["J", "L"],
        "U",
        [(0, 0, "J", 0), (1, 0, "J", 1), (2, 0, "J", 2), (3, 0, "L", 0), (4, 0, "L", 1)],
        {"v": ("copies", [("J", "v"), ("L", "k")])},
    )
    stage(
        tmp_path / "union.prov",
        [LEFT, RIGHT, Table("J", ("k", "rk", "v"), [("a1", "a1", "x"), ("a1", "a1", "y"), ("a2", "a2", "z")]), union],
        [_outer_step(full=False), step],
    )
    store = provplug.open(tmp_path / "union.prov")
    assert _changes(store.whatif("R", "v = 'z'"), "U") == [({"v": "z"}, {"v": ("z", None)})]
    both = store.whatif("R", "k = 'a1'")
    assert _rows(both, "U", "vanished") == [{"v": "y"}] and _changes(both, "U") == [({"v": "x"}, {"v": ("x", None)})]
    gone = store.whatif("L", "k = 'a2'")  # U's a2 row and the J row it reached
    assert sorted(r["v"] for r in _rows(gone, "U", "vanished")) == ["a2", "z"] and _changes(gone, "U") == []


def _outer_step(full: bool) -> Step:
    records: list[tuple[Any, ...]] = [
        (0, 0, "L", 0, full),
        (0, 0, "R", 0, True),
        (1, 0, "L", 0, full),
        (1, 0, "R", 1, True),
        (2, 0, "L", 1, full),
        (2, 0, "R", 2, True),
    ]
    return Step(
        "join",
        ["L", "R"],
        "J",
        records,
        {"k": ("copy", "L", "k"), "rk": ("copy", "R", "k"), "v": ("copy", "R", "v")},
        {"L": ["k"], "R": ["k"]},
    )


def _grouped_join(tmp_path: Path, full: bool) -> Any:
    """One step: L left (full) join R on k, grouped by L.k (full: by nothing,
    one row): a group's members are the joined pairs, R's row optional
    (full: both). Columns: n = count(*), nv = count(R.v)."""
    right = Table("R", RIGHT.columns, [*RIGHT.rows, ("b", "w")]) if full else RIGHT
    pairs = [(0, "L", 0, "R", 0), (0, "L", 0, "R", 1), (1, "L", 1, "R", 2)]
    if full:
        pairs = [(0, *p[1:]) for p in pairs]
    records: list[tuple[Any, ...]] = []
    for member, (row, lt, lr, rt, rr) in enumerate(pairs):
        records += [(row, member, lt, lr, full), (row, member, rt, rr, True)]
    if full:
        records.append((0, 3, "R", 3, True))
    rows = [(4, 4)] if full else [("a1", 2, 2), ("a2", 1, 1)]
    columns: dict[str, tuple[Any, ...]] = {"n": ("aggregate", "count_star"), "nv": ("aggregate", "count", "R", "v")}
    if not full:
        columns = {"k": ("copy", "L", "k"), **columns}
    out = Table("G", tuple(columns), rows)
    step = Step(
        "joined_groups",
        ["L", "R"],
        "G",
        records,
        columns,
        {"L": ["k"], "R": ["k"]},
        existence="always_one_row" if full else "exact",
    )
    stage(tmp_path / "g.prov", [LEFT, right, out], [step])
    return provplug.open(tmp_path / "g.prov")


def test_a_groups_members_pad_as_the_join_rows_would(tmp_path: Path) -> None:
    store = _grouped_join(tmp_path, full=False)
    # (a1, x) goes: a1 still matches y, so no padded member stays.
    assert _changes(store.whatif("R", "v = 'x'"), "G") == [({"k": "a1", "n": 2, "nv": 2}, {"n": (2, 1), "nv": (2, 1)})]
    # Both of a1's matches go: one padded member (a1, null) stays.
    assert _changes(store.whatif("R", "k = 'a1'"), "G") == [({"k": "a1", "n": 2, "nv": 2}, {"n": (2, 1), "nv": (2, 0)})]
    assert _rows(store.whatif("L", "k = 'a2'"), "G", "vanished") == [{"k": "a2", "n": 1, "nv": 1}]


def test_a_full_join_member_lives_while_one_of_its_rows_does(tmp_path: Path) -> None:
    store = _grouped_join(tmp_path, full=True)
    # Every L row goes: each R row keeps a padded row of its own (re-run: 4 rows, R's v all there).
    assert _changes(store.whatif("L", "k IS NOT NULL"), "G") == []
    # R's a1 rows go: L's a1 keeps one padded row; a2's pair and b's row stay (3 rows, 2 with v).
    assert _changes(store.whatif("R", "k = 'a1'"), "G") == [({"n": 4, "nv": 4}, {"n": (4, 3), "nv": (4, 2)})]


SALES_TOTAL: dict[str, tuple[Any, ...]] = {
    "n": ("aggregate", "count_star"),
    "n_qty": ("aggregate", "count", "Sales", "qty"),
    "items": ("aggregate", "count_distinct", "Sales", "item"),
    "total": ("aggregate", "sum", "Sales", "qty"),
    "low": ("aggregate", "min", "Sales", "qty"),
    "mean": ("aggregate", "avg", "Sales", "price"),
    "one": ("literal",),
}


def _overall(tmp_path: Path, existence: str) -> Any:
    out = Table(
        "Overall",
        tuple(SALES_TOTAL),
        [(4, 3, 3, 13, 2, 7.0 / 3, 1)],
        [pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.int32(), pa.float64(), pa.int32()],
    )
    step = Step("total", ["Sales"], "Overall", [(0, m, "Sales", m) for m in range(4)], SALES_TOTAL, existence=existence)
    stage(tmp_path / f"{existence}.prov", [SALES, out], [step])
    return provplug.open(tmp_path / f"{existence}.prov")


def test_a_global_aggregate_keeps_its_one_row_with_no_member_left(tmp_path: Path) -> None:
    store = _overall(tmp_path, "always_one_row")
    ((_, changes),) = _changes(store.whatif("Sales", "shop IS NOT NULL"), "Overall")  # every row
    assert changes == {
        "n": (4, 0),
        "n_qty": (3, 0),
        "items": (3, 0),
        "total": (13, None),
        "low": (2, None),
        "mean": (7.0 / 3, None),
    }  # Spark over no row: counts 0, the others null
    ((_, some),) = _changes(store.whatif("Sales", "shop = 's1'"), "Overall")
    assert some == {
        "n": (4, 1),
        "n_qty": (3, 1),
        "items": (3, 1),
        "total": (13, 7),
        "low": (2, 7),
        "mean": (7.0 / 3, 3.0),
    }
    # The same records read as "exact": the row needs a member, so it vanishes.
    exact = _overall(tmp_path, "exact").whatif("Sales", "shop IS NOT NULL")
    assert len(_rows(exact, "Overall", "vanished")) == 1


def test_row_rules_read_every_existence_and_refuse_others() -> None:
    base = {"op": 1, "out_table": 2, "columns": {"c": {"kind": "copy", "references": [[3, "a"], [4, "b"]]}}}
    for existence in ("exact", "opaque", "always_one_row"):
        text = json.dumps([{**base, "existence": existence}])
        (rule,) = parse_rules(text, "x")
        assert rule.existence == existence and parse_rules(rules_text([rule]), "x") == [rule]
    assert rule.columns["c"].copies == {3: "a", 4: "b"}
    old = json.dumps(
        [{"op": 1, "out_table": 2, "existence": "exact", "columns": {"c": {"kind": "copy", "table": 3, "column": "a"}}}]
    )
    assert parse_rules(old, "x")[0].columns["c"].copies == {3: "a"}  # a file written before either
    with pytest.raises(DamagedStoreError, match="unknown existence 'sometimes'"):
        parse_rules(json.dumps([{**base, "existence": "sometimes"}]), "x")


# -- aggregates ---------------------------------------------------------------------
SALES = Table(
    "Sales",
    ("shop", "item", "qty", "price"),
    [("s1", "a", 2, 1.5), ("s1", "b", None, 2.5), ("s1", "a", 4, None), ("s2", "c", 7, 3.0)],
    [pa.string(), pa.string(), pa.int32(), pa.float64()],
)
AGG_COLUMNS: dict[str, tuple[Any, ...]] = {
    "shop": ("copy", "Sales", "shop"),
    "n": ("aggregate", "count_star"),
    "n_qty": ("aggregate", "count", "Sales", "qty"),
    "items": ("aggregate", "count_distinct", "Sales", "item"),
    "total": ("aggregate", "sum", "Sales", "qty"),
    "low": ("aggregate", "min", "Sales", "qty"),
    "high": ("aggregate", "max", "Sales", "qty"),
    "mean": ("aggregate", "avg", "Sales", "price"),
    "label": ("computed", [("Sales", "item")]),
    "one": ("literal",),
}


def _shops(tmp_path: Path) -> Path:
    out = Table(
        "ByShop",
        tuple(AGG_COLUMNS),
        [("s1", 3, 2, 2, 6, 2, 4, 2.0, "a,b", 1), ("s2", 1, 1, 1, 7, 7, 7, 3.0, "c", 1)],
        [
            pa.string(),
            pa.int64(),
            pa.int64(),
            pa.int64(),
            pa.int64(),
            pa.int32(),
            pa.int32(),
            pa.float64(),
            pa.string(),
            pa.int32(),
        ],
    )
    step = Step(
        "agg",
        ["Sales"],
        "ByShop",
        [(0, 0, "Sales", 0), (0, 1, "Sales", 1), (0, 2, "Sales", 2), (1, 0, "Sales", 3)],
        AGG_COLUMNS,
        {"Sales": ["shop"]},
    )
    path = tmp_path / "shops.prov"
    stage(path, [SALES, out], [step])
    return path


def test_aggregates_are_recomputed_with_sparks_null_rules(tmp_path: Path) -> None:
    store = provplug.open(_shops(tmp_path))
    first = store.whatif("Sales", "qty = 2")
    ((values, changes),) = _changes(first, "ByShop")
    assert values["shop"] == "s1"
    assert changes == {
        "n": (3, 2),
        "n_qty": (2, 1),
        "total": (6, 4),
        "low": (2, 4),
        "mean": (2.0, 2.5),
        "label": ("a,b", UNKNOWN),
    }  # items: still a and b; high: still 4
    assert type(changes["total"][1]) is int and type(changes["mean"][1]) is float
    nulls = store.whatif("Sales", "qty IS NOT NULL AND shop = 's1'")  # only the row without qty is left
    ((_, changes),) = _changes(nulls, "ByShop")
    assert changes["n_qty"] == (2, 0) and changes["total"] == (6, None) and changes["low"] == (2, None)
    assert changes["items"] == (2, 1) and changes["mean"] == (2.0, 2.5) and changes["n"] == (3, 1)


def test_a_changed_deciding_cell_makes_existence_unknown(tmp_path: Path) -> None:
    """AvgAge feeds a filter on Age (R3: Age > 32): when NY's average
    changes, whether its row passes cannot be told from deletions."""
    old = Table("Old", ("City", "Age"), [("NY", 35.0), ("LA", 40.0)])
    r3 = Step(
        "R3",
        ["AvgAge"],
        "Old",
        [(0, 0, "AvgAge", 0), (1, 0, "AvgAge", 1)],
        {"City": ("copy", "AvgAge", "City"), "Age": ("copy", "AvgAge", "Age")},
        {"AvgAge": ["Age"]},
    )
    path = tmp_path / "deciding.prov"
    stage(path, [PERSON1, PERSON2, AVGAGE, old], [R1, R2, r3])
    answer = provplug.open(path).whatif("Person1", "Name = 'Mark'")
    effect = answer.table("Old")
    assert effect is not None and [r.values for r in effect.unknown] == [{"City": "NY", "Age": 35.0}]
    assert "AvgAge.Age decides it" in effect.unknown[0].reason
    assert effect.rows_may_appear and effect.untouched == 1
    assert "? City=NY, Age=35.0: AvgAge.Age decides it and changes" in answer.render()


def test_opaque_ops_and_ops_without_row_lineage_say_unknown(tmp_path: Path) -> None:
    top = Table("Top", ("Name",), [("Mark",), ("Steve",)])
    limit = Step(
        "Top2",
        ["Person2"],
        "Top",
        [(0, 0, "Person2", 1), (1, 0, "Person2", 0)],
        {"Name": ("copy", "Person2", "Name")},
        existence="opaque",
        reason="limit",
    )
    after = Table("After", ("Name",), [("Mark",), ("Steve",)])
    blind = Step("Blind", ["Top"], "After", [], {}, row_lineage=False)
    path = tmp_path / "opaque.prov"
    stage(path, [PERSON1, PERSON2, top, after], [R1, limit, blind])
    answer = provplug.open(path).whatif("Person1", "Name = 'Mark'")
    top_effect, after_effect = answer.table("Top"), answer.table("After")
    assert top_effect is not None and [r.values for r in top_effect.unknown] == [{"Name": "Mark"}]
    assert top_effect.rows_may_appear == "Top2: limit" and top_effect.untouched == 1
    assert after_effect is not None and after_effect.every_row_unknown and after_effect.untouched is None
    assert "After (Blind): every row unknown" in answer.render()
    untouched = provplug.open(path).whatif("Person1", "Name = 'Mary'")
    assert [t.table for t in untouched.tables] == ["Person1"]  # filtered out before the limit
