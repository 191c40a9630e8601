"""The paper-evaluation harness (examples/benchmarks/paper_eval.py) at small
scale: replication by a factor (fresh ids per copy), Table 9's rows and their
set counts, the query classes' selection rules. Expectations are derived by
hand on the paper's Tables 6-8 and Person data, or by plain traversals."""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA, EXAMPLES

sys.path.insert(0, str(EXAMPLES / "benchmarks"))

import paper_eval
import paper_trace

TABLE6 = (DATA / "paper_table7_triples.csv", DATA / "paper_table7_values.csv")
PERSON = (DATA / "paper_table4_triples.csv", DATA / "paper_table4_values.csv")


def imported(path: Path, pair: tuple[Path, Path]) -> Any:
    import provplug
    from provplug.ingest.importer import import_provenance

    store = provplug.open_store(path)
    import_provenance(store, *pair)
    return store


def csv_triples(path: Path) -> list[tuple[int, int]]:
    with open(path, newline="") as f:
        return [(int(r["src"]), int(r["dst"])) for r in csv.DictReader(f)]


def plain_lineage(triples: list[tuple[int, int]], value: int) -> tuple[set[int], int]:
    """Ancestors of ``value`` and the triples into it and them, by a plain traversal."""
    parents: dict[int, set[int]] = defaultdict(set)
    for s, d in triples:
        parents[d].add(s)
    seen: set[int] = set()
    todo = [value]
    while todo:
        for p in parents[todo.pop()]:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    closed = seen | {value}
    return seen - {value}, sum(1 for _, d in triples if d in closed)


# -- replication -------------------------------------------------------------------


def test_replicate_shifts_every_id_and_keeps_tables_and_ops() -> None:
    triples, values = paper_trace.generate_arrays(0.002, seed=1)
    copy_triples, copy_values = paper_trace.replicate((triples, values), 2)
    shift = 2 * paper_trace.COPY_STRIDE
    assert np.array_equal(copy_triples["src"], triples["src"] + shift)
    assert np.array_equal(copy_triples["dst"], triples["dst"] + shift)
    assert np.array_equal(copy_triples["op"], triples["op"])
    assert np.array_equal(copy_values["value_id"], values["value_id"] + shift)
    assert np.array_equal(copy_values["table"], values["table"])
    # Copies share no value.
    assert not np.intersect1d(values["value_id"], copy_values["value_id"]).size
    assert paper_trace.replicate((triples, values), 0)[0] is triples
    with pytest.raises(ValueError, match="copy"):
        paper_trace.replicate((triples, values), -1)


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Any]:
    """The same small trace at factors 1 and 3, indexed with the 1x splits."""
    from provplug.index import build_index, read_meta
    from provplug.store.open import open_store

    stores = {}
    splits = None
    for factor in (1, 3):
        path = tmp_path_factory.mktemp("trace") / f"x{factor}.prov"
        result = paper_trace.generate(path, scale=0.01, seed=3, copies=factor)
        assert len(result["run_ids"]) == factor
        store = open_store(path)
        build_index(store, theta=THETA, splits=splits, engine="local")
        splits = splits or (read_meta(store) or {})["splits"]
        stores[factor] = store
    return stores


THETA = 2_000  # at scale 0.01 the three large components hold 12,000, 9,000 and 7,000 values


def test_replication_multiplies_every_count_by_the_factor(replicated: dict[int, Any]) -> None:
    from provplug.index import read_meta

    one, three = (read_meta(replicated[f]) or {} for f in (1, 3))
    for key in ("triples", "values", "components", "sets", "set_dependencies"):
        assert three["counts"][key] == 3 * one["counts"][key], key
    assert one["splits"] == three["splits"]
    large = paper_eval.large_count(replicated[1], THETA)
    assert large >= 3 and paper_eval.large_count(replicated[3], THETA) == 3 * large


def test_copy_zero_has_the_table9_rows_of_the_original(replicated: dict[int, Any]) -> None:
    from provplug.index import read_meta

    tree = (read_meta(replicated[1]) or {})["split_tree"]
    base = paper_eval.table9(replicated[1], THETA, tree)
    paper_eval.check_set_counts(base)
    assert base and base[0].name == "LC1" and base[0].nodes == max(r.nodes for r in base if "_" not in r.name)
    copy0 = paper_eval.table9(replicated[3], THETA, tree, ccid_below=paper_trace.COPY_STRIDE)
    assert copy0 == base
    # Every copy's component is the original's: all of them together are three times each row.
    everything = paper_eval.table9(replicated[3], THETA, tree)
    assert sorted((r.nodes, r.final_sets) for r in everything) == sorted((r.nodes, r.final_sets) for r in base * 3)


