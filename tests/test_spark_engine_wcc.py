"""The Spark components (partition-local union-find, merge by node, link
graph in one task or by large-star/small-star) against the local NumPy
union-find and a plain union-find oracle, on graphs chosen to defeat the
local step: a long chain cut into every partition, a hub, many tiny
components, one component touching every partition."""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pytest
from test_index_properties import union_find


def adversarial_edges(rng: random.Random) -> list[tuple[int, int]]:
    edges: list[tuple[int, int]] = []
    chain = list(range(1_000, 1_300))  # a long chain, ids shuffled along it
    rng.shuffle(chain)
    edges += list(itertools.pairwise(chain))
    edges += [(5_000, 5_001 + i) for i in range(200)]  # a star (hub 5,000)
    edges += [(10_000 + 2 * i, 10_001 + 2 * i) for i in range(300)]  # many two-node components
    edges += [(20_000 + i, 20_000 + i) for i in range(5)]  # self-loops: a value derived from itself
    edges += [(1_150, 5_100), (5_150, 10_000)]  # chain, star and one pair joined into one component
    spread = [30_000 + i for i in range(120)]  # a random tree: its edges land in every partition
    edges += [(v, spread[rng.randrange(k)]) for k, v in enumerate(spread) if k]
    edges += [(b, a) for a, b in rng.sample(edges, 40)]  # reversed duplicates
    rng.shuffle(edges)
    return edges


def oracle(edges: list[tuple[int, int]]) -> dict[int, int]:
    """Node -> smallest node of its component (plain union-find)."""
    roots = union_find(edges)
    smallest: dict[int, int] = {}
    for node, root in roots.items():
        smallest[root] = min(node, smallest.get(root, node))
    return {node: smallest[root] for node, root in roots.items()}


def frame(spark: Any, edges: list[tuple[int, int]], partitions: int) -> Any:
    # Round-robin repartitioning scatters every component over the partitions.
    return spark.createDataFrame(edges, "src long, dst long").repartition(partitions)


def test_node_links_keep_each_nodes_smallest_root() -> None:
    from provplug.index.sparkwcc import node_links

    v = np.array([7, 7, 7, 9, 9, 4], dtype=np.int64)
    r = np.array([3, 1, 7, 9, 2, 4], dtype=np.int64)
    u, m = node_links(v, r)
    assert sorted(zip(u.tolist(), m.tolist(), strict=True)) == [(3, 1), (7, 1), (9, 2)]


def test_local_roots_are_the_smallest_node_of_each_partitions_components() -> None:
    from provplug.index.localwcc import wcc_labels
    from provplug.index.sparkwcc import partition_roots

    src = np.array([8, 5, 9, 2], dtype=np.int64)
    dst = np.array([5, 3, 9, 40], dtype=np.int64)
    nodes, roots, si, di = partition_roots(src, dst)
    assert dict(zip(nodes.tolist(), roots.tolist(), strict=True)) == {2: 2, 3: 3, 5: 3, 8: 3, 9: 9, 40: 2}
    assert (nodes[si] == src).all() and (nodes[di] == dst).all()
    assert (roots == nodes[wcc_labels(len(nodes), si, di)]).all()


@pytest.mark.parametrize("task_limit", [None, 0], ids=["links-in-one-task", "large-star-small-star"])
def test_spark_wcc_matches_the_oracle_on_adversarial_graphs(spark: Any, task_limit: int | None) -> None:
    from provplug.index.localwcc import wcc_labels
    from provplug.index.sparkwcc import spark_wcc

    edges = adversarial_edges(random.Random(3))
    rounds: list[int] = []
    labels = spark_wcc(frame(spark, edges, 6), 4, on_round=rounds.append, task_limit=task_limit)
    got = {int(r["node"]): int(r["label"]) for r in labels.collect()}
    expected = oracle(edges)
    assert got == expected
    assert len(set(expected.values())) == 299 + 5 + 1 + 1  # other pairs, self-loops, chain+star+pair, tree
    # The local engine's union-find labels every node alike.
    nodes = np.array(sorted(expected), dtype=np.int64)
    src, dst = (np.searchsorted(nodes, np.array(side, dtype=np.int64)) for side in zip(*edges, strict=True))
    assert dict(zip(nodes.tolist(), nodes[wcc_labels(len(nodes), src, dst)].tolist(), strict=True)) == got
    assert (len(rounds) > 0) == (task_limit == 0)  # the star rounds ran only when forced


def test_link_graph_of_a_chain_cut_everywhere_is_solved_exactly(spark: Any) -> None:
    """A chain whose consecutive edges sit in different partitions: the local
    step contracts nothing, every node links two roots."""
    from provplug.index.sparkwcc import spark_wcc

    chain = [(i, i + 1) for i in range(200)]
    df = spark.createDataFrame([(i % 4, s, d) for i, (s, d) in enumerate(chain)], "p int, src long, dst long")
    labels = spark_wcc(df.repartition(4, "p").select("src", "dst"), 4, task_limit=0)
    assert {int(r["node"]): int(r["label"]) for r in labels.collect()} == {i: 0 for i in range(201)}
