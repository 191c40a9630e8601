"""Oracle test: on random layered DAGs with large, partitioned components,
every method equals a plain BFS (provplug.testing.TripleOracle), on the
driver and on Spark, up and down."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from test_lineage_support import layered_dag

import provplug
from provplug.index import build_index, read_meta
from provplug.ingest.importer import import_provenance
from provplug.store.open import open_store
from provplug.testing import TripleOracle

METHODS = ("rq", "ccprov", "csprov", "auto")


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, int]], dict[str, Any]]:
    folder = tmp_path_factory.mktemp("oracle")
    triples, values, edges = layered_dag(folder, seed=7, layers=6, width=300, fan_in=2)
    store = folder / "dag.prov"
    import_provenance(open_store(store), triples, values)
    build_index(store, theta=40, splits=[["T0", "T1"], ["T2", "T3"], ["T4", "T5"]], engine="local")
    meta = read_meta(open_store(store))
    assert meta is not None
    return store, edges, meta


def _expected(edges: list[tuple[int, int]], values: list[int], direction: str) -> tuple[set[int], set[tuple[int, int]]]:
    answer = TripleOracle(edges).answer(values, direction)
    return set(answer.values), set(answer.edges)


def _got(answer: Any) -> tuple[set[int], set[tuple[int, int]]]:
    d = answer.to_dict()
    return {r["value_id"] for r in d["lineage"]}, {(e["src"], e["dst"]) for e in d["edges"]}


def test_the_graph_has_large_partitioned_components(graph: Any) -> None:
    _, _, meta = graph
    assert meta["counts"]["sets"] > 3 * meta["counts"]["components"]


def test_every_method_equals_bfs_on_the_driver(graph: Any) -> None:
    store, edges, _ = graph
    nodes = sorted({v for e in edges for v in e})
    queried = random.Random(1).sample(nodes, 200)
    opened = provplug.open(store)
    reads: dict[str, list[int]] = defaultdict(list)
    for direction in ("up", "down"):
        for value in queried:
            expected = _expected(edges, [value], direction)
            for method in METHODS:
                answer = opened.lineage(value_id=value, method=method, direction=direction)
                assert answer.stats["path"] == "driver"
                assert _got(answer) == expected, (method, direction, value)
                reads[method].append(answer.stats["triples_scanned"])
    # The point of connected sets: CSProv scans no more than CCProv, and less overall.
    assert all(cs <= cc for cs, cc in zip(reads["csprov"], reads["ccprov"], strict=True))
    assert sum(reads["csprov"]) < sum(reads["ccprov"]) < sum(reads["rq"])


def test_every_method_equals_bfs_on_spark(graph: Any, spark: Any) -> None:
    store, edges, _ = graph
    nodes = sorted({v for e in edges for v in e})
    rng = random.Random(2)
    opened = provplug.open(store)
    for direction in ("up", "down"):
        batch = rng.sample(nodes, 25)  # one query for 25 values: the union of their lineages
        expected = _expected(edges, batch, direction)
        for method in METHODS:
            answer = opened.lineage(value_id=batch, method=method, direction=direction, tau=0, spark=spark)
            assert answer.stats["path"] == "spark"
            assert _got(answer) == expected, (method, direction)


def test_tau_splits_queries_between_driver_and_spark(graph: Any, spark: Any) -> None:
    store, edges, _ = graph
    opened = provplug.open(store)
    nodes = sorted({v for e in edges for v in e})
    rng = random.Random(3)
    scanned = {v: opened.lineage(value_id=v, method="csprov").stats["triples_scanned"] for v in rng.sample(nodes, 40)}
    tau = sorted(scanned.values())[len(scanned) // 2]
    paths = set()
    for value in list(scanned)[:8]:
        for direction in ("up", "down"):
            answer = opened.lineage(value_id=value, method="auto", direction=direction, tau=tau, spark=spark)
            count = answer.stats["triples_scanned"]
            assert answer.stats["path"] == ("driver" if count < tau else "spark")
            paths.add(answer.stats["path"])
            assert _got(answer) == _expected(edges, [value], direction)
    assert paths == {"driver", "spark"}