def test_a_queried_copy_answers_like_the_original(replicated: dict[int, Any]) -> None:
    import provplug

    one, three = (provplug.open(replicated[f].root) for f in (1, 3))
    deepest = int(replicated[1].triples().to_table(columns=["dst"]).column("dst").to_numpy().max())
    query = paper_eval.Query(value=deepest, component=0, lineage=0, triples=0, rounds=0)
    original = one.lineage(value_id=query.value, method="csprov")
    assert original.value_ids
    for i in range(3):
        value = paper_eval.copy_value(query, i, 3)
        assert value == query.value + i * paper_trace.COPY_STRIDE
        answer = three.lineage(value_id=value, method="csprov")
        assert answer.value_ids == {v + i * paper_trace.COPY_STRIDE for v in original.value_ids}


# -- Table 9 on the paper's Tables 6-8 -----------------------------------------------


def cells(row: Any) -> list[tuple[str, int, int, int]]:
    return [(c.split, c.sets, c.big, c.largest) for c in row.cells]


def test_table9_rows_of_the_table6_component(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provplug.index import build_index, read_meta

    monkeypatch.setattr(paper_eval, "BIG_SET", 3)
    store = imported(tmp_path / "t6.prov", TABLE6)
    build_index(store, theta=4, splits=[["T1", "T2"], ["T3", "T4"], ["T5", "T6"]], engine="local")
    rows = paper_eval.table9(store, 4, (read_meta(store) or {})["split_tree"])
    # Tables 6-8: S1 in sp1, S2 in sp2, S3 and S4 in sp3; 3 nodes each.
    assert [(r.name, r.nodes, r.triples, r.final_sets, r.parts) for r in rows] == [("LC1", 12, 12, 4, [])]
    assert cells(rows[0]) == [("sp1", 1, 1, 3), ("sp2", 1, 1, 3), ("sp3", 2, 2, 3)]
    paper_eval.check_set_counts(rows)


def test_table9_shows_a_re_partitioned_set_in_a_row_of_its_own(tmp_path: Path) -> None:
    from provplug.index import build_index, read_meta

    store = imported(tmp_path / "t6.prov", TABLE6)
    # sp2 = T3-T6 holds 9 connected values (4-12): >= theta 4, so it is
    # re-partitioned on its sub-splits {T3, T4} -> S2 and {T5, T6} -> S3, S4.
    build_index(store, theta=4, splits=[["T1", "T2"], [["T3", "T4"], ["T5", "T6"]]], engine="local")
    rows = paper_eval.table9(store, 4, (read_meta(store) or {})["split_tree"])
    assert [(r.name, r.nodes, r.final_sets, r.parts) for r in rows] == [
        ("LC1", 12, 4, ["LC1_lc1"]),
        ("LC1_lc1", 9, 3, []),
    ]
    assert cells(rows[0]) == [("sp1", 1, 0, 3), ("sp2", 1, 0, 9)]
    assert cells(rows[1]) == [("sp2.1", 1, 0, 3), ("sp2.2", 2, 0, 3)]
    assert rows[1].triples == 10  # triples into 4-12 (2->4 and 3->4 start in sp1, but end here)
    paper_eval.check_set_counts(rows)
    broken = [paper_eval.Row(**{**rows[0].__dict__, "final_sets": 5}), rows[1]]
    with pytest.raises(AssertionError, match="LC1: 5 sets in the index, 4 from its splits"):
        paper_eval.check_set_counts(broken)


# -- query selection ------------------------------------------------------------------


def test_trace_graph_counts_lineage_like_a_plain_traversal() -> None:
    triples = csv_triples(PERSON[0])
    src, dst = (np.array(c, dtype=np.int64) for c in zip(*triples, strict=True))
    graph = paper_eval.TraceGraph(src, dst)
    # 23 = avg(15, 18), 15 <- 3, 18 <- 6: 4 ancestors, 4 triples, 2 rounds (000 §1).
    assert graph.lineage(int(graph.dense(np.array([23]))[0]), "up", 100) == (4, 4, 2)
    # Downstream of 6: 18, then 23.
    assert graph.lineage(int(graph.dense(np.array([6]))[0]), "down", 100) == (2, 2, 2)
    for value in {v for t in triples for v in t}:
        ancestors, into = plain_lineage(triples, value)
        assert graph.lineage(int(graph.dense(np.array([value]))[0]), "up", 100)[:2] == (len(ancestors), into)


def test_upper_bound_counts_paths_into_a_value() -> None:
    triples = csv_triples(TABLE6[0])
    src, dst = (np.array(c, dtype=np.int64) for c in zip(*triples, strict=True))
    graph = paper_eval.TraceGraph(src, dst)
    bound = dict(zip(graph.nodes.tolist(), graph.upper_bound("up").tolist(), strict=True))
    # Paths into 8: 7-8, 5-7-8, 4-5-7-8, then 2-4.. and 3-4.., 1-2-4.. and 1-3-4..: 7
    # (ancestor 1 counted twice); 6 ancestors.
    assert bound[8] == 7 and bound[1] == 0 and bound[4] == 4
    for value in graph.nodes.tolist():
        assert bound[value] >= len(plain_lineage(triples, value)[0])
    down = dict(zip(graph.nodes.tolist(), graph.upper_bound("down").tolist(), strict=True))
    # Out of 4: 8 paths (one per descendant: a tree); out of 1: 1-2 and 1-3, each then 1 + 8.
    assert down[10] == 2 and down[4] == 8 and down[2] == 9 and down[1] == 2 * (1 + 9)


def test_picked_queries_follow_the_class_rules(replicated: dict[int, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    from provplug.index import current_dir

    store = replicated[1]
    # The paper's ranges are for 6.4M triples; scaled down for a 70K-triple trace.
    monkeypatch.setattr(
        paper_eval,
        "CLASSES",
        {"SC-SL": ("small", 10, 40), "LC-SL": ("large", 100, 200), "LC-LL": ("large", 1_000, 3_000)},
    )
    picks = paper_eval.pick_queries(store, THETA, per_class=3, seed=0, direction="up", max_checks=50_000)
    t = store.triples().to_table(columns=["src", "dst"])
    triples = list(zip(t.column("src").to_pylist(), t.column("dst").to_pylist(), strict=True))
    comps = pq.read_table(f"{current_dir(store)}/components.parquet").to_pylist()
    nodes = {c["ccid"]: c["nodes"] for c in comps}
    for cls, (kind, lo, hi) in paper_eval.CLASSES.items():
        queries = picks[cls]["queries"]
        assert len(queries) == 3, cls
        assert len({q["value"] for q in queries}) == 3
        for q in queries:
            ancestors, into = plain_lineage(triples, q["value"])
            assert (q["lineage"], q["triples"], q["rule"]) == (len(ancestors), into, "both"), (cls, q)
            assert lo <= len(ancestors) <= hi and lo <= into <= hi, (cls, q)
            assert (nodes[q["component"]] >= THETA) == (kind == "large"), (cls, q)


def test_too_few_by_both_counts_tops_up_by_values_alone(
    replicated: dict[int, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = replicated[1]
    monkeypatch.setattr(paper_eval, "CLASSES", {"LC": ("large", 50, 100)})
    found = paper_eval.pick_queries(store, THETA, per_class=10_000, seed=0, direction="up", max_checks=3_000)["LC"]
    queries = found["queries"]
    strict = found["strict"]
    assert 0 < strict < len(queries)  # both kinds occur in this trace
    assert [q["rule"] for q in queries] == ["both"] * strict + ["values"] * (len(queries) - strict)
    t = store.triples().to_table(columns=["src", "dst"])
    triples = list(zip(t.column("src").to_pylist(), t.column("dst").to_pylist(), strict=True))
    for q in queries[strict - 2 : strict + 2]:
        ancestors, into = plain_lineage(triples, q["value"])
        assert 50 <= len(ancestors) <= 100 and (q["lineage"], q["triples"]) == (len(ancestors), into)
        assert (50 <= into <= 100) == (q["rule"] == "both")
