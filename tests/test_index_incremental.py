"""The incremental index (provplug.index.incremental) against a full rebuild.

Random small pipelines (imported triples over shared values, so later runs
read, extend and join earlier runs' cells) are committed and deleted in
random order; after each step the index is updated incrementally and every
answer of every method, both directions, is compared with a full rebuild of
a copy of the store (and with RQ, which reads the triples themselves).
Seeded loops: hypothesis is not installed here.
"""

from __future__ import annotations

import csv
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import provplug
from provplug.errors import NotIndexedError
from provplug.index import build_index, current_generation, read_meta
from provplug.index.incremental import LAYERS
from provplug.ingest.importer import import_provenance
from provplug.query.index_reader import IndexReader
from provplug.store.open import open_store
from provplug.store.triples import TripleFilter, triple_table

METHODS = ("rq", "ccprov", "csprov", "auto")
VALUES = 120  # value ids 1..VALUES; a triple goes from a smaller id to a larger one (no cycle)
QUERIED = 15  # values queried after each step (all methods, both directions)
TABLE_SPAN = 15  # value v is in table T{v // TABLE_SPAN}


def _commit(store: Path, rng: random.Random, folder: Path, triples: int) -> str:
    """Import one random run: ``triples`` triples between ids of a window of
    the value range, so runs overlap (share values) only in part."""
    lo = rng.randrange(1, VALUES - 30)
    hi = min(VALUES, lo + rng.randrange(20, 70))
    edges: set[tuple[int, int]] = set()
    while len(edges) < triples:
        a, b = sorted(rng.sample(range(lo, hi + 1), 2))
        edges.add((a, b))
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.iterdir()))
    triples_csv, values_csv = folder / f"t{n}.csv", folder / f"v{n}.csv"
    with triples_csv.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["src", "dst", "op"])
        w.writerows((a, b, f"op{a % 3}") for a, b in sorted(edges))
    with values_csv.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["value_id", "table"])
        w.writerows((v, f"T{v // TABLE_SPAN}") for v in sorted({v for e in edges for v in e}))
    return str(import_provenance(open_store(store), triples_csv, values_csv)["run_id"])


def _answers(store: Path, values: list[int]) -> dict[tuple[int, str, str], Any]:
    opened = provplug.open(store)
    out = {}
    for v in values:
        for method in METHODS:
            for direction in ("up", "down"):
                a = opened.lineage(value_id=v, method=method, direction=direction)
                out[v, method, direction] = (
                    sorted(a.value_ids),
                    sorted((e["src"], e["dst"], e["op"]) for e in a.edges),
                )
    return out


def _live_values(store: Path) -> list[int]:
    t = triple_table(open_store(store), ["src", "dst"])
    values = sorted(set(t.column("src").to_pylist()) | set(t.column("dst").to_pylist()))
    assert values
    return values


def _full_copy_answers(store: Path, tmp: Path, values: list[int], theta: int) -> dict[tuple[int, str, str], Any]:
    copy = tmp / f"full-{random.random():.12f}.prov"
    shutil.copytree(store, copy)
    build_index(copy, theta=theta, engine="local", full=True)
    try:
        return _answers(copy, values)
    finally:
        shutil.rmtree(copy)


@pytest.mark.parametrize("seed", range(4))
def test_incremental_answers_equal_a_full_rebuild(tmp_path: Path, seed: int) -> None:
    """Random commits (each indexed) and deletions of any run, base layer or
    not (the deletion alone updates the index: no `provplug index`)."""
    rng = random.Random(seed)
    theta = rng.choice([3, 6, 25_000])  # small: large components are split into sets
    store = tmp_path / "s.prov"
    inputs = tmp_path / "in"
    runs = [_commit(store, rng, inputs, 40), _commit(store, rng, inputs, 10)]
    build_index(store, theta=theta, engine="local")
    incremental_steps = 0
    for step in range(7):
        before = current_generation(open_store(store))
        if step == 6:  # last: a run of the base layer goes (the loop may not have picked one)
            runs.append(_commit(store, rng, inputs, 3))
            meta = build_index(store, theta=theta, engine="local")
            base = [r for r in runs if r not in {r for entry in meta.get(LAYERS, []) for r in entry["runs"]}]
            if not base:  # every base run was deleted: compact, so the base holds them all
                build_index(store, theta=theta, engine="local", full=True)
                base = list(runs)
            gone = rng.choice(base)
            runs.remove(gone)
            assert provplug.open(store).delete_run(gone)["index_stale"] is False
            meta = read_meta(open_store(store)) or {}
            assert "base" in meta["incremental"]["trimmed"]
        elif len(runs) > 1 and rng.random() < 0.4:
            gone = rng.choice(runs)
            runs.remove(gone)
            assert provplug.open(store).delete_run(gone)["index_stale"] is False
            meta = read_meta(open_store(store)) or {}
        else:
            runs.append(_commit(store, rng, inputs, rng.randrange(1, 8)))
            meta = build_index(store, theta=theta, engine="local")
        incremental_steps += "incremental" in meta
        assert current_generation(open_store(store)) != before
        assert sorted(meta["runs"]) == sorted(runs)
        values = rng.sample(_live_values(store), min(QUERIED, len(_live_values(store))))
        got = _answers(store, values)
        assert got == _full_copy_answers(store, tmp_path, values, theta)
        for (v, method, direction), answer in got.items():  # every method agrees with RQ
            assert answer == got[v, "rq", direction], (v, method, direction)
    assert incremental_steps >= 1  # the loop exercised the incremental path


