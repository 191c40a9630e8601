"""The rules (provplug_beam.rules): how each transform applied inside a step
propagates provenance — one check per row of the rules' semantics table,
the first ten on one pipeline run (the ``kinds`` fixture), then Beam's own
composites (Count, Top) with type checks on (issue 11)."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import provplug
from provplug import ids
from provplug.testing import StoreContents, expect_lineage, freeze

from .helpers import (
    MORE,
    PEOPLE,
    VISITS,
    WORDS,
    beam,
    capture,
    captured,
    count_words,
    every_cell,
    kv,
    per_element_expected,
    person,
    word,
)


def test_map_is_a_black_box_per_element(kinds: StoreContents) -> None:
    out = [({"Name": p["Name"].upper(), "Decade": p["Age"] // 10}, p) for p in PEOPLE]
    assert kinds.lineage("S_map") == expect_lineage(
        *[("Upper", c, o, every_cell("People", p)) for o, p in out for c in o]
    )
    assert kinds.ops["S_map"]["kind"] == "udf" and kinds.ops["S_map"]["operations"] == ["Map"]


def test_flatmap_is_a_black_box_per_element(kinds: StoreContents) -> None:
    old = [person("Mark"), person("Shane")]
    outs = [({"Part": p["Name"][:2]}, p) for p in old] + [({"Part": p["City"]}, p) for p in old]
    assert kinds.lineage("S_flatmap") == expect_lineage(
        *[("Parts", "Part", o, every_cell("People", p)) for o, p in outs]
    )
    assert kinds.tables["Parts"]["rows"] == 4


def test_pardo_is_a_black_box_per_element(kinds: StoreContents) -> None:
    ny = [p for p in PEOPLE if p["City"] == "NY"]
    outs = [({"Who": p["Name"], "Old": p["Age"] > 25}, p) for p in ny]
    assert kinds.lineage("S_pardo") == expect_lineage(
        *[("NYers", c, o, every_cell("People", p)) for o, p in outs for c in o]
    )


def test_filter_copies_each_cell(kinds: StoreContents) -> None:
    kept = [person("Mark"), person("Shane")]
    assert kinds.lineage("S_filter") == expect_lineage(*[("Old", c, p, [("People", c, p)]) for p in kept for c in p])
    assert kinds.ops["S_filter"]["kind"] == "builtin"


def test_group_by_key_links_key_and_value_cells_of_the_group(kinds: StoreContents) -> None:
    ny = [kv("NY", a) for a in (30, 40, 20)]
    la = [kv("LA", 40)]
    expected = expect_lineage(
        ("Grouped", "key", None, [("Visits", "key", v) for v in ny]),
        ("Grouped", "value", None, [("Visits", "value", v) for v in ny]),
        ("Grouped", "key", None, [("Visits", "key", v) for v in la]),
        ("Grouped", "value", None, [("Visits", "value", v) for v in la]),
    )
    # Grouped values come in Beam's own order: compare without the output row.
    got = collections.Counter((t, c, ps) for t, c, _, ps in kinds.lineage("S_gbk_only").elements())
    assert got == collections.Counter((t, c, ps) for t, c, _, ps in expected.elements())
    # Composed with a MapTuple (black box) and a Filter (copy) in one step.
    sorted_ny = {"key": "NY", "value": [20, 30, 40]}
    assert (
        kinds.lineage("S_gbk")[
            (
                "AgesByCity",
                "value",
                freeze(sorted_ny),
                frozenset(("Visits", c, freeze(v)) for v in ny for c in ("key", "value")),
            )
        ]
        == 1
    )


def test_combine_per_key_links_key_and_aggregated_cells(kinds: StoreContents) -> None:
    ny, la = [kv("NY", a) for a in (30, 40, 20)], [kv("LA", 40)]
    assert kinds.lineage("S_cpk") == expect_lineage(
        ("SumByCity", "key", kv("NY", 90), [("Visits", "key", v) for v in ny]),
        ("SumByCity", "value", kv("NY", 90), [("Visits", "value", v) for v in ny]),
        ("SumByCity", "key", kv("LA", 40), [("Visits", "key", v) for v in la]),
        ("SumByCity", "value", kv("LA", 40), [("Visits", "value", v) for v in la]),
    )


def test_combine_globally_links_every_cell(kinds: StoreContents) -> None:
    ages = [{"value": a} for a in (30, 40, 40, 20)]
    assert kinds.lineage("S_cg") == expect_lineage(
        ("Total", "value", {"value": 130}, [("Ages", "value", a) for a in ages])
    )


def test_co_group_by_key_joins_each_side(kinds: StoreContents) -> None:
    got = kinds.lineage("S_cogbk")
    mark = {"key": "Mark", "emails": sorted(["m@x", "m2@x"]), "phones": ["555"]}
    rows = {r["key"]: r for r in kinds.rows["Contacts"].values()}
    assert set(rows) == {"Steve", "Mark", "Mary"}
    assert sorted(rows["Mark"]["emails"]) == mark["emails"] and rows["Mark"]["phones"] == ["555"]
    by_cell = {(t, c, dict(row)["key"]): ps for t, c, row, ps in got}
    e = [kv("Mark", "m@x"), kv("Mark", "m2@x")]
    assert by_cell[("Contacts", "key", "Mark")] == frozenset(
        [("Emails", "key", freeze(v)) for v in e] + [("Phones", "key", freeze(kv("Mark", "555")))]
    )
    assert by_cell[("Contacts", "emails", "Mark")] == frozenset(("Emails", "value", freeze(v)) for v in e)
    assert by_cell[("Contacts", "phones", "Mark")] == frozenset([("Phones", "value", freeze(kv("Mark", "555")))])
    assert ("Contacts", "phones", "Steve") not in by_cell  # no phone: no parent
    assert by_cell[("Contacts", "emails", "Steve")] == frozenset([("Emails", "value", freeze(kv("Steve", "s@x")))])
    assert len(got) == 7  # key x3, emails x2, phones x2


def test_flatten_is_a_union(kinds: StoreContents) -> None:
    expected = [("Everyone", c, p, [("People", c, p)]) for p in PEOPLE for c in p]
    expected += [("Everyone", c, MORE[0], [("More", c, MORE[0])]) for c in MORE[0]]
    assert kinds.lineage("S_flatten") == expect_lineage(*expected)
    assert sorted(kinds.ops["S_flatten"]["inputs"]) == sorted(
        [kinds.tables["People"]["table_id"], kinds.tables["More"]["table_id"]]
    )


def test_distinct_merges_equal_elements(kinds: StoreContents) -> None:
    assert kinds.lineage("S_distinct") == expect_lineage(
        ("UniqueCities", "City", {"City": "NY"}, [("Cities", "City", {"City": "NY"})]),
        ("UniqueCities", "City", {"City": "LA"}, [("Cities", "City", {"City": "LA"})]),
    )
    # Both NY rows of Cities are parents of the one NY row.
    ny = kinds.tables["UniqueCities"]
    assert ny["rows"] == 2
    srcs = {ids.unpack(t["src"])[2] for t in kinds.triples if kinds.cell(t["dst"])[0] == "UniqueCities"}
    assert srcs == {0, 1, 2}


# -- Select (a field name copies, a callable is a black box), on a PCollection source -----
@provplug.step("S_select", output="Named")
def s_select(people: Any) -> Any:
    return people | beam.Select("Name", Older=lambda p: p.Age + 1)


def test_pcollection_source_and_select(tmp_path: Path) -> None:
    rows = [beam.Row(**p) for p in PEOPLE]
    pipeline = beam.Pipeline()
    with provplug.capture(pipeline, store=tmp_path / "s.prov") as run:
        s_select(run.source(pipeline | beam.Create(rows[::-1]), "People"))
    got = captured(tmp_path / "s.prov")
    assert sorted(got.rows["People"]) == [0, 1, 2, 3]  # numbered by content, all rows
    expected = []
    for p in PEOPLE:
        out = {"Name": p["Name"], "Older": p["Age"] + 1}
        expected += [("Named", "Name", out, [("People", "Name", p)]), ("Named", "Older", out, every_cell("People", p))]
    assert got.lineage("S_select") == expect_lineage(*expected)
    assert got.ops["S_select"]["kind"] == "udf"


# -- Beam's composites, with type checks on (issue 11) ----------------------------------
def test_count_per_element(tmp_path: Path) -> None:
    got = capture(tmp_path / "s.prov", lambda run: count_words(run.source(WORDS, "Words")))
    assert got.lineage() == per_element_expected("WordCounts", "Words", WORDS)
    assert len(got.triples) == 8
    assert got.ops["CountWords"]["operations"] == ["Map", "CombinePerKey"]


@provplug.step("CountAll", output="Total")
def count_all(words: Any) -> Any:
    return words | beam.combiners.Count.Globally()


def test_count_globally(tmp_path: Path) -> None:
    got = capture(tmp_path / "s.prov", lambda run: count_all(run.source(WORDS, "Words")))
    assert got.lineage() == expect_lineage(
        ("Total", "value", {"value": 4}, [("Words", "value", word(w)) for w in WORDS])
    )


@provplug.step("TopTwo", output="Top")
def top_two(numbers: Any) -> Any:
    return numbers | beam.combiners.Top.Of(2)


def test_top_of(tmp_path: Path) -> None:
    numbers = [3, 1, 4, 1, 5]
    got = capture(tmp_path / "s.prov", lambda run: top_two(run.source(numbers, "Numbers")))
    # An aggregate: the list of the two largest <- every input cell.
    assert got.lineage() == expect_lineage(
        ("Top", "value", {"value": [5, 4]}, [("Numbers", "value", {"value": n}) for n in numbers])
    )
    assert got.ops["TopTwo"]["operations"] == ["Top.Of"]


class CityKey:
    """A key type with its own coder (no pickling, deterministic)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CityKey) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"CityKey({self.name!r})"

    def __str__(self) -> str:
        return self.name


