"""``provplug gc --now``: the previous index generation goes at once unless a
reader holds it (provplug.index.generation holds: a shared flock on the
generation's meta.json, taken by every IndexReader)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_readonly_commands import tree_state

import provplug
from provplug.index import generation
from provplug.index.build import build_index
from provplug.query import index_reader
from provplug.query.index_reader import IndexReader
from provplug.store.open import open_store


@pytest.fixture
def reindexed(paper_rows_store: tuple[Path, dict[int, int]]) -> tuple[Path, str, str]:
    """The paper's store indexed twice: (path, previous generation, live generation)."""
    path, _ = paper_rows_store
    store = open_store(path)
    first = generation.current_generation(store)
    build_index(path, engine="local")
    live = generation.current_generation(store)
    assert first is not None and live is not None and first != live
    return path, first, live


def _generations(path: Path) -> set[str]:
    return {p.name for p in (path / "index").glob("gen-*")}


def test_gc_keeps_the_previous_generation_and_gc_now_drops_it(reindexed: tuple[Path, str, str], cli: Any) -> None:
    path, previous, live = reindexed
    kept = json.loads(cli("gc", path, "--json").out)
    assert kept["removed"] == [] and kept["skipped"] == [
        f"index generation {previous}: replaced less than 10 min ago, a query may still read it"
    ]
    assert _generations(path) == {previous, live}
    dropped = json.loads(cli("gc", path, "--now", "--json").out)
    assert [g["name"] for g in dropped["removed"]] == [previous] and dropped["bytes"] > 0
    assert _generations(path) == {live} and not (path / "index" / generation.PREVIOUS).exists()
    answer = provplug.open(path).lineage(table="AvgAge", column="Age", where="City = 'NY'").to_dict()
    assert answer["lineage"]


def test_gc_now_leaves_a_generation_a_reader_holds(reindexed: tuple[Path, str, str], cli: Any) -> None:
    path, previous, live = reindexed
    store = open_store(path)
    reader = IndexReader(store, previous)  # a query that resolved CURRENT before the re-index...
    reader.hold = generation.hold(store, previous)  # ...holds what it read
    assert generation.is_held(store, previous) and not generation.is_held(store, live)
    result = cli("gc", path, "--now")
    assert result.code == 0 and f"skipped index generation {previous}: a query holds it" in result.out
    assert _generations(path) == {previous, live}
    del reader  # the query ends
    assert not generation.is_held(store, previous)
    assert f"removed index-generation {previous}" in cli("gc", path, "--now").out
    assert _generations(path) == {live}


def test_a_reader_holds_the_generation_it_opened(reindexed: tuple[Path, str, str]) -> None:
    path, _, live = reindexed
    store = open_store(path)
    reader = IndexReader.current(store)
    assert reader.generation == live and generation.is_held(store, live)
    assert reader.hold is not None
    reader.hold.release()
    assert not generation.is_held(store, live)


def test_a_reader_that_found_its_generation_removed_opens_the_live_one(
    reindexed: tuple[Path, str, str], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CURRENT named the previous generation, then gc --now removed it before
    the reader held it: the reader resolves CURRENT again."""
    path, previous, live = reindexed
    assert cli("gc", path, "--now").code == 0
    store = open_store(path)
    assert generation.hold(store, previous) is None
    names = iter([previous, live])
    monkeypatch.setattr(index_reader, "current_generation", lambda _store: next(names))
    assert IndexReader.current(store).generation == live


def test_gc_now_dry_run_lists_the_previous_generation_and_writes_nothing(
    reindexed: tuple[Path, str, str], cli: Any
) -> None:
    path, previous, _ = reindexed
    before = tree_state(path)
    dry = json.loads(cli("gc", path, "--now", "--dry-run", "--json").out)
    assert [g["name"] for g in dry["removed"]] == [previous] and dry["dry_run"]
    assert tree_state(path) == before