def _indexed_then_a_newer_run(tmp_path: Path) -> tuple[Path, list[int], str, Any]:
    """A store of one indexed run, then a small newer run not indexed: the
    store, the indexed values, the newer run's id and its triples (src, dst)."""
    rng = random.Random(7)
    store = tmp_path / "s.prov"
    inputs = tmp_path / "in"
    _commit(store, rng, inputs, 40)
    build_index(store, engine="local")
    values = _live_values(store)
    newer = _commit(store, rng, inputs, 3)
    return store, values, newer, triple_table(open_store(store), ["src", "dst"], TripleFilter.of(runs=[newer]))


def test_earlier_runs_answer_after_a_commit_and_newer_runs_are_refused(tmp_path: Path) -> None:
    store, values, newer, t = _indexed_then_a_newer_run(tmp_path)
    derived = set(t.column("dst").to_pylist())
    untouched = [v for v in values if v not in derived | set(t.column("src").to_pylist())][:5]
    indexed = _full_copy_answers(store, tmp_path, untouched, 25_000)  # what indexing both runs answers
    # The index no longer covers every run, yet answers for the values the new run did not derive ...
    reader = IndexReader.current(open_store(store))
    assert reader.pending == [newer]
    assert reader.freshness()["index"]["not_indexed_runs"] == [newer]
    assert "1 newer run(s) are not indexed yet" in reader.freshness()["index"]["note"]
    before = _answers(store, untouched)
    assert {k: v for k, v in before.items() if k[2] == "up"} == {k: v for k, v in indexed.items() if k[2] == "up"}
    # ... and refuses a value the new run derived (its lineage changed), whatever the method.
    for method in ("ccprov", "csprov", "auto"):
        with pytest.raises(NotIndexedError, match="the index predates 1 run"):
            provplug.open(store).lineage(value_id=min(derived), method=method)
    build_index(store, engine="local")
    assert "incremental" in (read_meta(open_store(store)) or {})
    assert IndexReader.current(open_store(store)).freshness() == {}
    assert _answers(store, untouched) == indexed


def test_untouched_sets_keep_their_ids_and_files_are_linked(tmp_path: Path) -> None:
    rng = random.Random(3)
    store = tmp_path / "s.prov"
    inputs = tmp_path / "in"
    _commit(store, rng, inputs, 60)
    build_index(store, theta=4, engine="local")
    s = open_store(store)
    first = current_generation(s)
    sets_before = pq.read_table(store / "index" / str(first) / "sets.parquet").to_pylist()
    run = _commit(store, rng, inputs, 5)
    meta = build_index(store, theta=4, engine="local")
    second = current_generation(s)
    assert meta["incremental"]["added_runs"] == [run]
    # The base layer is the earlier generation's files, hard-linked: every set row and id unchanged.
    base_before = store / "index" / str(first) / "sets.parquet"
    base_after = store / "index" / str(second) / "sets.parquet"
    assert base_after.stat().st_ino == base_before.stat().st_ino
    assert pq.read_table(base_after).to_pylist() == sets_before
    layer = store / "index" / str(second) / meta[LAYERS][0]["path"]
    new_sets = pq.read_table(layer / "sets.parquet").column("csid").to_pylist()
    old_ids = {r["csid"] for r in sets_before}
    new_values = set(pq.read_table(layer / "value_sets").column("value_id").to_pylist())
    # A new set's id is one of its new values; an indexed set named in the layer only gained triples.
    assert all(c in new_values or c in old_ids for c in new_sets)


def test_deleting_an_incrementally_indexed_run_keeps_the_index_current(tmp_path: Path) -> None:
    rng = random.Random(11)
    store = tmp_path / "s.prov"
    inputs = tmp_path / "in"
    first = _commit(store, rng, inputs, 40)
    build_index(store, theta=5, engine="local")
    second = _commit(store, rng, inputs, 6)
    build_index(store, theta=5, engine="local")
    done = provplug.open(store).delete_run(second)
    assert done["index_stale"] is False
    meta = read_meta(open_store(store)) or {}
    assert meta["runs"] == [first] and meta[LAYERS] == []
    values = _live_values(store)
    assert _answers(store, values) == _full_copy_answers(store, tmp_path, values, 5)
    # A run in the base layer is trimmed from it: the index stays current, no rebuild.
    third = _commit(store, rng, inputs, 6)
    build_index(store, theta=5, engine="local")
    assert provplug.open(store).delete_run(first)["index_stale"] is False
    meta = read_meta(open_store(store)) or {}
    assert meta["runs"] == [third] and meta["incremental"]["trimmed"]["base"]["triples_removed"] == 40
    values = _live_values(store)
    assert _answers(store, values) == _full_copy_answers(store, tmp_path, values, 5)


def test_full_flag_rebuilds_and_an_unchanged_store_rebuilds_in_full(tmp_path: Path) -> None:
    rng = random.Random(5)
    store = tmp_path / "s.prov"
    inputs = tmp_path / "in"
    _commit(store, rng, inputs, 30)
    build_index(store, engine="local")
    _commit(store, rng, inputs, 4)
    assert "incremental" not in build_index(store, engine="local", full=True)
    assert "incremental" not in build_index(store, engine="local")  # nothing new: full (compacts)


def test_an_answer_from_an_index_lacking_newer_runs_says_so(tmp_path: Path) -> None:
    store, values, newer, t = _indexed_then_a_newer_run(tmp_path)
    value = next(v for v in values if v not in set(t.column("dst").to_pylist()) | set(t.column("src").to_pylist()))
    answer = provplug.open(store).lineage(value_id=value, method="csprov")
    index = answer.to_dict()["stats"]["index"]
    assert index["not_indexed_runs"] == [newer]
    assert "index: 1 newer run(s) are not indexed yet" in answer.render()
    build_index(store, engine="local")
    answer = provplug.open(store).lineage(value_id=value, method="csprov")
    assert "index" not in answer.to_dict()["stats"] and "not indexed yet" not in answer.render()
