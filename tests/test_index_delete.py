"""Deleting a run of the index's base layer (``delete-run``, ``gc --keep-last``)
trims it from the index (:mod:`provplug.index.trim`): the remaining runs stay
answerable, exactly as after a full rebuild, without ``provplug index``."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

from test_index_incremental import _answers, _commit, _full_copy_answers, _live_values

import provplug
from provplug.index import build_index, current_generation, read_meta
from provplug.store.open import open_store


def _three_indexed_runs(tmp_path: Path, theta: int) -> tuple[Path, list[str]]:
    """Three random runs sharing values, indexed in one full build (all in the base layer)."""
    rng = random.Random(23)
    store = tmp_path / "s.prov"
    runs = [_commit(store, rng, tmp_path / "in", n) for n in (40, 25, 30)]
    meta = build_index(store, theta=theta, engine="local", full=True)
    assert "incremental" not in meta and not meta.get("layers")
    return store, runs


def _contents(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def test_deleting_a_base_run_keeps_answers_exact_and_untouched_files_linked(tmp_path: Path) -> None:
    store, runs = _three_indexed_runs(tmp_path, theta=4)
    first = current_generation(open_store(store))
    old_bytes = _contents(store / "index" / str(first))
    done = provplug.open(store).delete_run(runs[0])
    assert done["index_stale"] is False
    meta = read_meta(open_store(store)) or {}
    assert meta["runs"] == runs[1:]
    trimmed = meta["incremental"]["trimmed"]["base"]
    assert trimmed["triples_removed"] == 40
    # The values only the deleted run had left the index: it counts what a full rebuild counts.
    rebuilt = tmp_path / "rebuilt.prov"
    shutil.copytree(store, rebuilt)
    full = build_index(rebuilt, theta=4, engine="local", full=True)
    assert meta["counts"]["triples"] == full["counts"]["triples"] == 55
    assert meta["counts"]["values"] == full["counts"]["values"]
    values = _live_values(store)
    assert _answers(store, values) == _full_copy_answers(store, tmp_path, values, 4)
    # Files the deletion did not touch are the old generation's, hard-linked.
    second = current_generation(open_store(store))
    old_dir, new_dir = store / "index" / str(first), store / "index" / str(second)
    linked = [p for p in new_dir.rglob("*") if p.is_file() and (old_dir / p.relative_to(new_dir)).exists()]
    same = [p for p in linked if p.stat().st_ino == (old_dir / p.relative_to(new_dir)).stat().st_ino]
    assert same and len(same) < len(linked)  # some linked, the trimmed buckets rewritten
    assert (new_dir / "mapped" / "sets_by_ccid.arrow").stat().st_ino == (
        old_dir / "mapped" / "sets_by_ccid.arrow"
    ).stat().st_ino
    # The live generation a query may still hold was not written through the links.
    assert _contents(old_dir) == old_bytes


def test_cli_delete_run_and_gc_keep_last_of_base_runs_need_no_index_build(cli: Any, tmp_path: Path) -> None:
    store, runs = _three_indexed_runs(tmp_path, theta=25_000)
    deleted = cli("delete-run", store, runs[1], "--json")
    assert deleted.code == 0, deleted.err
    assert json.loads(deleted.out)["index_stale"] is False
    value = _live_values(store)[-1]
    answer = cli("lineage", store, "--value-id", str(value), "--json")
    assert answer.code == 0, answer.err
    assert "not_indexed_runs" not in answer.out
    gc = cli("gc", store, "--keep-last", "1")
    assert gc.code == 0 and f"({runs[0]}" in gc.out, gc.out + gc.err
    meta = read_meta(open_store(store)) or {}
    assert meta["runs"] == [runs[2]]
    values = _live_values(store)
    assert _answers(store, values) == _full_copy_answers(store, tmp_path, values, 25_000)
    for v in values[:5]:
        result = cli("lineage", store, "--value-id", str(v), "--method", "csprov", "--json")
        assert result.code == 0, result.err
