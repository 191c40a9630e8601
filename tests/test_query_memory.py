"""The memory-bounded query path: a query cache bounded by bytes (LRU, sized
from the machine or PROVPLUG_QUERY_CACHE_MB), the driver-or-Spark decision
from the driver's memory budget, and the mapped index files. Every answer is
checked against a plain BFS over the imported triples (the oracle)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from test_lineage_support import layered_dag

import provplug
from provplug.errors import DamagedIndexError, LineageQueryError
from provplug.index import build_index, current_dir, mapped, read_meta
from provplug.index.mapped import write_mapped
from provplug.ingest.importer import import_provenance
from provplug.query import driver, index_reader
from provplug.query.index_reader import IndexReader, _ByteBudgetCache
from provplug.store.open import open_store
from provplug.testing import TripleOracle

METHODS = ("ccprov", "csprov", "auto")


@pytest.fixture(scope="module")
def dag(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, int]]]:
    """A random layered DAG (large components, many sets), indexed (with its
    mapped files, which the local build writes)."""
    folder = tmp_path_factory.mktemp("memory")
    triples, values, edges = layered_dag(folder, seed=11, layers=6, width=300, fan_in=2)
    store = folder / "dag.prov"
    import_provenance(open_store(store), triples, values)
    build_index(store, theta=40, splits=[["T0", "T1"], ["T2", "T3"], ["T4", "T5"]], engine="local")
    return store, edges


@pytest.fixture
def mapped_dag(dag: tuple[Path, list[tuple[int, int]]], tmp_path: Path) -> tuple[Path, list[tuple[int, int]]]:
    """A copy of ``dag`` (tests may damage it)."""
    store, edges = dag
    copy = tmp_path / "mapped.prov"
    pafs.copy_files(str(store), str(copy))
    return copy, edges


@pytest.fixture(autouse=True)
def _default_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (index_reader.CACHE_ENV, driver.DRIVER_ENV, index_reader.MAPPED_ENV):
        monkeypatch.delenv(name, raising=False)


def _expected(edges: list[tuple[int, int]], value: int, direction: str) -> tuple[set[int], set[tuple[int, int]]]:
    answer = TripleOracle(edges).answer([value], direction)
    return set(answer.values), set(answer.edges)


def _got(answer: Any) -> tuple[set[int], set[tuple[int, int]]]:
    d = answer.to_dict()
    return {r["value_id"] for r in d["lineage"]}, {(e["src"], e["dst"]) for e in d["edges"]}


def _sample(edges: list[tuple[int, int]], n: int, seed: int) -> list[int]:
    return random.Random(seed).sample(sorted({v for e in edges for v in e}), n)


# -- the cache itself ------------------------------------------------------------------


def test_cache_evicts_least_recently_used_beyond_its_budget() -> None:
    cache = _ByteBudgetCache(budget=100)
    cache.begin_query()
    for key in "abc":
        assert cache.put((key,), key, 30)
    cache.begin_query()
    assert cache.peek(("a",)) == "a"  # a is now the most recently used
    assert cache.put(("d",), "d", 30)  # evicts b, the least recently used
    assert cache.peek(("b",)) is None and cache.peek(("c",)) == "c"
    assert cache.used <= 100 and cache.evictions == 1


def test_cache_never_evicts_what_the_running_query_uses() -> None:
    cache = _ByteBudgetCache(budget=100)
    cache.begin_query()
    assert cache.put(("a",), "a", 60)
    assert not cache.would_fit(60)
    assert not cache.put(("b",), "b", 60)  # refused: a is in use by this query
    assert cache.peek(("a",)) == "a" and cache.peek(("b",)) is None
    cache.begin_query()
    assert cache.would_fit(60) and cache.put(("b",), "b", 60)  # a query later, a may go
    assert cache.peek(("a",)) is None and cache.used == 60
    assert not cache.put(("huge",), "x", 101)  # larger than the budget: never kept


def test_cache_budget_comes_from_the_environment_or_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(index_reader.CACHE_ENV, "3")
    assert _ByteBudgetCache().budget == 3 << 20
    monkeypatch.delenv(index_reader.CACHE_ENV)
    monkeypatch.setattr(index_reader, "available_memory", lambda: 10 << 30)
    assert _ByteBudgetCache().budget == 5 << 30  # half of what is available
    monkeypatch.setattr(index_reader, "available_memory", lambda: 1 << 20)
    assert _ByteBudgetCache().budget == index_reader.MIN_CACHE
    monkeypatch.setenv(index_reader.CACHE_ENV, "lots")
    with pytest.raises(LineageQueryError, match="PROVPLUG_QUERY_CACHE_MB must be a non-negative number of MiB"):
        _ = _ByteBudgetCache().budget


def test_available_memory_is_what_the_kernel_says() -> None:
    lines = Path("/proc/meminfo").read_text().splitlines()
    total = next(int(line.split()[1]) * 1024 for line in lines if line.startswith("MemTotal:"))
    assert 0 < driver.available_memory() <= total


def test_a_shrunk_budget_evicts_at_once(
    dag: tuple[Path, list[tuple[int, int]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, edges = dag
    monkeypatch.setenv(index_reader.MAPPED_ENV, "0")  # the Parquet buckets' cache
    opened = provplug.open(store)
    for value in _sample(edges, 10, 1):
        opened.lineage(value_id=value, method="ccprov")
    assert index_reader.cache_usage(opened.store)["used"] > 0
    index_reader.set_cache_budget(opened.store, 0.001)
    assert index_reader.cache_usage(opened.store)["used"] <= 1048


def test_each_opened_store_has_its_own_cache_and_budget(dag: tuple[Path, list[tuple[int, int]]]) -> None:
    store, edges = dag
    first, second = provplug.open(store), provplug.open(store)
    value = _sample(edges, 1, 8)[0]
    first.lineage(value_id=value)
    assert index_reader.cache_usage(first.store)["entries"] > 0
    assert index_reader.cache_usage(second.store)["entries"] == 0  # nothing read through the other
    index_reader.set_cache_budget(second.store, 0)
    assert index_reader.cache_usage(first.store)["budget"] > 0 and index_reader.cache_usage(first.store)["used"] > 0
    assert _got(second.lineage(value_id=value)) == _got(first.lineage(value_id=value))
    assert index_reader.cache_usage(second.store)["entries"] == 0  # it keeps nothing, the other keeps its own
    assert index_reader.caches_of(first.store) is not index_reader.caches_of(second.store)


# -- answers under a tiny cache ------------------------------------------------------------


@pytest.mark.parametrize("mapped", ["1", "0"])
def test_a_tiny_cache_evicts_and_answers_as_an_unbounded_one(
    dag: tuple[Path, list[tuple[int, int]]], mapped: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, edges = dag
    monkeypatch.setenv(index_reader.MAPPED_ENV, mapped)  # "0": read the Parquet buckets
    queried = _sample(edges, 12, 2)
    opened = provplug.open(store)
    unbounded = {}
    for direction in ("up", "down"):
        for value in queried:
            unbounded[(value, direction)] = _got(opened.lineage(value_id=value, method="csprov", direction=direction))
    full = index_reader.cache_usage(opened.store)["used"]
    index_reader.clear_cache(opened.store)
    evicted = index_reader.cache_usage(opened.store)["evictions"]  # a count kept by clear_cache
    budget = full // 4
    index_reader.set_cache_budget(opened.store, budget / (1 << 20))
    for _ in range(2):  # the second round meets buckets already touched: loaded, kept or evicted
        for direction in ("up", "down"):
            for value in queried:
                for method in METHODS:
                    answer = opened.lineage(value_id=value, method=method, direction=direction)
                    assert answer.stats["path"] == "driver"
                    assert _got(answer) == unbounded[(value, direction)] == _expected(edges, value, direction)
                    assert index_reader.cache_usage(opened.store)["used"] <= budget
    assert index_reader.cache_usage(opened.store)["evictions"] > evicted


def test_whole_table_rq_is_held_only_while_it_fits(dag: tuple[Path, list[tuple[int, int]]]) -> None:
    store, edges = dag
    opened = provplug.open(store)
    value = _sample(edges, 1, 3)[0]
    index_reader.set_cache_budget(opened.store, 0)
    answer = opened.lineage(value_id=value, method="rq")
    assert answer.stats["path"] == "driver" and _got(answer) == _expected(edges, value, "up")
    assert index_reader.cache_usage(opened.store)["entries"] == 0


# -- driver or Spark: the driver's memory budget ------------------------------------------


def test_the_driver_budget_decides_driver_or_spark(
    dag: tuple[Path, list[tuple[int, int]]], spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, edges = dag
    opened = provplug.open(store)
    counts = {v: opened.lineage(value_id=v, method="csprov").stats["triples_scanned"] for v in _sample(edges, 30, 4)}
    small, large = min(counts, key=counts.__getitem__), max(counts, key=counts.__getitem__)
    assert counts[small] < counts[large]
    # A budget that holds the small query's triples but not the large one's.
    budget = (counts[small] + counts[large]) // 2 * driver.BYTES_PER_TRIPLE
    monkeypatch.setenv(driver.DRIVER_ENV, str(budget / (1 << 20)))
    for value, path in ((small, "driver"), (large, "spark")):
        answer = opened.lineage(value_id=value, method="auto", spark=spark)
        assert answer.stats["path"] == path, (value, counts[value], budget)
        assert _got(answer) == _expected(edges, value, "up")
    # A tau given by the caller replaces the budget (here: the driver where the budget says Spark).
    assert opened.lineage(value_id=large, tau=counts[large] + 1).stats["path"] == "driver"


def test_by_default_a_query_that_fits_the_machine_stays_on_the_driver(
    dag: tuple[Path, list[tuple[int, int]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, edges = dag
    # More triples than the old fixed tau, but far less memory than the machine has: the driver.
    assert driver.fits_driver(2_500_000)
    monkeypatch.setattr(driver, "available_memory", lambda: 2 * 2_500_000 * driver.BYTES_PER_TRIPLE)
    assert driver.fits_driver(2_500_000) and not driver.fits_driver(2_500_001)
    monkeypatch.setattr(driver, "available_memory", lambda: 0)  # nothing fits: would go to Spark
    value = _sample(edges, 1, 5)[0]
    assert provplug.open(store).lineage(value_id=value, tau=10**9).stats["path"] == "driver"


def test_a_bad_driver_budget_is_one_line(
    dag: tuple[Path, list[tuple[int, int]]], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, edges = dag
    monkeypatch.setenv(driver.DRIVER_ENV, "-5")
    result = cli("lineage", store, "--value-id", str(_sample(edges, 1, 6)[0]))
    assert result.code == 2 and result.err.count("\n") == 1
    assert "PROVPLUG_QUERY_DRIVER_MB must be a non-negative number of MiB, not '-5'" in result.err


# -- mapped index files ---------------------------------------------------------------------


def test_mapped_files_answer_as_parquet_does_without_reading_parquet_triples(
    mapped_dag: tuple[Path, list[tuple[int, int]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, edges = mapped_dag
    queried = _sample(edges, 12, 7)
    opened = provplug.open(store)
    monkeypatch.setenv(index_reader.MAPPED_ENV, "0")
    on_parquet = {
        (v, d, m): opened.lineage(value_id=v, method=m, direction=d).to_dict()
        for v in queried
        for d in ("up", "down")
        for m in METHODS
    }
    monkeypatch.delenv(index_reader.MAPPED_ENV)
    opened = provplug.open(store)  # a new store: nothing read from Parquet is cached

    def no_parquet(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a mapped generation read a Parquet bucket")

    monkeypatch.setattr(IndexReader, "_scan", no_parquet)
    monkeypatch.setattr(IndexReader, "set_table", no_parquet)
    for (value, direction, method), expected in on_parquet.items():
        got = opened.lineage(value_id=value, method=method, direction=direction).to_dict()
        assert got["lineage"] == expected["lineage"] and got["edges"] == expected["edges"]
        assert got["stats"]["triples_scanned"] == expected["stats"]["triples_scanned"]
        assert got["stats"]["sets_read"] == expected["stats"]["sets_read"]
        assert _got(opened.lineage(value_id=value, method=method, direction=direction)) == _expected(
            edges, value, direction
        )
    generation = IndexReader.current(opened.store).generation
    index_files = [e.size for k, e in index_reader.caches_of(opened.store).files.items.items() if k[0] == generation]
    assert index_files and sum(index_files) <= len(index_files) * index_reader.MAPPED_ENTRY_BYTES


def test_a_fresh_local_index_has_its_mapped_files_in_its_file_listing(
    dag: tuple[Path, list[tuple[int, int]]], tmp_path: Path
) -> None:
    store, _ = dag
    gen_dir = Path(current_dir(open_store(store)))
    manifest = json.loads((gen_dir / mapped.MAPPED_MANIFEST).read_text())
    listed = read_meta(open_store(store))["files"]  # type: ignore[index]
    assert mapped.MAPPED_MANIFEST in listed and mapped.MAPPED_SETS_BY_CCID in manifest["files"]
    assert {f"{mapped.MAPPED_DIR}/{d}/bucket=0.arrow" for d in mapped.MAPPED_BUCKETED} <= set(manifest["files"])
    assert all(listed[relative] == size for relative, size in manifest["files"].items())
    # Rewriting them (as an older generation would get them) gives the same files.
    copy = tmp_path / "again.prov"
    pafs.copy_files(str(store), str(copy))
    again = write_mapped(pafs.LocalFileSystem(), current_dir(open_store(copy)), read_meta(open_store(copy))["buckets"])  # type: ignore[index]
    assert again == manifest["files"]


def test_mapped_files_agree_with_spark(mapped_dag: tuple[Path, list[tuple[int, int]]], spark: Any) -> None:
    store, edges = mapped_dag
    opened = provplug.open(store)
    for value in _sample(edges, 1, 8):
        for direction in ("up", "down"):
            on_spark = opened.lineage(value_id=value, method="csprov", direction=direction, tau=0, spark=spark)
            assert on_spark.stats["path"] == "spark"
            assert _got(on_spark) == _expected(edges, value, direction)


def test_mapped_files_are_sorted_copies_of_the_buckets(mapped_dag: tuple[Path, list[tuple[int, int]]]) -> None:
    store, _ = mapped_dag
    gen_dir = Path(current_dir(open_store(store)))
    manifest = json.loads((gen_dir / mapped.MAPPED_MANIFEST).read_text())
    assert manifest["format"] == mapped.MAPPED_FORMAT
    for relative, size in manifest["files"].items():
        assert (gen_dir / relative).stat().st_size == size
    reader = IndexReader.current(open_store(store))
    total = 0
    for b in range(reader.triple_buckets):
        part = reader._sorted_bucket("triples", b, "dst_csid", ["src", "dst", "op"])
        assert (part.key[1:] >= part.key[:-1]).all() and (part.key % reader.triple_buckets == b).all()
        assert not part.key.flags.writeable  # a view of the mapped pages, not a copy
        total += len(part.key)
    assert total == read_meta(open_store(store))["counts"]["triples"]  # type: ignore[index]


def test_a_damaged_mapped_file_is_a_damaged_index(mapped_dag: tuple[Path, list[tuple[int, int]]], cli: Any) -> None:
    store, edges = mapped_dag
    gen_dir = Path(current_dir(open_store(store)))
    victim = gen_dir / mapped.MAPPED_DIR / "value_sets"
    for f in victim.iterdir():
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(DamagedIndexError, match="changed size: mapped/value_sets/"):
        provplug.open(store).lineage(value_id=_sample(edges, 1, 9)[0])
    result = cli("lineage", store, "--value-id", str(_sample(edges, 1, 9)[0]))
    assert result.code != 0 and "re-run `provplug index" in result.err and result.err.count("\n") == 1


def test_a_store_collected_after_its_spark_context_stopped_unpersists_nothing(mocker: Any) -> None:
    """The cached Spark frames go with their store, unless their context was
    stopped first (it freed them; asking it again raised in a finalizer)."""
    from provplug.query.index_reader import _unpersist

    def frame(stopped: bool) -> Any:
        cached = mocker.MagicMock()
        cached.sparkSession.sparkContext._jsc.sc.return_value.isStopped.return_value = stopped
        return cached

    live, dead = frame(False), frame(True)
    frames = {"live": live, "dead": dead}
    _unpersist(frames)
    live.unpersist.assert_called_once_with()
    dead.unpersist.assert_not_called()
    assert frames == {}
