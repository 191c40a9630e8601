"""Indexing a run as it commits (issue 26): ``capture(..., index="auto")``
indexes small runs at once (incrementally after the first), leaves a run
over the limit to ``provplug index``, and never fails a committed capture."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.errors import CaptureError, NotIndexedError

from .helpers import capture, count_per_key

ROWS = ([(1, "a"), (2, "b"), (1, "c")], "k int, v string")


def _counts(store: Path) -> list[tuple[Any, Any]]:
    answer = provplug.open(store).lineage(table="Counts", column="n", where="k = 1")
    return sorted((r["table"], r["value"]) for r in answer.lineage)


def test_auto_indexes_each_small_run_as_it_commits(spark: Any, store_path: Path) -> None:
    capture(spark, store_path, {"T": ROWS}, lambda f: count_per_key(f["T"]).collect(), index="auto")
    assert _counts(store_path) == [("T", "a"), ("T", "c")]  # no `provplug index` in between
    second = ([(1, "x"), (1, "y"), (1, "z")], "k int, v string")
    capture(spark, store_path, {"T": second}, lambda f: count_per_key(f["T"]).collect(), index="auto")
    answer = provplug.open(store_path).lineage(table="Counts", column="n", where="k = 1")  # run 2, the latest
    assert sorted(r["value"] for r in answer.lineage) == ["x", "y", "z"]
    assert "index" not in answer.stats  # nothing left unindexed


def test_a_run_over_the_auto_limit_is_left_to_provplug_index(
    spark: Any, store_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PROVPLUG_AUTO_INDEX_TRIPLES", "1")
    with caplog.at_level(logging.INFO, logger="provplug.index.at_commit"):
        capture(spark, store_path, {"T": ROWS}, lambda f: count_per_key(f["T"]).collect(), index="auto")
    assert any("not indexed at commit" in r.getMessage() for r in caplog.records)
    with pytest.raises(NotIndexedError):
        _counts(store_path)


def test_always_indexes_whatever_the_size(spark: Any, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVPLUG_AUTO_INDEX_TRIPLES", "1")
    capture(spark, store_path, {"T": ROWS}, lambda f: count_per_key(f["T"]).collect(), index="always")
    assert _counts(store_path) == [("T", "a"), ("T", "c")]


def test_a_failed_index_at_commit_is_a_warning_and_the_run_stays_committed(
    spark: Any, store_path: Path, mocker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mocker.patch("provplug.index.build.build_index", side_effect=OSError("disk full"))
    with caplog.at_level(logging.WARNING, logger="provplug.index.at_commit"):
        capture(spark, store_path, {"T": ROWS}, lambda f: count_per_key(f["T"]).collect(), index="always")
    assert len(provplug.open(store_path).store.runs()) == 1
    assert any("was not indexed (disk full)" in r.getMessage() for r in caplog.records)


def test_an_unknown_index_mode_is_refused_before_the_run(spark: Any, store_path: Path) -> None:
    with pytest.raises(CaptureError, match="index must be one of auto, always"):
        capture(spark, store_path, {"T": ROWS}, lambda f: None, index="sometimes")
    assert not store_path.exists()
