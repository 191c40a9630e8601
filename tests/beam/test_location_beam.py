"""Location lineage on Beam (issue 15, docs/capture-semantics.md): a step declared with
``rates=`` whose body is one ParDo stores one location edge instead of its
triples, its output numbered by position, and nothing a reader sees changes.

One pipeline mixes declared steps (a 1:1 ``Map``, a fan-out-2 ``FlatMap``,
a ``ParDo(DoFn)`` over a table numbered by content, a ``MapTuple``, a
declared step over a declared step's output) with undeclared ones (a
``Filter``, a combine over a declared output); it is captured with location
lineage on and off. The two stores number the declared outputs differently
(by position vs by content), so they are compared through labels: (table,
column, the row's content).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug import ids
from provplug.errors import LocationError
from provplug.location import LocationEdge, RowRuns, expand
from provplug.store.locations import LOCATIONS, locations_of
from provplug.store.open import open_store
from provplug.testing import StoreContents, content, expect_lineage

from .helpers import PEOPLE, VISITS, beam, every_cell, person

DECLARED = {"Shout": 1, "Halves": 2, "Tagged": 2, "Again": 1, "Initials": 1}  # step -> declared production


def shout_of(p: dict[str, Any]) -> dict[str, Any]:
    return {"Name": p["Name"].upper(), "Decade": p["Age"] // 10}


def halves_of(p: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"Who": p["Name"], "Part": p["Name"][:2]}, {"Who": p["Name"], "Part": p["City"]}]


class TagFn(beam.DoFn):  # type: ignore[misc]
    def process(self, p):  # type: ignore[no-untyped-def]
        yield {"Who": p["Name"], "Tag": "old"}
        yield {"Who": p["Name"], "Tag": p["City"].lower()}


@provplug.step("Shout", output="Upper", rates={"production": 1})
def shout(people: Any) -> Any:
    return people | beam.Map(shout_of)


@provplug.step("Halves", output="Parts", rates={"consumption": 1, "production": 2})
def halves(people: Any) -> Any:
    return people | beam.FlatMap(halves_of)


@provplug.step("Old", output="Old")
def old(people: Any) -> Any:
    return people | beam.Filter(lambda p: p["Age"] >= 30)


@provplug.step("Tagged", output="Tags", rates={"production": 2})
def tagged(people: Any) -> Any:
    return people | beam.ParDo(TagFn())


@provplug.step("Again", output="Plus", rates={"production": 1})
def again(visits: Any) -> Any:
    return visits | beam.MapTuple(lambda city, age: {"City": city, "Later": age + 10})


@provplug.step("Initials", output="Initials", rates={"production": 1})
def initials(upper: Any) -> Any:
    return upper | beam.Map(lambda u: {"Initial": u["Name"][0], "Decade": u["Decade"]})


@provplug.step("ByDecade", output="Decades")
def by_decade(upper: Any) -> Any:
    return upper | beam.Map(lambda u: (u["Decade"], 1)) | beam.CombinePerKey(sum)


def _capture(store: Path, on: bool) -> None:
    with beam.Pipeline() as pipeline, provplug.capture(pipeline, store=store, location_lineage=on) as run:
        people = run.source(PEOPLE, "People")
        upper = shout(people)
        halves(people)
        tagged(old(people))
        again(run.source(VISITS, "Visits"))
        initials(upper)
        by_decade(upper)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    on, off = tmp_path_factory.mktemp("loc") / "on.prov", tmp_path_factory.mktemp("loc") / "off.prov"
    _capture(on, True)
    _capture(off, False)
    return on, off


def _edges(path: Path) -> dict[str, LocationEdge]:
    store = open_store(path)
    names = {o["op_id"]: o["name"] for o in store.ops().to_pylist()}
    return {names[e.op]: e for e in locations_of(store)}


# -- what is stored ----------------------------------------------------------------
def test_declared_steps_store_an_edge_and_no_triples(stores: tuple[Path, Path]) -> None:
    on, off = open_store(stores[0]), open_store(stores[1])
    edges = _edges(stores[0])
    assert set(edges) == set(DECLARED)
    ops = {o["name"]: o["op_id"] for o in on.ops().to_pylist()}
    stored_ops = set(on.stored_triples().to_table().column("op").to_pylist())
    assert stored_ops == {ops["Old"], ops["ByDecade"]}  # the undeclared steps alone keep their triples
    for name, edge in edges.items():
        assert (edge.rates.consumption, edge.rates.production, edge.rates.buffer) == (1, DECLARED[name], None)
        assert (edge.src_rows is None) == (DECLARED[name] == 1)  # 1:1: aligned, output row r is input row r
    tables = {t["name"]: t["table_id"] for t in on.tables().to_pylist()}
    halves_edge = edges["Halves"]
    assert (halves_edge.src_table, halves_edge.dst_table) == (tables["People"], tables["Parts"])
    # The black box: Who and Part each <- Name, City and Age.
    assert halves_edge.columns == ((0, (0, 1, 2)), (1, (0, 1, 2)))
    assert halves_edge.src_rows == RowRuns.of([(0, 4)]) and halves_edge.dst_rows == RowRuns.of([(0, 8)])
    assert edges["Again"].columns == ((0, (0, 1)), (1, (0, 1)))  # City, Later <- key, value
    # With location lineage off, nothing changes: no edge, every step's triples stored.
    assert locations_of(off) == [] and not list(stores[1].glob(f"runs/*/{LOCATIONS}"))
    assert set(off.triples().to_table().column("op").to_pylist()) == set(ops.values())
    # The store's one scan holds every triple, whatever it is stored as: the same with the edges as without.
    every = on.triples()
    assert set(every.to_table().column("op").to_pylist()) == set(ops.values())
    assert every.count_rows() == every.to_table().num_rows == off.triples().count_rows()
    assert every.count_rows() > on.stored_triples().count_rows()


def test_declared_outputs_are_numbered_by_position(stores: tuple[Path, Path]) -> None:
    rows = StoreContents(stores[0]).rows
    assert rows["People"] == dict(enumerate(PEOPLE))
    assert rows["Upper"] == {r: shout_of(p) for r, p in enumerate(PEOPLE)}  # row r <- input row r
    assert rows["Parts"] == {2 * r + j: half for r, p in enumerate(PEOPLE) for j, half in enumerate(halves_of(p))}
    # Old is numbered by content; Tags by position over Old's own numbers.
    assert sorted(p["Name"] for p in rows["Old"].values()) == ["Mark", "Shane", "Steve"]
    assert rows["Tags"] == {2 * r + j: tag for r, p in rows["Old"].items() for j, tag in enumerate(TagFn().process(p))}
    assert rows["Plus"] == {r: {"City": city, "Later": age + 10} for r, (city, age) in enumerate(VISITS)}
    assert rows["Initials"] == {r: {"Initial": u["Name"][0], "Decade": u["Decade"]} for r, u in rows["Upper"].items()}
    # Row lineage is kept and agrees with the numbering: output row r·f + j has the one member r.
    from provplug.ingest.rowlineage import lineage_of

    store = open_store(stores[0])
    tables = {t["name"]: t["table_id"] for t in store.tables().to_pylist()}
    dataset = lineage_of(store)
    assert dataset is not None
    records = dataset.to_table().to_pylist()
    for name, fan_out in (("Parts", 2), ("Tags", 2), ("Upper", 1)):
        got = {(r["out_row"], r["in_row"]) for r in records if r["out_table"] == tables[name]}
        assert got == {(out, out // fan_out) for out in rows[name]}, name


def test_edges_stand_for_the_black_box_triples(stores: tuple[Path, Path]) -> None:
    on, off = StoreContents(stores[0]), StoreContents(stores[1])  # triples: the stored ones plus the edges' (expanded)
    # Hand-derived: each cell of Upper and Parts <- every cell of its person.
    upper = [("Upper", c, shout_of(p), every_cell("People", p)) for p in PEOPLE for c in ("Name", "Decade")]
    assert on.lineage("Shout") == expect_lineage(*upper)
    parts = [
        ("Parts", c, half, every_cell("People", p)) for p in PEOPLE for half in halves_of(p) for c in ("Who", "Part")
    ]
    assert on.lineage("Halves") == expect_lineage(*parts)
    steve = person("Steve")
    assert (
        on.lineage("Tagged")[
            (
                "Tags",
                "Tag",
                (("Tag", "ny"), ("Who", "Steve")),
                frozenset(("Old", c, tuple(sorted(steve.items()))) for c in steve),
            )
        ]
        == 1
    )
    for name in (*DECLARED, "Old", "ByDecade"):
        assert on.lineage(name) == off.lineage(name), name
    # expand(edge) gives exactly the op's count of triples, each once.
    counts = {o["name"]: o["triples"] for o in on.store.ops().to_pylist()}
    for name, edge in _edges(stores[0]).items():
        pairs = [
            (s, d)
            for b in expand([edge])
            for s, d in zip(b.column("src").to_pylist(), b.column("dst").to_pylist(), strict=True)
        ]
        assert len(pairs) == len(set(pairs)) == edge.triple_count == counts[name], name


def test_catalogue_and_manifest_counts_agree_on_and_off(stores: tuple[Path, Path]) -> None:
    on, off = open_store(stores[0]), open_store(stores[1])
    assert {o["name"]: o["triples"] for o in on.ops().to_pylist()} == {
        o["name"]: o["triples"] for o in off.ops().to_pylist()
    }
    assert {t["name"]: t["rows"] for t in on.tables().to_pylist()} == {
        t["name"]: t["rows"] for t in off.tables().to_pylist()
    }
    manifest, plain = (json.loads(next(path.glob("runs/*/_manifest.json")).read_text()) for path in stores)
    assert LOCATIONS in manifest["datasets"] and LOCATIONS not in plain["datasets"]
    counts = manifest["counts"]
    assert counts["location_edges"] == len(DECLARED) and counts["location_triples"] > counts["triples"] > 0
    assert counts["triples"] + counts["location_triples"] == plain["counts"]["triples"]
    (op,) = [o for o in on.ops().to_pylist() if o["name"] == "Halves"]
    assert json.loads(op["params"])["rates"]["production"] == 2  # the declaration is recorded with the op


@provplug.step("Known", output="Known", rates={"production": 1})
def known(people: Any, cities: Any) -> Any:
    return people | beam.Map(
        lambda p, seen: {"Name": p["Name"], "Known": p["City"] in seen}, beam.pvalue.AsList(cities)
    )


def test_a_declared_map_with_a_captured_side_input_in_a_typed_pipeline(tmp_path: Path) -> None:
    """Side-input cells are no parents (as without the declaration); Beam's type checks stay on."""
    from .helpers import CITIES, typed_pipeline

    stores = tmp_path / "on.prov", tmp_path / "off.prov"
    for store, on in zip(stores, (True, False), strict=True):
        with provplug.capture(typed_pipeline(), store=store, location_lineage=on) as run:
            known(run.source(PEOPLE, "People"), run.source(CITIES, "Cities") | beam.Map(lambda c: c["City"]))
    (edge,) = _edges(stores[0]).values()
    assert edge.columns == ((0, (0, 1, 2)), (1, (0, 1, 2)))
    expected = [
        ("Known", c, {"Name": p["Name"], "Known": p["City"] in ("NY", "LA")}, every_cell("People", p))
        for p in PEOPLE
        for c in ("Name", "Known")
    ]
    assert StoreContents(stores[0]).lineage() == StoreContents(stores[1]).lineage() == expect_lineage(*expected)


