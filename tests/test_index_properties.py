"""Property tests on seeded random DAG-shaped provenance graphs, against
independent oracles: a plain union-find, and Algorithm 3 written literally
(one recursive call per component and split, BFS for components)."""

from __future__ import annotations

import json
import random
from collections import defaultdict, deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from test_index import read_index

SEEDS = range(8)


# -- generator ---------------------------------------------------------------
def random_workflow(rng: random.Random, n_tables: int) -> tuple[list[str], list[tuple[str, str]]]:
    """A table DAG: every table after the first few reads one or two earlier ones;
    sometimes a second, separate workflow."""
    names = [f"T{i:02d}" for i in range(n_tables)]
    second = rng.random() < 0.3 and n_tables >= 6
    cut = n_tables // 2 if second else 0
    edges = set()
    for i in range(1, n_tables):
        lo = cut if second and i > cut else 0
        if second and i == cut:
            continue  # first table of the second workflow is a source
        for p in rng.sample(range(lo, i), min(i - lo, rng.choice([1, 1, 2]))):
            edges.add((names[p], names[i]))
    return names, sorted(edges)


def random_provenance(
    rng: random.Random, n_tables: int, values_per_table: int = 30
) -> tuple[list[tuple[int, int, str]], dict[int, str]]:
    """Triples whose table pairs follow a random workflow DAG: each derived
    value picks 1-3 parents (occasionally many: a hub) from its tables' parents,
    mostly near its own position so components vary in size."""
    names, edges = random_workflow(rng, n_tables)
    parents_of: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        parents_of[b].append(a)
    table_of: dict[int, str] = {}
    values: dict[str, list[int]] = {}
    next_id = 1
    triples = []
    for t in names:
        n = rng.randint(values_per_table // 2, values_per_table)
        values[t] = list(range(next_id, next_id + n))
        next_id += n
        for v in values[t]:
            table_of[v] = t
        for pos, v in enumerate(values[t]):
            if not parents_of[t] or rng.random() < 0.15:
                continue  # a value with no parent
            fan_in = rng.choice([1, 1, 1, 2, 3]) if rng.random() > 0.02 else 25
            for _ in range(fan_in):
                src_table = rng.choice(parents_of[t])
                pool = values[src_table]
                centre = int(pos * len(pool) / len(values[t]))
                spread = rng.choice([1, 2, 4, len(pool)])
                j = min(len(pool) - 1, max(0, centre + rng.randint(-spread, spread)))
                triples.append((pool[j], v, f"op_{src_table}_{t}"))
    triples = sorted(set(triples))
    on_triple = {x for s, d, _ in triples for x in (s, d)}
    return triples, {v: t for v, t in table_of.items() if v in on_triple}


def write_import(tmp: Path, triples: list[tuple[int, int, str]], table_of: dict[int, str]) -> tuple[Path, Path]:
    tp, vp = tmp / "triples.csv", tmp / "values.csv"
    tp.write_text("src,dst,op\n" + "".join(f"{s},{d},{o}\n" for s, d, o in triples))
    vp.write_text("value_id,table\n" + "".join(f"{v},{t}\n" for v, t in sorted(table_of.items())))
    return tp, vp


def make_store(tmp: Path, seed: int, n_tables: int = 9, values_per_table: int = 30) -> tuple[Any, list, dict]:
    import provplug
    from provplug.ingest.importer import import_provenance

    rng = random.Random(seed)
    triples, table_of = random_provenance(rng, n_tables, values_per_table)
    store = provplug.open_store(tmp / f"s{seed}")
    import_provenance(store, *write_import(tmp, triples, table_of))
    return store, triples, table_of


# -- oracles -----------------------------------------------------------------
def union_find(pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in list(parent)}


def bfs_components(nodes: set[int], adj: dict[int, set[int]]) -> list[set[int]]:
    seen: set[int] = set()
    out = []
    for start in sorted(nodes):
        if start in seen:
            continue
        comp, queue = {start}, deque([start])
        seen.add(start)
        while queue:
            for nxt in adj[queue.popleft()]:
                if nxt in nodes and nxt not in seen:
                    seen.add(nxt)
                    comp.add(nxt)
                    queue.append(nxt)
        out.append(comp)
    return out


def algorithm3(triples: list, table_of: dict[int, str], theta: int, tree: list[dict]) -> list[set[int]]:
    """The paper's Partition-Large-Component, literally, on every component."""
    adj: dict[int, set[int]] = defaultdict(set)
    for s, d, _ in triples:
        adj[s].add(d)
        adj[d].add(s)

    def partition(c: set[int], splits: list[dict]) -> list[set[int]]:
        out: list[set[int]] = []
        for sp in splits:
            members = {v for v in c if table_of[v] in set(sp["tables"])}
            for cn in bfs_components(members, adj):
                if len(cn) >= theta and sp["children"]:
                    out += partition(cn, sp["children"])
                else:
                    out.append(cn)
        return out

    result = []
    for comp in bfs_components(set(table_of), adj):
        result += partition(comp, tree) if len(comp) >= theta else [comp]
    return result


# -- properties ----------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_index_matches_union_find_and_algorithm3(tmp_path: Path, seed: int) -> None:
    from provplug.index import build_index

    store, triples, table_of = make_store(tmp_path, seed)
    theta = random.Random(seed).choice([5, 12, 40])
    build_index(store, theta=theta, engine="local")
    idx = read_index(store)
    vs = {r["value_id"]: r for r in idx["value_sets"]}
    assert set(vs) == set(table_of)

    # Components equal a plain union-find (ids: smallest member).
    uf = union_find((s, d) for s, d, _ in triples)
    assert {v: r["ccid"] for v, r in vs.items()} == uf

    # The split tree covers every table once, and every split is weakly connected.
    tree = idx["meta"]["split_tree"]
    check_split_tree(tree, idx["meta"]["workflow"])

    # Sets equal Algorithm 3 run literally; they partition every component.
    sets: dict[int, set[int]] = defaultdict(set)
    for v, r in vs.items():
        sets[r["csid"]].add(v)
    expected = algorithm3(triples, table_of, theta, tree)
    assert sorted(map(sorted, sets.values())) == sorted(map(sorted, expected))
    for csid, members in sets.items():
        assert csid == min(members)
        assert len({vs[v]["ccid"] for v in members}) == 1  # inside one component
    # Every set is weakly connected through the triples inside it.
    adj: dict[int, set[int]] = defaultdict(set)
    for s, d, _ in triples:
        adj[s].add(d)
        adj[d].add(s)
    for members in sets.values():
        assert len(bfs_components(members, adj)) == 1

    # Per-triple set ids and the set dependencies: exactly the distinct cross-set pairs.
    got = {(t["src"], t["dst"]): (t["src_csid"], t["dst_csid"], t["ccid"]) for t in idx["triples"]}
    assert got == {(s, d): (vs[s]["csid"], vs[d]["csid"], vs[d]["ccid"]) for s, d, _ in triples}
    cross = {(vs[s]["csid"], vs[d]["csid"]) for s, d, _ in triples if vs[s]["csid"] != vs[d]["csid"]}
    assert sorted((r["src_csid"], r["dst_csid"]) for r in idx["setdeps"]) == sorted(cross)
    assert sorted((r["src_csid"], r["dst_csid"]) for r in idx["rsetdeps"]) == sorted(cross)

    # sets.parquet / components.parquet sizes.
    dst_count: dict[int, int] = defaultdict(int)
    for _, d, _ in triples:
        dst_count[vs[d]["csid"]] += 1
    assert {r["csid"]: (r["nodes"], r["triples"]) for r in idx["sets"]} == {
        c: (len(m), dst_count[c]) for c, m in sets.items()
    }
    comp_nodes: dict[int, int] = defaultdict(int)
    for v in vs.values():
        comp_nodes[v["ccid"]] += 1
    assert {r["ccid"]: r["nodes"] for r in idx["components"]} == dict(comp_nodes)


def check_split_tree(tree: list[dict], workflow: dict) -> None:
    adj: dict[str, set[str]] = defaultdict(set)
    for a, b in workflow["edges"]:
        adj[a].add(b)
        adj[b].add(a)

    def names(level: list[dict]) -> list[str]:
        return [t for s in level for t in s["tables"]]

    def check(level: list[dict], expected: set[str]) -> None:
        flat = names(level)
        assert len(flat) == len(set(flat)), "splits overlap"
        assert set(flat) == expected, "splits do not cover their parent"
        for s in level:
            members = set(s["tables"])
            seen, queue = {min(members)}, deque([min(members)])
            while queue:
                for nxt in adj[queue.popleft()]:
                    if nxt in members and nxt not in seen:
                        seen.add(nxt)
                        queue.append(nxt)
            assert seen == members, f"split {s['name']} is not weakly connected"
            if s["children"]:
                check(s["children"], members)

    check(tree, set(workflow["tables"]))


@pytest.mark.parametrize("seed", range(30))
def test_automatic_splits_are_disjoint_weakly_connected_and_nested(seed: int) -> None:
    from provplug.index.autosplit import choose_splits
    from provplug.index.splits import build_splits
    from provplug.index.workflow import WorkflowGraph

    rng = random.Random(1000 + seed)
    names, edges = random_workflow(rng, rng.randint(1, 30))
    workflow = WorkflowGraph(tuple(names), tuple(edges))
    stats = {
        "table_values": {t: rng.randint(0, 10_000) for t in names},
        "pair_triples": [(a, b, rng.randint(1, 50_000)) for a, b in edges],
    }
    spec = choose_splits(workflow, stats)
    tree = build_splits(spec, workflow)  # raises on overlap / unknown / disconnected
    as_dicts = json.loads(json.dumps([_tree(s) for s in tree]))
    check_split_tree(as_dicts, {"tables": names, "edges": edges})
    # Every split of two or more tables has sub-splits, so recursion can always go on.
    for s in (d for top in tree for d in top.walk()):
        assert bool(s.children) == (len(s.tables) > 1)
    # The chooser is deterministic.
    assert choose_splits(workflow, stats) == spec


def _tree(s: Any) -> dict:
    return {"name": s.name, "tables": list(s.tables), "children": [_tree(c) for c in s.children]}


def test_automatic_splits_cut_where_few_triples_cross() -> None:
    """A chain A->B->C->D with a thin link B->C: the top-level cut goes there."""
    from provplug.index.autosplit import choose_splits
    from provplug.index.workflow import WorkflowGraph

    wf = WorkflowGraph(("A", "B", "C", "D"), (("A", "B"), ("B", "C"), ("C", "D")))
    stats = {
        "table_values": {"A": 100, "B": 100, "C": 100, "D": 100},
        "pair_triples": [("A", "B", 1000), ("B", "C", 10), ("C", "D", 1000)],
    }
    assert choose_splits(wf, stats) == [[["A"], ["B"]], [["C"], ["D"]]]


def test_user_splits_are_completed_with_the_missing_tables() -> None:
    from provplug.index.splits import build_splits
    from provplug.index.workflow import WorkflowGraph

    wf = WorkflowGraph(("A", "B", "C", "D", "E"), (("A", "B"), ("B", "C"), ("D", "E")))
    tree = build_splits([["A", ["B"]]], wf)
    assert [(s.name, s.tables) for s in tree] == [("sp1", ("A", "B")), ("sp2", ("C",)), ("sp3", ("D", "E"))]
    assert [(c.name, c.tables) for c in tree[0].children] == [("sp1.1", ("B",)), ("sp1.2", ("A",))]


def test_wcc_local_matches_union_find_on_random_graphs() -> None:
    import numpy as np

    from provplug.index.localwcc import wcc_labels

    for seed in range(20):
        rng = random.Random(seed)
        n = rng.randint(1, 300)
        m = rng.randint(0, 2 * n)
        src = [rng.randrange(n) for _ in range(m)]
        dst = [rng.randrange(n) for _ in range(m)]
        labels = wcc_labels(n, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64))
        uf = union_find(zip(src, dst, strict=True))
        assert [uf.get(i, i) for i in range(n)] == labels.tolist()
