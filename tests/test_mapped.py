"""Mapped index files read in phases: fenced key search, pages asked for before they are read.

The answers are checked against a plain BFS over the imported triples (the
oracle), with fences every few rows so that every bucket has many of them."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.fs as pafs
import pytest
from test_lineage_support import layered_dag

import provplug
from provplug.errors import DamagedIndexError
from provplug.index import build_index, current_dir, integrity, mapped
from provplug.ingest.importer import import_provenance
from provplug.query import index_reader
from provplug.query.index_reader import IndexReader
from provplug.store.open import open_store
from provplug.testing import TripleOracle

FEW_ROWS = 4  # fences this close make a bucket of a small store hold many


@pytest.fixture(autouse=True)
def _mapped_files_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(index_reader.MAPPED_ENV, raising=False)


@pytest.fixture(scope="module")
def fenced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[tuple[int, int]]]]:
    """A random layered DAG indexed with a fence every FEW_ROWS rows."""
    folder = tmp_path_factory.mktemp("fenced")
    triples, values, edges = layered_dag(folder, seed=5, layers=6, width=200, fan_in=2)
    store = folder / "dag.prov"
    import_provenance(open_store(store), triples, values)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mapped, "FENCE_ROWS", FEW_ROWS)
        build_index(store, theta=30, splits=[["T0", "T1"], ["T2", "T3"], ["T4", "T5"]], engine="local")
    yield store, edges


@pytest.fixture
def few_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapped, "FENCE_ROWS", FEW_ROWS)  # as the fixture's index was written


def _got(answer: Any) -> tuple[set[int], set[tuple[int, int]]]:
    d = answer.to_dict()
    return {r["value_id"] for r in d["lineage"]}, {(e["src"], e["dst"]) for e in d["edges"]}


def _expected(edges: list[tuple[int, int]], value: int, direction: str) -> tuple[set[int], set[tuple[int, int]]]:
    answer = TripleOracle(edges).answer([value], direction)
    return set(answer.values), set(answer.edges)


def _values(edges: list[tuple[int, int]], n: int) -> list[int]:
    return random.Random(3).sample(sorted({v for e in edges for v in e}), n)


@pytest.mark.parametrize("fence_rows", [FEW_ROWS, mapped.FENCE_ROWS])
@pytest.mark.parametrize("rows", [0, 1, 3, 4, 5, 8, 9, 40, 41, 600, 5000])
def test_fenced_search_finds_what_searchsorted_finds(
    rows: int, fence_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapped, "FENCE_ROWS", fence_rows)
    rng = np.random.default_rng(rows)
    key = np.sort(rng.integers(0, max(rows // 40, 12), rows))  # runs longer than a fence, and keys absent
    part = mapped.MappedRows(key, {}, "unused", "k", {"k": 0}, key[::fence_rows])
    wanted = np.arange(-2, key.max(initial=0) + 3)
    plan = mapped.KeyPages(part._pages(wanted, "left"), part._pages(wanted, "right")) if rows else None
    starts, ends = part.spans(wanted, plan)
    assert starts.tolist() == np.searchsorted(key, wanted, "left").tolist()
    assert ends.tolist() == np.searchsorted(key, wanted, "right").tolist()


def test_every_bucket_has_its_fences(fenced: tuple[Path, list[tuple[int, int]]]) -> None:
    store, _ = fenced
    gen_dir = Path(current_dir(open_store(store)))
    manifest = json.loads((gen_dir / mapped.MAPPED_MANIFEST).read_text())
    reader = IndexReader.current(open_store(store))
    for dataset in mapped.MAPPED_BUCKETED:
        starts = manifest[mapped.FENCES][dataset]
        assert mapped.fences_file(dataset) in manifest["files"]
        for b in range(len(starts) - 1):
            part = reader._sorted_bucket(dataset, b, mapped.MAPPED_BUCKETED[dataset][0], [])
            assert isinstance(part, mapped.MappedRows) and part.fences is not None
            assert part.fences.tolist() == part.key[::FEW_ROWS].tolist()


@pytest.mark.parametrize("method", ["csprov", "ccprov"])
def test_fenced_lookups_answer_as_the_oracle(
    fenced: tuple[Path, list[tuple[int, int]]], method: str, few_rows: None
) -> None:
    store, edges = fenced
    opened = provplug.open(store)
    for value in _values(edges, 12):
        for direction in ("up", "down"):
            answer = opened.lineage(value_id=value, method=method, direction=direction)
            assert _got(answer) == _expected(edges, value, direction)


def test_a_lookup_asks_for_every_page_it_reads(
    fenced: tuple[Path, list[tuple[int, int]]], few_rows: None, mocker: Any
) -> None:
    """The key pages the fences name and the rows' pages of every column
    read are advised (``WILLNEED``) by the lookup itself."""
    store, edges = fenced
    advised: dict[str, list[tuple[int, int]]] = {}
    real_open = mapped.os.open

    def remember_path(path: str, flags: int) -> int:
        fd = real_open(path, flags)
        paths[fd] = path
        return fd

    paths: dict[int, str] = {}
    mocker.patch.object(mapped.os, "open", side_effect=remember_path)
    mocker.patch.object(
        mapped.os,
        "posix_fadvise",
        side_effect=lambda fd, at, n, _: advised.setdefault(paths[fd], []).append((at, at + n)),
    )
    reader = IndexReader.current(open_store(store))
    csids = np.unique(reader.sets_of(np.array(_values(edges, 30)))[1])
    triples = reader.triples_of_sets(csids)
    assert len(triples.src) > 0
    for part, keys, starts, ends in reader._lookup("triples", "dst_csid", [], csids, reader.triple_buckets):
        assert isinstance(part, mapped.MappedRows)
        for column in ("src", "dst", "op"):
            _assert_covered(
                advised.get(part.path, []), part.offsets[column] + 8 * starts, part.offsets[column] + 8 * ends
            )
        lo, hi = part._pages(keys, "left")
        _assert_covered(
            advised.get(part.path, []), part.offsets["dst_csid"] + 8 * lo, part.offsets["dst_csid"] + 8 * hi
        )


def test_pages_asked_for_once_are_not_asked_for_again(
    fenced: tuple[Path, list[tuple[int, int]]], few_rows: None, mocker: Any
) -> None:
    """A lookup repeated in a process finds its pages known (read once
    already): it asks for nothing, and answers the same."""
    store, edges = fenced
    reader = IndexReader.current(open_store(store))
    csids = np.unique(reader.sets_of(np.array(_values(edges, 30)))[1])
    first = reader.triples_of_sets(csids)
    advice = mocker.spy(mapped, "will_need")
    again = reader.triples_of_sets(csids)
    assert advice.call_count == 0
    assert sorted(zip(again.src.tolist(), again.dst.tolist(), strict=True)) == sorted(
        zip(first.src.tolist(), first.dst.tolist(), strict=True)
    )


def _assert_covered(advised: list[tuple[int, int]], starts: np.ndarray, ends: np.ndarray) -> None:
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        if hi > lo:
            assert any(a <= lo and hi <= b for a, b in advised), f"bytes {lo}:{hi} read without being asked for"


def _rewrite_manifest(store: Path, change: Any) -> None:
    """Change the mapped manifest as an older or damaged build would have
    written it, and record it in meta.json (the file check passes)."""
    gen_dir = Path(current_dir(open_store(store)))
    path = gen_dir / mapped.MAPPED_MANIFEST
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))
    meta_path = gen_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta[integrity.FILES][mapped.MAPPED_MANIFEST] = path.stat().st_size
    meta_path.write_text(json.dumps(meta))


def test_a_generation_without_fences_answers_the_same(
    fenced: tuple[Path, list[tuple[int, int]]], tmp_path: Path, few_rows: None
) -> None:
    store, edges = fenced
    older = tmp_path / "older.prov"
    pafs.copy_files(str(store), str(older))
    _rewrite_manifest(older, lambda m: m.pop(mapped.FENCES))
    reader = IndexReader.current(open_store(older))
    part = reader._sorted_bucket("triples", 0, "dst_csid", [])
    assert isinstance(part, mapped.MappedRows) and part.fences is None
    opened = provplug.open(older)
    for value in _values(edges, 6):
        for direction in ("up", "down"):
            assert _got(opened.lineage(value_id=value, direction=direction)) == _expected(edges, value, direction)


def test_fences_that_disagree_with_the_manifest_are_a_damaged_index(
    fenced: tuple[Path, list[tuple[int, int]]], tmp_path: Path, few_rows: None
) -> None:
    store, edges = fenced
    damaged = tmp_path / "damaged.prov"
    pafs.copy_files(str(store), str(damaged))

    def short(manifest: dict[str, Any]) -> None:
        manifest[mapped.FENCES]["setdeps"][-1] -= 1

    _rewrite_manifest(damaged, short)
    with pytest.raises(DamagedIndexError, match="fences"):
        provplug.open(damaged).lineage(value_id=_values(edges, 1)[0])


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="the kernel's view of a mapping is Linux's")
def test_mapped_files_are_read_where_touched_not_around(fenced: tuple[Path, list[tuple[int, int]]]) -> None:
    """A fault must not read the disk's readahead window (8 MiB here) around
    the page: the mapping carries the random-access hint (``rr``)."""
    store, _ = fenced
    part = IndexReader.current(open_store(store))._sorted_bucket("triples", 0, "dst_csid", [])
    assert isinstance(part, mapped.MappedRows)
    flags = _mapping_flags(part.path)
    assert flags and all("rr" in f.split() for f in flags)


def _mapping_flags(path: str) -> list[str]:
    """The VmFlags of every mapping of ``path`` in this process."""
    flags, inside = [], False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):  # a mapping's first line: its range, ..., its file
            inside = line.endswith(path)
        elif inside and line.startswith("VmFlags:"):
            flags.append(line[len("VmFlags:") :])
    return flags
