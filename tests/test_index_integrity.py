"""A damaged lineage index is an error that says to re-index, never a silent
wrong answer (issue 18, item 3): the files a generation records in its
meta.json are checked when a query opens it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

import provplug
from provplug.errors import DamagedIndexError
from provplug.index import build_index, current_dir
from provplug.ingest.importer import import_provenance
from provplug.store.open import open_store

T7_SPLITS = [["T1", "T2"], ["T3", "T4"], ["T5", "T6"]]
ANCESTORS_OF_8 = {7, 5, 4, 2, 3, 1}


@pytest.fixture
def table7(tmp_path: Path) -> Path:
    path = tmp_path / "t7.prov"
    import_provenance(open_store(path), DATA / "paper_table7_triples.csv", DATA / "paper_table7_values.csv")
    build_index(path, theta=4, splits=T7_SPLITS, engine="local")
    return path


def _generation(store: Path) -> Path:
    return Path(current_dir(open_store(store)))


def _fullest_bucket(store: Path, dataset: str) -> Path:
    """The bucket folder of ``dataset`` holding the most bytes (it has rows)."""
    folders = (_generation(store) / dataset).glob("bucket=*")
    return max(folders, key=lambda f: sum(p.stat().st_size for p in f.iterdir()))


def _remove(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink()


DAMAGE = {
    "a triples bucket folder": lambda s: _remove(_fullest_bucket(s, "triples")),
    "a value_sets bucket folder": lambda s: _remove(_fullest_bucket(s, "value_sets")),
    "value_sets/": lambda s: _remove(_generation(s) / "value_sets"),
    "setdeps/": lambda s: _remove(_generation(s) / "setdeps"),
    "sets.parquet": lambda s: _remove(_generation(s) / "sets.parquet"),
    "a truncated file": lambda s: _truncate(next(_fullest_bucket(s, "triples").glob("*.parquet"))),
    "an extra data file": lambda s: shutil.copy(
        next(_fullest_bucket(s, "triples").glob("*.parquet")),
        _generation(s) / "triples" / "bucket=0" / "part-9.parquet",
    ),
}


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-20])


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_index_is_an_error_that_says_to_reindex(table7: Path, cli: Any, damage: str) -> None:
    assert provplug.open(table7).lineage(value_id=8).value_ids == ANCESTORS_OF_8
    DAMAGE[damage](table7)
    result = cli("lineage", table7, "--value-id", "8")
    assert result.code == 2 and result.out == "", result
    assert result.err.startswith("provplug: error: the lineage index of") and result.err.count("\n") == 1
    assert "is damaged" in result.err and f"re-run `provplug index {table7}`" in result.err
    # and re-indexing repairs it
    assert cli("index", table7, "--theta", "4", "--quiet").code == 0
    assert provplug.open(table7).lineage(value_id=8).value_ids == ANCESTORS_OF_8


def test_the_message_names_what_is_missing(table7: Path) -> None:
    _remove(_generation(table7) / "value_sets")
    with pytest.raises(DamagedIndexError, match=r"missing: value_sets/;"):
        provplug.open(table7).lineage(value_id=8)
    _remove(_generation(table7) / "sets.parquet")
    with pytest.raises(DamagedIndexError, match=r"missing: sets\.parquet, value_sets/;"):
        provplug.open(table7).lineage(value_id=8)


@pytest.mark.parametrize("lost", ["value_sets/bucket=8", "mapped/value_sets/bucket=8.arrow"])
def test_a_file_lost_after_the_check_is_an_error_not_an_empty_bucket(
    table7: Path, lost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provplug.index import mapped
    from provplug.query import index_reader

    if not lost.startswith(mapped.MAPPED_DIR):
        monkeypatch.setenv(index_reader.MAPPED_ENV, "0")  # the Parquet bucket is read, not its mapped copy
    opened = provplug.open(table7)
    assert opened.lineage(value_id=8).value_ids == ANCESTORS_OF_8  # checked, once per opened store
    index_reader.caches_of(opened.store).files.clear()  # loaded data forgotten; the check is not repeated
    _remove(_generation(table7) / lost)  # value 8's
    with pytest.raises(DamagedIndexError, match="a file is missing"):
        opened.lineage(value_id=8)


def _as_format_1(store: Path) -> None:
    meta_path = _generation(store) / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["files"]
    meta_path.write_text(json.dumps({**meta, "format": 1}))


def test_a_generation_without_a_file_record_is_checked_against_the_layout(table7: Path) -> None:
    _as_format_1(table7)
    assert provplug.open(table7).lineage(value_id=8).value_ids == ANCESTORS_OF_8
    _remove(_fullest_bucket(table7, "triples"))
    with pytest.raises(DamagedIndexError, match=r"missing or empty: triples/bucket=\d+/"):
        provplug.open(table7).lineage(value_id=8)


def test_the_generation_records_its_files(table7: Path) -> None:
    gen = _generation(table7)
    meta = json.loads((gen / "meta.json").read_text())
    on_disk = {str(p.relative_to(gen)): p.stat().st_size for p in gen.rglob("*") if p.is_file()}
    assert meta["format"] == 2
    assert meta["files"] == {k: v for k, v in on_disk.items() if k != "meta.json"}
    assert sum(k.startswith("value_sets/bucket=") for k in meta["files"]) == 64


def test_stats_reports_a_damaged_index(table7: Path, cli: Any) -> None:
    stats = json.loads(cli("stats", table7, "--json").out)
    assert stats["index_intact"] is True and stats["sets"] == 4
    _remove(_generation(table7) / "value_sets")
    result = cli("stats", table7, "--json")
    stats = json.loads(result.out)
    assert result.code == 0 and stats["index_intact"] is False
    assert "missing: value_sets/" in stats["index_damage"] and "re-run `provplug index" in stats["index_damage"]