class CityKeyCoder(beam.coders.Coder):  # type: ignore[misc]
    def encode(self, value: CityKey) -> bytes:
        return value.name.encode()

    def decode(self, encoded: bytes) -> CityKey:
        return CityKey(encoded.decode())

    def is_deterministic(self) -> bool:
        return True


@provplug.step("SumPerCity", output="CitySums")
def sum_per_city(visits: Any) -> Any:
    return visits | beam.CombinePerKey(sum)


def test_combine_per_key_keeps_a_registered_key_coder(tmp_path: Path) -> None:
    beam.coders.registry.register_coder(CityKey, CityKeyCoder)
    visits = [(CityKey(c), a) for c, a in VISITS]
    got = capture(tmp_path / "s.prov", lambda run: sum_per_city(run.source(visits, "Visits")))
    ny, la = [kv("NY", a) for a in (30, 40, 20)], [kv("LA", 40)]
    assert got.lineage() == expect_lineage(
        ("CitySums", "key", kv("NY", 90), [("Visits", "key", v) for v in ny]),
        ("CitySums", "value", kv("NY", 90), [("Visits", "value", v) for v in ny]),
        ("CitySums", "key", kv("LA", 40), [("Visits", "key", v) for v in la]),
        ("CitySums", "value", kv("LA", 40), [("Visits", "value", v) for v in la]),
    )
