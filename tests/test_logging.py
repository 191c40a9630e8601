"""The library says what it does through ``logging`` (``provplug.*`` loggers),
for an operator to route as they like; the progress display is separate."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

import provplug
from provplug.ingest.importer import import_provenance
from provplug.store.open import open_store


def _records(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


@pytest.fixture
def table7(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Path:
    caplog.set_level(logging.DEBUG, logger="provplug")  # for the test too
    path = tmp_path / "t7.prov"
    import_provenance(open_store(path), DATA / "paper_table7_triples.csv", DATA / "paper_table7_values.csv")
    return path


def test_an_import_and_its_commit_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="provplug")
    table7 = tmp_path / "t7.prov"
    import_provenance(open_store(table7), DATA / "paper_table7_triples.csv", DATA / "paper_table7_values.csv")
    run_id = open_store(table7).runs()[0]["run_id"]
    [committed] = _records(caplog, "provplug.store.parquet")
    assert committed.startswith(f"committed run {run_id} as #1 to {table7}: ")
    [imported] = _records(caplog, "provplug.ingest.importer")
    assert imported == (
        f"imported {DATA / 'paper_table7_triples.csv'} into {table7} as run {run_id}: 12 triples (0 duplicates dropped)"
    )


def test_provplug_index_logs_its_input_and_what_it_published(
    table7: Path, cli: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    assert cli("index", table7, "--theta", "4", "--engine", "local", "--quiet").code == 0
    started, published = _records(caplog, "provplug.index.build")
    assert started == f"indexing {table7}: 1 runs, 6 tables, theta 4, engine local"
    generation = open_store(table7).fs.open_input_stream(f"{table7}/index/CURRENT").read().decode().strip()
    assert published.startswith(f"published index generation {generation} of {table7} (local engine, splits from ")
    assert ": 12 triples, " in published


def test_a_query_logs_the_path_it_took_and_why(table7: Path, caplog: pytest.LogCaptureFixture) -> None:
    opened = provplug.open(table7)
    caplog.clear()
    opened.lineage(value_id=8, method="rq")
    opened.lineage(value_id=8, method="rq", tau=100)
    assert _records(caplog, "provplug.query.methods") == [
        "12 triples to recurse over: on the driver (the driver's memory budget)",
        "12 triples to recurse over: on the driver (tau 100)",
    ]
