"""``--where`` is bounded: sleeping and size-building functions are refused,
and a predicate past its time or memory limit fails with a one-line error
naming the limit (provplug.query.where)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import provplug
from provplug.query.where import WhereLimitError, WhereLimits, select_rows

# The three predicates: each ran for seconds to minutes, or until killed.
UNBOUNDED = {
    "list_sum(range(100000000)) > 0": "range()",
    "length(repeat('x', 1000000000)) > 0": "repeat()",
    "sleep_ms(2000) IS NULL": "sleep_ms()",
}


@pytest.mark.parametrize(("predicate", "function"), UNBOUNDED.items())
def test_the_cli_refuses_unbounded_predicates_in_one_line(
    paper_rows_store: tuple[Path, dict[int, int]], cli: Any, predicate: str, function: str
) -> None:
    path, _ = paper_rows_store
    result = cli("lineage", path, "Person2.Name", "--where", predicate)
    assert result.code != 0
    assert result.err.count("\n") == 1 and f"may not call {function}" in result.err


@pytest.mark.parametrize(
    "predicate", ["pg_sleep(1) IS NULL", "lpad(Name, 1000000000, 'x') = ''", "main.REPEAT(Name, 9) = ''"]
)
def test_spellings_and_macros_of_refused_functions_are_refused(
    paper_rows_store: tuple[Path, dict[int, int]], predicate: str
) -> None:
    path, _ = paper_rows_store
    with pytest.raises(WhereLimitError, match="may not call"):
        provplug.open(path).lineage(table="Person2", column="Name", where=predicate)


def _many_rows() -> pa.Table:
    return pa.table({"row": np.arange(2_000_000, dtype=np.int64)})


def test_a_predicate_past_its_time_limit_is_interrupted() -> None:
    # Hashing two million rows three times takes far longer than a millisecond.
    with pytest.raises(WhereLimitError, match=r"time limit of 0\.001 s \(PROVPLUG_WHERE_TIMEOUT\)"):
        select_rows(_many_rows(), "md5(md5(md5(row::VARCHAR))) LIKE '%ab%'", "row", WhereLimits(timeout_s=0.001))


def test_a_predicate_past_its_memory_limit_fails() -> None:
    with pytest.raises(WhereLimitError, match=r"memory limit of 16KB \(PROVPLUG_WHERE_MEMORY\)"):
        select_rows(_many_rows(), "row % 2 = 0", "row", WhereLimits(memory="16KB"))


def test_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVPLUG_WHERE_TIMEOUT", "0.001")
    monkeypatch.setenv("PROVPLUG_WHERE_MEMORY", "64MB")
    monkeypatch.setenv("PROVPLUG_WHERE_THREADS", "2")
    assert WhereLimits.from_environment() == WhereLimits(timeout_s=0.001, memory="64MB", threads=2)
    with pytest.raises(WhereLimitError, match="time limit"):
        select_rows(_many_rows(), "md5(md5(md5(row::VARCHAR))) LIKE '%ab%'", "row")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PROVPLUG_WHERE_TIMEOUT", "soon", "PROVPLUG_WHERE_TIMEOUT must be a positive float"),
        ("PROVPLUG_WHERE_THREADS", "0", "PROVPLUG_WHERE_THREADS must be a positive int"),
        ("PROVPLUG_WHERE_MEMORY", "lots", "bad --where limits"),
    ],
)
def test_a_bad_limit_is_a_one_line_error(
    paper_rows_store: tuple[Path, dict[int, int]],
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    message: str,
) -> None:
    path, _ = paper_rows_store
    monkeypatch.setenv(variable, value)
    result = cli("lineage", path, "Person2.Name", "--where", "Age > 30")
    assert result.code != 0 and result.err.count("\n") == 1 and message in result.err


def test_the_connection_cannot_lift_its_limits_or_reach_files() -> None:
    import duckdb

    from provplug.query.where import _connect

    con = _connect(WhereLimits(memory="64MB"))
    with pytest.raises(duckdb.InvalidInputException, match="locked"):
        con.execute("SET memory_limit = '9GB'")
    with pytest.raises(duckdb.PermissionException):
        con.execute("SELECT * FROM read_csv('/etc/hostname')")
    assert con.execute("SELECT current_setting('max_temp_directory_size')").fetchone() == ("0 bytes",)


def test_ordinary_predicates_run_within_small_limits(paper_rows_store: tuple[Path, dict[int, int]]) -> None:
    small = WhereLimits(timeout_s=30, memory="8MB", threads=1)
    rows = pa.table({"row": [0, 1, 2], "Name": ["Steve", "Mark", "Shane"], "Age": [30, 40, 35]})
    assert select_rows(rows, "Age > 30 AND Name LIKE 'S%'", "row", small) == [2]
    assert select_rows(rows, "length(Name) = 4 OR regexp_matches(Name, '^St')", "row", small) == [0, 1]
    path, packed = paper_rows_store
    answer = provplug.open(path).lineage(table="Person2", column="Name", where="Age >= 30").to_dict()
    assert [q["value_id"] for q in answer["query"]] == sorted(packed[i] for i in (13, 16, 19))
