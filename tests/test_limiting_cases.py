"""The limiting cases of Algorithm 3 (paper 002 §IV, last paragraph), on the
Person data (Table 4) and the Table 6 component:

* every table its own split: every value is its own connected set, the set
  dependencies are the triples (as (src, dst) pairs), and CSProv reads exactly
  the triples RQ looks up ("CSProv reduces to RQ");
* all tables one split: the sets are the components and CSProv is CCProv.

theta = 1 makes every component "large", so Algorithm 3 partitions all of
them (with the default theta these toy components would be one set each
whatever the splits). Expectations come from a plain traversal of the CSV
triples, independent of the index.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA
from test_index import read_index

PERSON = (DATA / "paper_table4_triples.csv", DATA / "paper_table4_values.csv")
TABLE6 = (DATA / "paper_table7_triples.csv", DATA / "paper_table7_values.csv")
DATASETS = {"person": PERSON, "table6": TABLE6}


def read_triples(path: Path) -> list[tuple[int, int]]:
    with open(path, newline="") as f:
        return [(int(r["src"]), int(r["dst"])) for r in csv.DictReader(f)]


def read_tables(path: Path) -> list[str]:
    with open(path, newline="") as f:
        return sorted({r["table"] for r in csv.DictReader(f)})


def closure(triples: list[tuple[int, int]], value: int, direction: str) -> set[int]:
    """Ancestors (up), descendants (down) or the rest of the weakly connected
    component (both) of ``value``, by a plain traversal."""
    step: dict[int, set[int]] = defaultdict(set)
    for s, d in triples:
        if direction in ("up", "both"):
            step[d].add(s)
        if direction in ("down", "both"):
            step[s].add(d)
    seen: set[int] = set()
    todo = [value]
    while todo:
        for nxt in step[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen - {value}


def rq_lookups(triples: list[tuple[int, int]], value: int) -> set[tuple[int, int]]:
    """What RQ reads for the ancestors of ``value``: the parents of the query
    value and of every value it reaches, i.e. the triples whose dst is among them."""
    reached = closure(triples, value, "up") | {value}
    return {(s, d) for s, d in triples if d in reached}


def components(triples: list[tuple[int, int]]) -> list[set[int]]:
    nodes = {v for t in triples for v in t}
    return [closure(triples, v, "both") | {v} for v in nodes]


def indexed(path: Path, pair: tuple[Path, Path], splits: list[list[str]]) -> Any:
    import provplug
    from provplug.index import build_index
    from provplug.ingest.importer import import_provenance

    store = provplug.open_store(path)
    import_provenance(store, *pair)
    build_index(store, theta=1, splits=splits, engine="local")
    return store


def per_table(pair: tuple[Path, Path]) -> list[list[str]]:
    return [[t] for t in read_tables(pair[1])]


def one_split(pair: tuple[Path, Path]) -> list[list[str]]:
    return [read_tables(pair[1])]


def edge_pairs(answer: Any) -> set[tuple[int, int]]:
    return {(e["src"], e["dst"]) for e in answer.edges}


# -- every table its own split: CSProv reduces to RQ ---------------------------------


@pytest.mark.parametrize("name", DATASETS)
def test_one_split_per_table_makes_every_value_a_set_and_every_triple_a_set_dependency(
    name: str, tmp_path: Path
) -> None:
    pair = DATASETS[name]
    triples = read_triples(pair[0])
    idx = read_index(indexed(tmp_path / "s.prov", pair, per_table(pair)))
    on_triples = {v for t in triples for v in t}
    assert {r["value_id"] for r in idx["value_sets"]} == on_triples
    assert all(r["csid"] == r["value_id"] for r in idx["value_sets"])
    assert all(r["nodes"] == 1 for r in idx["sets"]) and len(idx["sets"]) == len(on_triples)
    deps = {(d["src_csid"], d["dst_csid"]) for d in idx["setdeps"]}
    assert deps == set(triples) and len(idx["setdeps"]) == len(triples)
    assert {(d["src_csid"], d["dst_csid"]) for d in idx["rsetdeps"]} == set(triples)
    assert idx["meta"]["counts"]["set_dependencies"] == len(triples)


@pytest.mark.parametrize("name", DATASETS)
def test_one_split_per_table_csprov_reads_what_rq_looks_up(name: str, tmp_path: Path) -> None:
    import provplug

    pair = DATASETS[name]
    triples = read_triples(pair[0])
    opened = provplug.open(indexed(tmp_path / "s.prov", pair, per_table(pair)).root)
    for value in sorted({v for t in triples for v in t}):
        looked_up = rq_lookups(triples, value)
        csprov = opened.lineage(value_id=value, method="csprov")
        rq = opened.lineage(value_id=value, method="rq")
        assert csprov.value_ids == rq.value_ids == closure(triples, value, "up"), value
        assert edge_pairs(csprov) == edge_pairs(rq) == looked_up, value
        # One set per value: the query value's and one per ancestor; their
        # triples (dst in those sets) are exactly RQ's lookups, nothing more.
        assert csprov.stats["sets_read"] == 1 + len(csprov.value_ids), value
        assert csprov.stats["triples_scanned"] == len(looked_up), value
        for direction in ("up", "down"):
            down = opened.lineage(value_id=value, method="csprov", direction=direction)
            assert down.value_ids == closure(triples, value, direction), (value, direction)
            assert down.stats["sets_read"] == 1 + len(down.value_ids), (value, direction)


# -- all tables one split: CSProv reduces to CCProv ----------------------------------


@pytest.mark.parametrize("name", DATASETS)
def test_all_tables_in_one_split_makes_the_sets_the_components(name: str, tmp_path: Path) -> None:
    pair = DATASETS[name]
    triples = read_triples(pair[0])
    idx = read_index(indexed(tmp_path / "s.prov", pair, one_split(pair)))
    expected = {frozenset(c) for c in components(triples)}
    by_set: dict[int, set[int]] = defaultdict(set)
    for r in idx["value_sets"]:
        assert r["csid"] == r["ccid"]
        by_set[r["csid"]].add(r["value_id"])
    assert {frozenset(s) for s in by_set.values()} == expected
    assert idx["setdeps"] == [] and idx["rsetdeps"] == []
    comps = {(c["ccid"], c["nodes"], c["triples"]) for c in idx["components"]}
    assert {(s["csid"], s["nodes"], s["triples"]) for s in idx["sets"]} == comps
    assert {s["split"] for s in idx["sets"]} == {"sp1"}  # partitioned (theta 1), by the one split


@pytest.mark.parametrize("name", DATASETS)
def test_all_tables_in_one_split_csprov_is_ccprov(name: str, tmp_path: Path) -> None:
    import provplug

    pair = DATASETS[name]
    triples = read_triples(pair[0])
    opened = provplug.open(indexed(tmp_path / "s.prov", pair, one_split(pair)).root)
    for value in sorted({v for t in triples for v in t}):
        component = next(c for c in components(triples) if value in c)
        for direction in ("up", "down"):
            cs = opened.lineage(value_id=value, method="csprov", direction=direction)
            cc = opened.lineage(value_id=value, method="ccprov", direction=direction)
            assert cs.value_ids == cc.value_ids == closure(triples, value, direction), (value, direction)
            assert edge_pairs(cs) == edge_pairs(cc), (value, direction)
            scanned = sum(1 for _, d in triples if d in component)
            assert cs.stats["triples_scanned"] == cc.stats["triples_scanned"] == scanned, (value, direction)
            assert cs.stats["sets_read"] == cc.stats["sets_read"] == 1, (value, direction)


# -- the Table 6 component between the two limits -------------------------------------


@pytest.mark.parametrize(
    ("splits", "sets_read", "scanned"),
    [
        ([["T1"], ["T2"], ["T3"], ["T4"], ["T5"], ["T6"]], 7, 7),  # every value a set: the 7 lineage triples
        ([["T1", "T2"], ["T3", "T4"], ["T5", "T6"]], 3, 9),  # the paper's sets S1-S4: 9 of 12 ("3 less")
        ([["T1", "T2", "T3", "T4", "T5", "T6"]], 1, 12),  # one set: the whole component, as CCProv
    ],
)
def test_item_8_reads_between_rq_and_ccprov(
    tmp_path: Path, splits: list[list[str]], sets_read: int, scanned: int
) -> None:
    import provplug

    opened = provplug.open(indexed(tmp_path / "s.prov", TABLE6, splits).root)
    answer = opened.lineage(value_id=8, method="csprov")
    assert answer.value_ids == {7, 5, 4, 2, 3, 1}
    assert edge_pairs(answer) == {(7, 8), (5, 7), (4, 5), (2, 4), (3, 4), (1, 2), (1, 3)}
    assert (answer.stats["sets_read"], answer.stats["triples_scanned"]) == (sets_read, scanned)
    assert opened.lineage(value_id=8, method="ccprov").stats["triples_scanned"] == 12
