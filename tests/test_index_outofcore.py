"""The local index out of core: chunked runs (a tiny memory budget, a few
triples per chunk) write exactly the files a single-chunk run writes and
agree with plain-Python oracles; the streamed union-find and the distinct
value runs against oracles; the budget decides the engine (``auto``)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_index import TABLE7, TABLE7_SPLITS, _check_table7, imported, read_index
from test_index_properties import algorithm3, make_store, union_find


def budget_for(chunk_rows: int) -> int:
    """The memory budget whose chunks hold ``chunk_rows`` triples."""
    from provplug.index import budget

    return chunk_rows * budget.CHUNK_SHARE * budget.BYTES_PER_CHUNK_ROW


def generation_files(store: Any) -> dict[str, Any]:
    """Every data file of the live generation: rows in file order, schema, row groups."""
    from provplug.index import current_dir

    d = Path(current_dir(store))
    out: dict[str, Any] = {}
    for path in sorted(d.rglob("*.parquet")):
        meta = pq.ParquetFile(path).metadata
        table = pq.read_table(path)
        rel = str(path.relative_to(d))
        out[rel] = (
            str(table.schema),
            table.to_pydict(),
            [meta.row_group(i).num_rows for i in range(meta.num_row_groups)],
        )
    meta = json.loads((d / "meta.json").read_text())
    out["meta"] = {k: meta[k] for k in ("counts", "splits", "split_tree", "workflow", "theta", "buckets", "engine")}
    return out


@pytest.mark.parametrize("seed", range(6))
def test_chunked_build_writes_the_files_of_a_single_chunk_build(tmp_path: Path, seed: int) -> None:
    from provplug.index import build_index

    store, triples, _ = make_store(tmp_path, seed, n_tables=7, values_per_table=40)
    theta = random.Random(seed).choice([4, 9, 30])
    build_index(store, theta=theta, engine="local", memory_budget=2**33)  # one chunk
    whole = generation_files(store)
    chunk = random.Random(seed).choice([1, 3, 17])
    assert chunk < len(triples) // 4  # many chunks, and rounds that read several
    build_index(store, theta=theta, engine="local", memory_budget=budget_for(chunk))
    assert generation_files(store) == whole


@pytest.mark.parametrize("seed", range(8, 14))
def test_chunked_build_matches_union_find_and_algorithm3(tmp_path: Path, seed: int) -> None:
    from provplug.index import build_index

    store, triples, table_of = make_store(tmp_path, seed)
    theta = random.Random(seed).choice([5, 12, 40])
    build_index(store, theta=theta, engine="local", memory_budget=budget_for(random.Random(seed).choice([2, 5])))
    idx = read_index(store)
    vs = {r["value_id"]: r for r in idx["value_sets"]}
    assert {v: r["ccid"] for v, r in vs.items()} == union_find((s, d) for s, d, _ in triples)
    sets: dict[int, set[int]] = {}
    for v, r in vs.items():
        sets.setdefault(r["csid"], set()).add(v)
    expected = algorithm3(triples, table_of, theta, idx["meta"]["split_tree"])
    assert sorted(map(sorted, sets.values())) == sorted(map(sorted, expected))
    assert all(csid == min(members) for csid, members in sets.items())
    got = {(t["src"], t["dst"]): (t["src_csid"], t["dst_csid"], t["ccid"]) for t in idx["triples"]}
    assert got == {(s, d): (vs[s]["csid"], vs[d]["csid"], vs[d]["ccid"]) for s, d, _ in triples}
    cross = {(vs[s]["csid"], vs[d]["csid"]) for s, d, _ in triples if vs[s]["csid"] != vs[d]["csid"]}
    assert sorted((r["src_csid"], r["dst_csid"]) for r in idx["setdeps"]) == sorted(cross)
    assert sorted((r["src_csid"], r["dst_csid"]) for r in idx["rsetdeps"]) == sorted(cross)


def test_table7_in_one_triple_chunks(store_path: Path) -> None:
    from provplug.index import build_index

    store = imported(store_path, TABLE7)
    meta = build_index(store, theta=4, splits=TABLE7_SPLITS, engine="local", memory_budget=budget_for(1))
    assert meta["engine"] == "local"
    assert meta["counts"] == {"triples": 12, "values": 12, "components": 1, "sets": 4, "set_dependencies": 3}
    _check_table7(read_index(store))
    gen = store_path / "index" / meta["generation"]
    assert not (gen / "_scratch").exists()  # the spills are gone
    assert "_scratch" not in json.dumps(meta["files"])


def test_streamed_union_find_matches_a_plain_union_find() -> None:
    from provplug.index.localwcc import flatten, merge_groups

    for seed in range(30):
        rng = random.Random(seed)
        n = rng.randint(1, 400)
        m = rng.randint(0, 3 * n)
        src = np.array([rng.randrange(n) for _ in range(m)], dtype=np.int32)
        dst = np.array([rng.randrange(n) for _ in range(m)], dtype=np.int32)
        labels = np.arange(n, dtype=np.int32)
        step = rng.choice([1, 2, 7, 50, max(m, 1)])
        for lo in range(0, m, step):
            merge_groups(labels, src[lo : lo + step], dst[lo : lo + step])
            assert (labels <= np.arange(n)).all()  # the forest points at smaller indices only
        flatten(labels, chunk=rng.choice([1, 3, 1 << 22]))
        uf = union_find(zip(src.tolist(), dst.tolist(), strict=True))
        assert labels.tolist() == [uf.get(i, i) for i in range(n)]


def test_distinct_runs_equal_the_sorted_distinct_values_and_enforce_the_limit() -> None:
    from provplug.index.spill import DistinctRuns, TooManyValues

    rng = np.random.default_rng(3)
    for _ in range(20):
        chunks = [
            rng.integers(-50, int(rng.integers(1, 5000)), size=int(rng.integers(0, 300)))
            for _ in range(int(rng.integers(1, 40)))
        ]
        runs = DistinctRuns()
        for c in chunks:
            runs.add(c)
        expected = sorted({int(v) for c in chunks for v in c})
        assert runs.result(np.dtype(np.int64)).tolist() == expected
    limited = DistinctRuns(limit=10)
    limited.add(np.arange(10))
    limited.add(np.arange(5))  # still 10 distinct
    with pytest.raises(TooManyValues):
        limited.add(np.array([10]))


def test_auto_goes_to_spark_when_the_values_exceed_the_budget(spark: Any, store_path: Path) -> None:
    from provplug.index import build_index
    from provplug.progress import Progress

    store = imported(store_path, TABLE7)
    import io

    log = io.StringIO()
    meta = build_index(
        store, theta=4, splits=TABLE7_SPLITS, spark=spark, memory_budget=100, progress=Progress(stream=log, live=False)
    )
    assert meta["engine"] == "spark"
    assert "beyond the local memory budget" in log.getvalue()
    _check_table7(read_index(store))
    meta = build_index(store, theta=4, splits=TABLE7_SPLITS, memory_budget=2**30)
    assert meta["engine"] == "local"
    _check_table7(read_index(store))


def test_memory_budget_on_the_command_line(cli, store_path: Path) -> None:
    imported(store_path, TABLE7)
    r = cli("index", store_path, "--memory-budget", "64M", "--quiet")
    assert r.code == 0 and "(local," in r.out, r
    r = cli("index", store_path, "--memory-budget", "lots")
    assert r.code == 2 and "--memory-budget: not a memory size: 'lots'" in r.err.splitlines()[-1], r


def test_parse_size() -> None:
    from provplug.index.budget import MemoryBudgetError, parse_size

    assert parse_size("6G") == 6 * 2**30
    assert parse_size("512MiB") == 512 * 2**20
    assert parse_size("1.5g") == 3 * 2**29
    assert parse_size("1000") == 1000
    for bad in ("", "-1G", "6X", "0"):
        with pytest.raises(MemoryBudgetError):
            parse_size(bad)


def test_scratch_off_local_disk_is_a_temporary_folder_removed_afterwards() -> None:
    from provplug.index.build import _local_scratch

    class Remote:
        local = False

    with _local_scratch(Remote(), "s3://bucket/store/index/gen") as folder:  # type: ignore[arg-type]
        assert Path(folder).is_dir()
        Path(folder, "ends.src").write_bytes(b"x")
    assert not Path(folder).exists()
