"""A capture says what it is doing (issue 29): the run starting, each step
starting and its output written, the wait for background writes, the commit,
through ``logging`` under ``provplug.`` and, for ``provplug run``, on stderr."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from provplug_spark.session import STEP_TIMINGS

import provplug

SALES = EXAMPLES / "sales_script"


def _provplug_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "provplug" or r.name.startswith("provplug.")]


def _index_of(messages: list[str], pattern: str) -> int:
    found = [k for k, m in enumerate(messages) if re.fullmatch(pattern, m)]
    assert len(found) == 1, (pattern, messages)
    return found[0]


@provplug.step("double", output="doubled")
def _double(frame: Any) -> Any:
    return frame.selectExpr("id", "v * 2 AS v")


@provplug.step("total", output="totals")
def _total(frame: Any) -> Any:
    return frame.groupBy().sum("v")


def test_a_capture_logs_its_run_its_steps_and_the_commit(
    spark: Any, store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="provplug")
    with provplug.capture(spark, store=store_path) as run:
        source = run.source(spark.createDataFrame([(1, 10), (2, 20), (3, 30)], "id long, v long"), "numbers")
        _total(_double(source)).collect()
    messages = _provplug_messages(caplog)
    run_id = run.run_id
    order = [
        _index_of(messages, rf"capture run {run_id} started \(spark\) into .*store\.prov"),
        _index_of(messages, r"step double started"),
        _index_of(messages, r"step total started"),
        _index_of(messages, rf"run {run_id}: all steps written; committing"),
        _index_of(messages, rf"run {run_id} committed: 2 ops into .*store\.prov"),
    ]
    assert order == sorted(order), messages
    # Each output's write, when it ends (in the background): its rows and triples.
    doubled = _index_of(messages, r"step double wrote doubled: 3 rows, [\d,]+ triples.*")
    totals = _index_of(messages, r"step total wrote totals: 1 rows, [\d,]+ triples.*")
    assert order[1] < doubled < order[3] and order[2] < totals < order[3], messages
    # Where each step's time went: said in the line, and on the record for tools (the TPC-H benchmark).
    _index_of(messages, r"step double wrote doubled: .* \(plan rewrite \d+\.\d\d s, writer job \d+\.\d\d s\)")
    timings = {t.table: t for r in caplog.records if (t := getattr(r, STEP_TIMINGS, None)) is not None}
    assert set(timings) == {"doubled", "totals"}
    assert all(t.rewrite > 0 and t.writer_job > 0 for t in timings.values()), timings
    assert timings["totals"].step == "total"


def test_a_failed_capture_logs_that_nothing_is_committed(
    spark: Any, store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="provplug")
    with pytest.raises(RuntimeError, match="the pipeline broke"), provplug.capture(spark, store=store_path) as run:
        _double(run.source(spark.createDataFrame([(1, 10)], "id long, v long"), "numbers"))
        raise RuntimeError("the pipeline broke")
    messages = _provplug_messages(caplog)
    _index_of(messages, rf"run {run.run_id} failed \(RuntimeError\): nothing is committed")
    assert not [m for m in messages if "committed:" in m], messages


def test_provplug_run_shows_what_it_is_doing_on_stderr(
    spark: Any, cli: Any, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As from a shell, where nothing configured logging: provplug's records are shown as progress lines."""
    monkeypatch.setattr(logging.root, "handlers", [])  # pytest's own capture handler, out of the way
    result = cli("run", "--store", store_path, SALES / "sales.py", SALES / "data", tmp_path / "out")
    assert result.code == 0, result.err
    lines = [line for line in result.err.splitlines() if line.startswith("[provplug] ")]
    said = [re.sub(r" \(\d+\.\ds\)$", "", line.removeprefix("[provplug] ")) for line in lines]
    assert re.fullmatch(r"running .*sales\.py; its first DataFrame write starts the capture run", said[0]), said
    assert re.fullmatch(r"capture run \S+ started \(spark\) into .*store\.prov", said[1]), said
    for write in ("enriched", "by_region", "big_regions"):
        started = said.index(f"step write:{write} started")
        wrote = next(k for k, s in enumerate(said) if s.startswith(f"step write:{write} wrote {write}: "))
        assert started < wrote, said
    assert re.fullmatch(r"run \S+ committed: 3 ops into .*store\.prov", said[-1]), said
    assert "captured run" in result.err.splitlines()[-1]  # the command's own summary comes last
