"""Row lineage of Beam steps (docs/capture-semantics.md, :mod:`provplug.ingest.rowlineage`) and
user composites as modules (zoom), on one pipeline run.

Expectations are derived by hand from the inputs below. Beam numbers step
outputs by content, so records are compared by row content: per output row,
its members, each a set of (input table, input row content). A Beam step
uses no two rows jointly (no join primitive: ``CoGroupByKey`` emits one row
per key, alive while any element of any side has it), so every member is
one row; a merging step (combine, distinct, cogroup) has one member per
merged element, any other step one member.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest
from apache_beam.transforms.combiners import MeanCombineFn

import provplug
from provplug.ingest import rowlineage
from provplug.rowrules import ColumnRule, OpRowRules
from provplug.testing import freeze

from .helpers import EMAILS, MORE, PEOPLE, PHONES, VISITS, beam, captured, person

CITIES = [{"City": "NY"}, {"City": "LA"}, {"City": "NY"}]
PERSON1 = [beam.Row(**p) for p in PEOPLE]


@provplug.step("R_map", output="Upper")
def r_map(people: Any) -> Any:
    return people | beam.Map(lambda p: {"Name": p["Name"].upper(), "Decade": p["Age"] // 10})


@provplug.step("R_filter", output="Old")
def r_filter(people: Any) -> Any:
    return people | beam.Filter(lambda p: p["Age"] >= 40)


@provplug.step("R_flatmap", output="Parts")
def r_flatmap(people: Any) -> Any:
    return people | beam.FlatMap(lambda p: [{"Part": p["Name"][:2]}, {"Part": p["City"]}] if p["Age"] > 35 else [])


@provplug.step("R_cogroup", output="Contacts")
def r_cogroup(emails: Any, phones: Any) -> Any:
    # Sorted lists (a Map, one row per row) so rows compare by content.
    return (
        {"emails": emails, "phones": phones}
        | beam.CoGroupByKey()
        | beam.Map(lambda kv: {"key": kv[0], "emails": sorted(kv[1]["emails"]), "phones": sorted(kv[1]["phones"])})
    )


@provplug.step("R_join", output="EmailPhone")
def r_join(emails: Any, phones: Any) -> Any:
    return (
        {"emails": emails, "phones": phones}
        | beam.CoGroupByKey()
        | beam.FlatMap(lambda kv: [(e, p) for e in kv[1]["emails"] for p in kv[1]["phones"]])
    )


@provplug.step("R_sum", output="SumByCity")
def r_sum(visits: Any) -> Any:
    return visits | beam.CombinePerKey(sum)


@provplug.step("R_count", output="CountByCity")
def r_count(visits: Any) -> Any:
    return visits | beam.combiners.Count.PerKey()


@provplug.step("R_mean", output="MeanByCity")
def r_mean(visits: Any) -> Any:
    return visits | beam.combiners.Mean.PerKey()


@provplug.step("R_distinct", output="UniqueCities")
def r_distinct(cities: Any) -> Any:
    return cities | beam.Distinct()


@provplug.step("R_union", output="Everyone")
def r_union(people: Any, more: Any) -> Any:
    return (people, more) | beam.Flatten()


@provplug.step("R1", output="Person2")
def adults(people: Any) -> Any:
    return people | beam.Filter(lambda p: p.Age >= 25)


@provplug.step("R2", output="AvgAge")
def average_age(people: Any) -> Any:
    return people | beam.GroupBy("City").aggregate_field("Age", MeanCombineFn(), "Age")


class Prepare(beam.PTransform):  # type: ignore[misc]
    """A user's composite around two steps, not marked as a module."""

    def expand(self, people: Any) -> Any:
        return average_age(adults(people))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("beam") / "rows.prov"
    pipeline = beam.Pipeline()
    with provplug.capture(pipeline, store=path) as run:
        people = run.source(PEOPLE, "People")
        emails, phones = run.source(EMAILS, "Emails"), run.source(PHONES, "Phones")
        visits = run.source(VISITS, "Visits")
        r_map(people), r_filter(people), r_flatmap(people)
        r_cogroup(emails, phones), r_join(emails, phones)
        r_sum(visits), r_count(visits), r_mean(visits)
        r_distinct(run.source(CITIES, "Cities"))
        r_union(people, run.source(MORE, "More"))
        _ = run.source(PERSON1, "Person1") | "Prepare" >> Prepare()
    return path