# -- every answer the same, on and off ------------------------------------------------
def _answers(path: Path) -> collections.Counter[tuple[Any, ...]]:
    """Every lineage answer of every cell of every table, by method and
    direction, in content labels (counted: labels need not be unique)."""
    read = StoreContents(path)
    store = provplug.open(path)
    answers: collections.Counter[tuple[Any, ...]] = collections.Counter()
    for table_id, rows in read.rows_by_id.items():
        for row in rows:
            for column in range(len(read.by_id[table_id]["columns"])):
                vid = ids.value_id(table_id, column, row)
                for method in ("rq", "ccprov", "csprov"):
                    for direction in ("up", "down"):
                        answer = store.lineage(vid, method=method, direction=direction)
                        answers[
                            (
                                read.label(vid, content),
                                method,
                                direction,
                                frozenset(read.label(r["value_id"], content) for r in answer.lineage),
                                frozenset(
                                    (read.label(e["src"], content), read.label(e["dst"], content), e["op"])
                                    for e in answer.edges
                                ),
                            )
                        ] += 1
    return answers


def test_every_answer_and_the_index_are_the_same_on_and_off(stores: tuple[Path, Path]) -> None:
    from provplug.index import build_index

    metas = [build_index(open_store(path), engine="local") for path in stores]
    assert metas[0]["counts"] == metas[1]["counts"]  # components, sets, set dependencies, triples, ...
    assert metas[0]["workflow"] == metas[1]["workflow"]
    on, off = _answers(stores[0]), _answers(stores[1])
    assert sum(on.values()) == sum(off.values()) > 500
    assert on == off
    assert sum(1 for key in on if key[3]) > 100  # answers with content, not all empty


