"""Read-only commands write nothing to the store: not a file, not a lock,
not a temporary removed again. Tests run as root, where a read-only mode
stops no write, so each command is checked against the store's whole file
tree (every name, size and modification time, directories included: a file
created and removed again changes its directory's mtime)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from provplug.index.build import build_index

TreeState = dict[str, tuple[str, int, int]]


def tree_state(root: Path) -> TreeState:
    """Name -> (kind, size, mtime in ns) of ``root`` and everything under it."""
    state = {}
    for path in [root, *root.rglob("*")]:
        info = path.lstat()
        kind = "dir" if path.is_dir() else "file"
        state[path.relative_to(root).as_posix()] = (kind, info.st_size if kind == "file" else 0, info.st_mtime_ns)
    return state


@pytest.fixture
def reindexed(paper_rows_store: tuple[Path, dict[int, int]]) -> Path:
    """The paper's store indexed twice: a live and a previous generation."""
    path, _ = paper_rows_store
    build_index(path, engine="local")
    return path


READ_ONLY = [
    ("gc", "{store}", "--dry-run"),
    ("gc", "{store}", "--dry-run", "--json"),
    ("stats", "{store}"),
    ("stats", "{store}", "--json"),
    ("runs", "{store}"),
    ("tables", "{store}"),
    ("show", "{store}", "Person2"),
    ("lineage", "{store}", "AvgAge.Age", "--where", "City = 'NY'"),
    ("lineage", "{store}", "Person1.Name", "--direction", "down", "--json"),
    ("graph", "{store}"),
    ("export", "{store}", "--format", "prov-json"),
    ("depends", "{store}", "Person1.Age", "AvgAge.Age"),
    ("whatif", "{store}", "--delete", "Person1", "--where", "Name = 'Mark'"),
]


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c).replace("{store} ", "").replace("{store}", ""))
def test_a_read_only_command_leaves_the_store_as_it_was(reindexed: Path, cli: Any, command: tuple[str, ...]) -> None:
    args = [a.format(store=reindexed) for a in command]
    cli(*args)  # a first call may fill process caches; neither call may write
    before = tree_state(reindexed)
    result = cli(*args)
    assert result.code == 0, result
    assert tree_state(reindexed) == before


def test_gc_dry_run_lists_what_gc_removes_without_removing_it(reindexed: Path, cli: Any) -> None:
    """The dry run takes no build lock (that would write), yet it lists the
    same garbage as the real run."""
    from provplug.index import generation
    from provplug.store.open import open_store

    store = open_store(reindexed)
    stale = reindexed / "index" / "gen-00000000T000000-deadbeef"  # an abandoned build's generation
    stale.mkdir()
    (stale / "part.parquet").write_bytes(b"x" * 10)
    before = tree_state(reindexed)
    dry = cli("gc", reindexed, "--dry-run", "--json")
    assert tree_state(reindexed) == before
    assert '"gen-00000000T000000-deadbeef"' in dry.out
    assert generation.garbage_generations(store, dry_run=True) == generation.garbage_generations(store)
    assert cli("gc", reindexed).code == 0 and not stale.exists()


def test_gc_dry_run_sees_a_running_build_without_taking_its_lock(reindexed: Path, cli: Any) -> None:
    from provplug.index import generation
    from provplug.store.open import open_store

    store = open_store(reindexed)
    with generation.build_lock(store):
        before = tree_state(reindexed)
        assert generation.garbage_generations(store, dry_run=True) is None
        assert "an index build is running" in cli("gc", reindexed, "--dry-run").out
        assert tree_state(reindexed) == before
    assert os.listdir(reindexed / "index").count(generation.LOCK) == 0
