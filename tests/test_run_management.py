"""Deleting a run (``provplug delete-run``) and collecting garbage (``provplug gc``).

The store (tests/two_runs.py): a Spark capture (Person1 -> R1 -> Person2)
and a newer import (Person2 values 101, 102 -> R9 -> Report value 103),
indexed after both. Each test changes its own copy.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import two_runs
from conftest import snapshot

import provplug
from provplug.errors import LineageQueryError, StoreError
from provplug.explore import manage
from provplug.index import generation
from provplug.store.open import open_store


@pytest.fixture(scope="module")
def built(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_runs.build(spark, tmp_path_factory.mktemp("manage"))


@pytest.fixture
def two(built: Path, tmp_path: Path) -> Path:
    return two_runs.copy(built, tmp_path)


def _runs(store: Path) -> dict[str, str]:
    return {r["kind"]: r["run_id"] for r in provplug.open(store).runs()}


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _mark_ages(store: Path, **query: Any) -> list[tuple[str, str, Any]]:
    answer = provplug.open(store).lineage(table="Person2", column="Age", where="Name = 'Mark'", **query)
    return [(r["table"], r["column"], r["value"]) for r in answer.lineage]


# -- delete-run ---------------------------------------------------------------------


def test_delete_run_removes_the_run_and_the_index_follows(two: Path, cli: Any) -> None:
    runs = _runs(two)
    imp = runs["import"]
    size = _bytes(two / "runs" / imp)
    result = cli("delete-run", two, imp[:-4])  # a unique prefix will do
    assert result.code == 0, result
    assert result.out.splitlines() == [result.out.strip()]  # no "queries refuse it" line: the index followed
    assert result.out.startswith(f"deleted run {imp} (import, ")
    assert f"2 tables, 1 ops, 2 triples; {size / 1024:.1f} KB ({size:,} bytes) freed" in result.out
    # Gone whole: from the listing, the tables, the disk.
    assert [r["run_id"] for r in json.loads(cli("runs", two, "--json").out)] == [runs["capture"]]
    assert [t["name"] for t in json.loads(cli("tables", two, "--json").out)] == ["Person1", "Person2"]
    assert sorted(p.name for p in (two / "runs").iterdir()) == [runs["capture"]]
    # The index no longer holds the import's triples: current, no `provplug index` needed ...
    assert json.loads(cli("stats", two, "--json").out)["index_current"] is True
    # ... the remaining run answers as before; Person2 is no longer ambiguous ...
    for method in ("csprov", "rq"):
        assert _mark_ages(two, method=method) == [("Person1", "Age", 40)]
    # ... and neither the store nor the index knows the deleted values.
    for method in ("rq", "csprov"):
        with pytest.raises(LineageQueryError, match="unknown value id 103"):
            provplug.open(two).lineage(value_id=103, method=method)


def test_the_remaining_import_still_answers_after_the_capture_is_deleted(two: Path) -> None:
    store = provplug.open(two)
    done = store.delete_run(_runs(two)["capture"])
    assert (done["kind"], done["counts"]["triples"], done["index_stale"]) == ("capture", 6, False)
    answer = store.lineage(value_id=103)  # no re-index: the deletion updated the index
    assert sorted((r["value_id"], r["table"], r["column"]) for r in answer.lineage) == [
        (101, "Person2", "Age"),
        (102, "Person2", "Age"),
    ]
    assert {e["op"] for e in answer.edges} == {"R9"}


def test_a_deleted_run_s_ids_are_never_given_out_again(two: Path, tmp_path: Path) -> None:
    store = provplug.open(two)
    deleted = {t["table_id"] for t in store.tables(run=_runs(two)["import"])}
    store.delete_run(_runs(two)["import"])
    triples, values = tmp_path / "t.csv", tmp_path / "v.csv"
    triples.write_text(two_runs.IMPORT_TRIPLES)
    values.write_text(two_runs.IMPORT_VALUES)
    store.import_(triples, values)
    fresh = {t["table_id"] for t in store.tables(run=_runs(two)["import"])}
    assert len(fresh) == 2 and min(fresh) > max(deleted)


# -- atomicity ----------------------------------------------------------------------


def test_a_crash_after_the_run_vanished_leaves_garbage_not_half_a_run(two: Path, cli: Any) -> None:
    imp = _runs(two)["import"]
    seen: dict[str, Any] = {}

    def crash() -> None:
        # Readers at the crash point: the import is gone whole, the capture is whole.
        seen["runs"] = [r["kind"] for r in provplug.open(two).runs()]
        seen["verify"] = open_store(two).verify()
        seen["tables"] = [t["name"] for t in provplug.open(two).tables()]
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        manage.delete_run(open_store(two), imp, before_removal=crash)
    assert seen["runs"] == ["capture"]
    assert (seen["verify"]["runs"], seen["verify"]["triples"]) == (1, 6)
    assert seen["tables"] == ["Person1", "Person2"]
    leftover = two / "runs" / f".deleted-{imp}"
    size = _bytes(leftover)
    assert size > 0
    # gc --dry-run lists it and removes nothing; gc removes it and says how much.
    before = snapshot(two)
    dry = json.loads(cli("gc", two, "--dry-run", "--json").out)
    assert [(g["kind"], g["name"], g["bytes"]) for g in dry["removed"]] == [("deleted-run", imp, size)]
    assert snapshot(two) == before
    result = cli("gc", two)
    assert result.code == 0, result
    assert result.out.splitlines()[0] == f"removed deleted-run {imp} ({size / 1024:.1f} KB ({size:,} bytes))"
    assert not leftover.exists()
    assert [r["kind"] for r in provplug.open(two).runs()] == ["capture"]


def test_a_crash_before_the_rename_leaves_the_run_whole(two: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import provplug.store.parquet

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied", src)

    monkeypatch.setattr(provplug.store.parquet.os, "rename", refuse)
    result = cli("delete-run", two, _runs(two)["import"])
    assert result.code == 2 and len(result.err.splitlines()) == 1
    monkeypatch.undo()
    assert [r["kind"] for r in provplug.open(two).runs()] == ["capture", "import"]
    assert open_store(two).verify()["triples"] == 8
    assert provplug.open(two).lineage(value_id=103).value_ids == {101, 102}  # the index still matches


def test_a_reader_that_found_a_run_before_its_deletion_is_told_to_retry(two: Path) -> None:
    store = open_store(two)
    capture = _runs(two)["capture"]
    table_id = next(t["table_id"] for t in provplug.open(two).tables(run=capture) if t["name"] == "Person1")
    assert store.read_rows(capture, table_id).num_rows == 3
    provplug.open(two).delete_run(capture)
    with pytest.raises(StoreError, match=f"run {capture} of .* was deleted while this command read it: run it again"):
        store.read_rows(capture, table_id)


# -- gc -----------------------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _staging(store: Path, name: str, pid: int, payload: int) -> int:
    folder = store / "_staging" / name
    folder.mkdir()
    (folder / "_owner.json").write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "run_id": name}))
    (folder / "triples.parquet").write_bytes(b"x" * payload)
    return _bytes(folder)


def _generation_leftover(store: Path, payload: int) -> str:
    name = "gen-20000101T000000-deadbeef"
    (store / "index" / name).mkdir()
    (store / "index" / name / "sets.parquet").write_bytes(b"x" * payload)
    return name


def test_gc_removes_dead_writers_staging_and_old_generations_only(
    two: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead_bytes = _staging(two, "dead-run", _dead_pid(), 1000)
    _staging(two, "live-run", os.getpid(), 10)
    first = generation.current_generation(open_store(two))
    assert cli("index", two, "--quiet").code == 0  # first becomes the previous generation
    live = generation.current_generation(open_store(two))
    assert live != first
    leftover = _generation_leftover(two, 500)  # as a crashed build leaves it

    before = snapshot(two)
    dry = json.loads(cli("gc", two, "--dry-run", "--json").out)
    assert snapshot(two) == before
    expected = [("staging", "dead-run", dead_bytes), ("index-generation", leftover, 500)]
    assert [(g["kind"], g["name"], g["bytes"]) for g in dry["removed"]] == expected
    assert dry["bytes"] == dead_bytes + 500
    assert dry["skipped"] == [f"index generation {first}: replaced less than 10 min ago, a query may still read it"]

    result = cli("gc", two)
    assert result.code == 0, result
    assert (
        result.out.splitlines()[-1]
        == f"removed 2 item(s), {(dead_bytes + 500) / 1024:.1f} KB ({dead_bytes + 500:,} bytes) freed"
    )
    assert sorted(p.name for p in (two / "_staging").iterdir()) == ["live-run"]
    assert sorted(p.name for p in (two / "index").glob("gen-*")) == sorted([first, live])

    # Once the previous generation is old enough, it goes too; the live one stays and answers.
    monkeypatch.setattr(generation, "PREVIOUS_GRACE_S", 0.0)
    report = provplug.open(two).gc()
    assert [(g["kind"], g["name"]) for g in report["removed"]] == [("index-generation", first)]
    assert [p.name for p in (two / "index").glob("gen-*")] == [live]
    assert not (two / "index" / "PREVIOUS").exists()
    assert provplug.open(two).lineage(value_id=103).value_ids == {101, 102}
    assert provplug.open(two).gc()["removed"] == []


def test_gc_leaves_generations_alone_while_an_index_build_runs(two: Path, cli: Any) -> None:
    leftover = _generation_leftover(two, 100)
    dead_bytes = _staging(two, "dead-run", _dead_pid(), 10)
    (two / "index" / generation.LOCK).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    report = json.loads(cli("gc", two, "--json").out)
    assert [(g["kind"], g["name"], g["bytes"]) for g in report["removed"]] == [("staging", "dead-run", dead_bytes)]
    assert report["skipped"] == ["index generations: an index build is running"]
    assert (two / "index" / leftover).exists() and (two / "index" / generation.LOCK).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["delete-run", "{s}", "zzz"], "unknown run 'zzz' (runs: "),
        (["delete-run", "{s}", "20"], "run '20' is ambiguous"),
        (["delete-run", "{s}-missing", "2"], "no provplug store at"),
        (["gc", "{s}-missing"], "no provplug store at"),
    ],
)
def test_errors_are_one_line_exit_2(two: Path, cli: Any, args: list[str], message: str) -> None:
    before = snapshot(two)
    result = cli(*(a.format(s=two) for a in args))
    assert result.code == 2, result
    (line,) = result.err.splitlines()
    assert message in line
    assert snapshot(two) == before