# -- declarations the data contradicts ---------------------------------------------------
def _emit(counts: dict[str, int]) -> Any:
    def emit(p: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"Who": p["Name"], "i": i} for i in range(counts.get(p["Name"], 2))]

    return emit


@pytest.mark.parametrize(
    ("counts", "row", "emitted"),
    [({"Mark": 3}, 1, "3 elements"), ({"Mary": 0}, 3, "0 elements"), ({"Steve": 1}, 0, "1 element")],
)
def test_an_element_emitting_other_than_declared_fails_the_run(
    tmp_path: Path, counts: dict[str, int], row: int, emitted: str
) -> None:
    @provplug.step("Pairs", output="Pairs", rates={"production": 2})
    def pairs(people: Any) -> Any:
        return people | beam.FlatMap(_emit(counts))

    store = tmp_path / "bad.prov"
    expected = rf"step Pairs declares production 2, but its input row {row} emitted {emitted}"
    with pytest.raises(LocationError, match=expected), provplug.capture(beam.Pipeline(), store=store) as run:
        pairs(run.source(PEOPLE, "People"))
    assert not list(store.glob("runs/*/_manifest.json"))  # nothing committed


def test_elements_missing_a_cell_fail_the_run(tmp_path: Path) -> None:
    """The edge would stand for triples of cells the black box never wrote."""

    @provplug.step("Sparse", output="Sparse", rates={"production": 1})
    def sparse(people: Any) -> Any:
        return people | beam.Map(lambda p: {"Who": p["Name"], **({"Age": p["Age"]} if p["Age"] > 30 else {})})

    store = tmp_path / "bad.prov"
    expected = (
        r"step Sparse declares .*not every element has a cell in every column "
        r"\(18 triples by its cells, the declaration stands for 24\)"
    )
    with pytest.raises(LocationError, match=expected), provplug.capture(beam.Pipeline(), store=store) as run:
        sparse(run.source(PEOPLE, "People"))
    assert not list(store.glob("runs/*/_manifest.json"))