class Rows:
    """The run read back: row lineage by content, rules by names."""

    def __init__(self, path: Path) -> None:
        self.got = captured(path)
        self.rules = rowlineage.rules_of(self.got.store)
        dataset = rowlineage.lineage_of(self.got.store)
        assert dataset is not None
        self.records = dataset.to_table().to_pylist()

    def table_id(self, name: str) -> int:
        return int(self.got.tables[name]["table_id"])

    def lineage(self, op: str) -> collections.Counter:
        """Per output row of ``op``: (table, row content, its members), counted."""
        op_id = self.got.ops[op]["op_id"]
        members: dict[tuple[int, int], dict[int, set[tuple[str, Any]]]] = collections.defaultdict(dict)
        for r in self.records:
            if r["op"] != op_id:
                continue
            assert r["optional"] is False
            name = self.got.by_id[r["in_table"]]["name"]
            row = (name, freeze(self.got.rows_by_id[r["in_table"]][r["in_row"]]))
            members[(r["out_table"], r["out_row"])].setdefault(r["member"], set()).add(row)
        for out, numbered in members.items():
            assert sorted(numbered) == list(range(len(numbered))), f"members of {out} numbered 0..n-1"
        outputs = self.got.ops[op]["outputs"]
        every_row = {(t, n) for t in outputs for n in self.got.rows_by_id[t]}
        assert set(members) == every_row, f"{op}: every output row has its members"
        return collections.Counter(
            (self.got.by_id[t]["name"], freeze(self.got.rows_by_id[t][n]), frozenset(frozenset(m) for m in ms.values()))
            for (t, n), ms in members.items()
        )

    def rule(self, op: str) -> OpRowRules:
        (table,) = self.got.ops[op]["outputs"]
        return self.rules[table]


@pytest.fixture(scope="module")
def rows(store: Path) -> Rows:
    return Rows(store)


def expect(table: str, *rows: tuple[Any, list[list[tuple[str, Any]]]]) -> collections.Counter:
    """(out row, members as lists of (table, row)) per output row."""
    return collections.Counter(
        (table, freeze(out), frozenset(frozenset((t, freeze(r)) for t, r in m) for m in members))
        for out, members in rows
    )


def copy(table: int, *columns: str) -> dict[str, ColumnRule]:
    return {c: ColumnRule("copy", table, c) for c in columns}


def computed(*refs: tuple[int, str]) -> ColumnRule:
    return ColumnRule("computed", references=tuple(sorted(refs)))


PEOPLE_COLUMNS = ("Name", "City", "Age")