# -- declarations Beam cannot store as an edge -----------------------------------------------
def _declared(body: Any, rates: dict[str, Any] | None = None, outputs: Any = "Out") -> Any:
    return provplug.step("Bad", output=outputs, rates=rates or {"production": 1})(body)


BAD = {
    "consumption 2": (
        _declared(lambda t: t | beam.Map(shout_of), {"consumption": 2, "production": 1}),
        r"step Bad declares consumption 2, production 1; Beam supports consumption 1, production f >= 1 "
        r"and no buffer",
    ),
    "buffer": (
        _declared(lambda t: t | beam.Map(shout_of), {"consumption": 1, "production": 1, "buffer": 2}),
        r"step Bad declares consumption 1, production 1, buffer 2; Beam supports",
    ),
    "two ParDos": (
        _declared(lambda t: t | "First" >> beam.Map(shout_of) | "Second" >> beam.Map(lambda u: u)),
        r"step Bad declares rates, so its body must be one Map, MapTuple, FlatMap, FlatMapTuple, ParDo "
        r"over one stored table, with one output; Second is a second transform",
    ),
    "a Filter": (_declared(lambda t: t | beam.Filter(lambda p: True)), r"Filter\(<lambda[^)]*\) is a Filter$"),
    "a grouping": (
        _declared(lambda t: t | beam.Map(lambda p: (p["City"], 1)) | beam.GroupByKey()),
        r"GroupByKey is a second transform",
    ),
    "a combine": (
        _declared(lambda t: t | beam.combiners.Count.Globally()),
        r"; Globally is a Count.Globally, not a ParDo$",
    ),
    "two inputs": (_declared(lambda t: (t, t) | beam.Flatten()), r"; Flatten reads 2 PCollections$"),
    "no transform": (_declared(lambda t: t), r"it does not return the output of one such transform"),
    "two outputs": (
        _declared(lambda t: (t | "A" >> beam.Map(shout_of), t | "B" >> beam.Map(shout_of)), outputs=("A", "B")),
        r"it has 2 outputs",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_declarations_are_one_line_errors(tmp_path: Path, case: str) -> None:
    step, message = BAD[case]
    store = tmp_path / "bad.prov"
    with pytest.raises(LocationError, match=message) as raised, provplug.capture(beam.Pipeline(), store=store) as run:
        step(run.source(PEOPLE, "People"))
    assert "\n" not in str(raised.value)
    assert not list(store.glob("runs/*/_manifest.json"))


def test_a_declared_step_over_data_transformed_outside_any_step_is_an_error(tmp_path: Path) -> None:
    """Its input positions would not be a stored table's rows."""
    step = _declared(lambda t: t | beam.Map(shout_of))
    expected = r"Map\(shout_of\) reads data transformed outside any step, not a stored table"
    with (
        pytest.raises(LocationError, match=expected),
        provplug.capture(beam.Pipeline(), store=tmp_path / "b.prov") as run,
    ):
        step(run.source(PEOPLE, "People") | beam.Filter(lambda p: p["Age"] > 20))


def test_declarations_are_only_recorded_with_location_lineage_off(tmp_path: Path) -> None:
    store = tmp_path / "off.prov"
    with provplug.capture(beam.Pipeline(), store=store, location_lineage=False) as run:
        _declared(lambda t: t | beam.Map(shout_of) | beam.Map(lambda u: u))(run.source(PEOPLE, "People"))
    opened = open_store(store)
    assert locations_of(opened) == [] and opened.triples().count_rows() == 4 * 3 * 2