def test_map_one_row_per_row_exact(rows: Rows) -> None:
    people = rows.table_id("People")
    assert rows.lineage("R_map") == expect(
        "Upper", *[({"Name": p["Name"].upper(), "Decade": p["Age"] // 10}, [[("People", p)]]) for p in PEOPLE]
    )
    every = computed(*[(people, c) for c in PEOPLE_COLUMNS])
    assert rows.rule("R_map") == OpRowRules(
        rows.got.ops["R_map"]["op_id"], rows.table_id("Upper"), "exact", {"Name": every, "Decade": every}
    )


def test_filter_keeps_rows_decided_by_every_column_it_sees(rows: Rows) -> None:
    people = rows.table_id("People")
    kept = [person("Mark"), person("Shane")]
    assert rows.lineage("R_filter") == expect("Old", *[(p, [[("People", p)]]) for p in kept])
    assert rows.rule("R_filter") == OpRowRules(
        rows.got.ops["R_filter"]["op_id"],
        rows.table_id("Old"),
        "exact",
        copy(people, *PEOPLE_COLUMNS),
        {people: tuple(sorted(PEOPLE_COLUMNS))},
    )


def test_flatmap_rows_come_from_one_row_but_existence_is_opaque(rows: Rows) -> None:
    people = rows.table_id("People")
    old = [person("Mark"), person("Shane")]
    assert rows.lineage("R_flatmap") == expect(
        "Parts", *[(out, [[("People", p)]]) for p in old for out in ({"Part": p["Name"][:2]}, {"Part": p["City"]})]
    )
    rule = rows.rule("R_flatmap")
    assert rule.existence == "opaque" and rule.reason.startswith("FlatMap")
    assert rule.columns == {"Part": computed(*[(people, c) for c in PEOPLE_COLUMNS])}


def test_cogroup_row_lives_while_any_element_of_either_side_does(rows: Rows) -> None:
    emails, phones = rows.table_id("Emails"), rows.table_id("Phones")
    e = {k: [("Emails", {"key": n, "value": v}) for n, v in EMAILS if n == k] for k in ("Steve", "Mark", "Mary")}
    p = {k: [("Phones", {"key": n, "value": v}) for n, v in PHONES if n == k] for k in ("Steve", "Mark", "Mary")}
    assert rows.lineage("R_cogroup") == expect(
        "Contacts",
        ({"key": "Steve", "emails": ["s@x"], "phones": []}, [[r] for r in e["Steve"]]),
        ({"key": "Mark", "emails": ["m2@x", "m@x"], "phones": ["555"]}, [[r] for r in e["Mark"] + p["Mark"]]),
        ({"key": "Mary", "emails": [], "phones": ["777"]}, [[r] for r in p["Mary"]]),
    )
    # After the cogroup a Map (one row per row, a black box): every column computed.
    every = computed((emails, "key"), (emails, "value"), (phones, "key"), (phones, "value"))
    assert rows.rule("R_cogroup") == OpRowRules(
        rows.got.ops["R_cogroup"]["op_id"],
        rows.table_id("Contacts"),
        "exact",
        {"key": every, "emails": every, "phones": every},
        {emails: ("key",), phones: ("key",)},
    )


def test_a_cogroup_based_join_is_opaque(rows: Rows) -> None:
    # The FlatMap after the cogroup picks pairs unseen: each output's members
    # are the whole key's group, and its existence is opaque.
    mark = [[("Emails", {"key": "Mark", "value": v})] for v in ("m@x", "m2@x")] + [
        [("Phones", {"key": "Mark", "value": "555"})]
    ]
    assert rows.lineage("R_join") == expect(
        "EmailPhone", ({"key": "m@x", "value": "555"}, mark), ({"key": "m2@x", "value": "555"}, mark)
    )
    assert rows.rule("R_join").existence == "opaque"


def test_combine_per_key_members_and_aggregates(rows: Rows) -> None:
    visits = rows.table_id("Visits")
    members = {c: [[("Visits", {"key": k, "value": v})] for k, v in VISITS if k == c] for c in ("NY", "LA")}
    for op, table, values, function in (
        ("R_sum", "SumByCity", {"NY": 90, "LA": 40}, "sum"),
        ("R_count", "CountByCity", {"NY": 3, "LA": 1}, "count_star"),
        ("R_mean", "MeanByCity", {"NY": 30.0, "LA": 40.0}, "avg"),
    ):
        assert rows.lineage(op) == expect(table, *[({"key": c, "value": v}, members[c]) for c, v in values.items()])
        value = (
            ColumnRule("aggregate", function="count_star")
            if function == "count_star"
            else ColumnRule("aggregate", visits, "value", function)
        )
        assert rows.rule(op) == OpRowRules(
            rows.got.ops[op]["op_id"],
            rows.table_id(table),
            "exact",
            {**copy(visits, "key"), "value": value},
            {visits: ("key",)},
        ), op


def test_distinct_merges_equal_rows(rows: Rows) -> None:
    cities = rows.table_id("Cities")
    ny, la = {"City": "NY"}, {"City": "LA"}
    assert rows.lineage("R_distinct") == expect(
        "UniqueCities", (ny, [[("Cities", ny)], [("Cities", ny)]]), (la, [[("Cities", la)]])
    )
    assert rows.rule("R_distinct") == OpRowRules(
        rows.got.ops["R_distinct"]["op_id"],
        rows.table_id("UniqueCities"),
        "exact",
        copy(cities, "City"),
        {cities: ("City",)},
    )


def test_flatten_keeps_each_row_with_its_one_member(rows: Rows) -> None:
    people, more = rows.table_id("People"), rows.table_id("More")
    assert rows.lineage("R_union") == expect(
        "Everyone", *[(p, [[("People", p)]]) for p in PEOPLE], *[(p, [[("More", p)]]) for p in MORE]
    )
    # A union column copies the cell of its row's own table (a copy per table).
    assert rows.rule("R_union") == OpRowRules(
        rows.got.ops["R_union"]["op_id"],
        rows.table_id("Everyone"),
        "exact",
        {c: ColumnRule("copy", references=tuple(sorted([(people, c), (more, c)]))) for c in PEOPLE_COLUMNS},
    )


def test_groupby_aggregate_field_inside_a_composite(rows: Rows) -> None:
    person1, person2 = rows.table_id("Person1"), rows.table_id("Person2")
    adults_rows = [person(n) for n in ("Steve", "Mark", "Shane")]
    assert rows.lineage("R1") == expect("Person2", *[(p, [[("Person1", p)]]) for p in adults_rows])
    assert rows.lineage("R2") == expect(
        "AvgAge",
        ({"City": "NY", "Age": 35.0}, [[("Person2", person("Steve"))], [("Person2", person("Mark"))]]),
        ({"City": "LA", "Age": 40.0}, [[("Person2", person("Shane"))]]),
    )
    assert rows.rule("R2") == OpRowRules(
        rows.got.ops["R2"]["op_id"],
        rows.table_id("AvgAge"),
        "exact",
        {"City": ColumnRule("copy", person2, "City"), "Age": ColumnRule("aggregate", person2, "Age", "avg")},
        {person2: ("City",)},
    )
    assert rows.rule("R1").deciding == {person1: tuple(sorted(PEOPLE_COLUMNS))}


def test_an_unmarked_composite_is_a_module_of_its_steps(store: Path, rows: Rows) -> None:
    params = {name: json.loads(op["params"] or "{}") for name, op in rows.got.ops.items()}
    assert params["R1"] == params["R2"] == {"module": "Prepare"}
    assert all("module" not in p for name, p in params.items() if name not in ("R1", "R2"))
    assert rows.got.ops["R1"]["inputs"] == [rows.table_id("Person1")]  # the composite saw the captured table


def test_zoom_out_of_a_composite(store: Path, cli: Any) -> None:
    from provplug.index.build import build_index
    from provplug.store.open import open_store

    build_index(open_store(str(store)), engine="local")
    target = ("lineage", store, "AvgAge.Age", "--where", "City = 'NY'")
    fine = json.loads(cli(*target, "--json").out)
    assert {c["table"] for c in fine["lineage"]} == {"Person1", "Person2"}
    zoomed = cli(*target, "--zoom-out", "Prepare", "--json")
    assert zoomed.code == 0, zoomed
    coarse = json.loads(zoomed.out)
    assert {(c["table"], c["value"]) for c in coarse["lineage"]} == {("Person1", 30), ("Person1", 40)}
    assert {e["op"] for e in coarse["edges"]} == {"Prepare"}


# -- composites with transforms between steps, global combines, side inputs ----------------
@provplug.step("Keep", output="Kept")
def keep(people: Any) -> Any:
    return people | beam.Filter(lambda p: p["City"] == "NY")


@provplug.step("Ages", output="AgeSum")
def ages(pairs: Any) -> Any:
    return pairs | beam.CombinePerKey(sum)


class Inner(beam.PTransform):  # type: ignore[misc]
    def expand(self, people: Any) -> Any:
        # Plain transforms before and between the steps join their ops.
        kept = keep(people | "Adults" >> beam.Filter(lambda p: p["Age"] >= 25))
        return ages(kept | "Pair" >> beam.Map(lambda p: (p["City"], p["Age"])))


class Outer(beam.PTransform):  # type: ignore[misc]
    def expand(self, people: Any) -> Any:
        return people | "Inner" >> Inner()


@provplug.step("Total", output="TotalAge")
def total(values: Any) -> Any:
    return values | beam.CombineGlobally(sum)


@provplug.step("CountAll", output="AgeCount")
def count_all(values: Any) -> Any:
    return values | beam.CombineGlobally(beam.combiners.CountCombineFn())


@provplug.step("TotalOrNothing", output="TotalAgeOrNothing")
def total_or_nothing(values: Any) -> Any:
    return values | beam.CombineGlobally(sum).without_defaults()


@provplug.step("AboveAverage", output="Above")
def above_average(people: Any, ages: Any) -> Any:
    mean = ages | beam.combiners.Mean.Globally()
    return people | beam.Filter(lambda p, m: p["Age"] > m, beam.pvalue.AsSingleton(mean))


def test_nested_composites_global_combines_and_side_inputs(tmp_path: Path) -> None:
    path = tmp_path / "more.prov"
    with provplug.capture(beam.Pipeline(), store=path) as run:
        people = run.source(PEOPLE, "People")
        _ = people | "Outer" >> Outer()
        ages_table = run.source([30, 40, 40, 20], "AgeList")
        total(ages_table), total_or_nothing(ages_table), count_all(ages_table)
        above_average(people, ages_table)
    got = Rows(path)
    params = {name: json.loads(op["params"] or "{}") for name, op in got.got.ops.items()}
    assert params["Keep"] == params["Ages"] == {"module": "Outer.Inner"}
    assert got.got.ops["Keep"]["operations"] == ["Filter", "Filter"]
    assert got.got.ops["Ages"]["operations"] == ["Map", "CombinePerKey"]
    # NY adults: Steve 30, Mark 40 -> one row (NY, 70) with both as members.
    assert got.lineage("Ages") == expect(
        "AgeSum", ({"key": "NY", "value": 70}, [[("Kept", person("Steve"))], [("Kept", person("Mark"))]])
    )
    kept = got.table_id("Kept")
    # The Map made the pairs: the sum is of computed values, not of a column.
    every = computed(*[(kept, c) for c in PEOPLE_COLUMNS])
    assert got.rule("Ages").columns == {"key": every, "value": every} and got.rule("Ages").existence == "exact"

    age_list = got.table_id("AgeList")
    members = [[("AgeList", {"value": a})] for a in (30, 40, 40, 20)]
    assert got.lineage("Total") == expect("TotalAge", ({"value": 130}, members))
    # With defaults the row exists with no member left: not derivable.
    assert got.rule("Total").existence == "opaque" and "default" in got.rule("Total").reason
    # A count's default (0 with no member left) is what what-if recomputes: one row always.
    assert got.rule("CountAll") == OpRowRules(
        got.got.ops["CountAll"]["op_id"],
        got.table_id("AgeCount"),
        "always_one_row",
        {"value": ColumnRule("aggregate", function="count_star")},
    )
    assert got.lineage("CountAll") == expect("AgeCount", ({"value": 4}, members))
    (counted,) = provplug.open(path).whatif("AgeList", "value IS NOT NULL").table("AgeCount").changed  # type: ignore[union-attr]
    assert counted.changes == {"value": (4, 0)}  # as Beam re-run on no row: the default 0
    assert got.rule("TotalOrNothing") == OpRowRules(
        got.got.ops["TotalOrNothing"]["op_id"],
        got.table_id("TotalAgeOrNothing"),
        "exact",
        {"value": ColumnRule("aggregate", age_list, "value", "sum")},
    )
    # The mean arrives as a side input: its rows are no member, so existence is opaque.
    assert got.lineage("AboveAverage") == expect(
        "Above", *[(person(n), [[("People", person(n))]]) for n in ("Mark", "Shane")]
    )
    assert got.rule("AboveAverage").existence == "opaque" and "side input" in got.rule("AboveAverage").reason
