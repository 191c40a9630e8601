"""Retention: ``provplug gc --keep-last N`` / ``--older-than DAYS`` delete
the runs every given rule lets go, and nothing else."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

from provplug.errors import RetentionError
from provplug.explore.retention import retired_runs

NOW = datetime(2026, 6, 30, 12, 0, tzinfo=timezone.utc)


def _manifests(ages_in_days: list[float]) -> list[dict[str, Any]]:
    """Runs numbered 1.. committed ``age`` days before NOW, oldest first."""
    return [
        {"run_id": f"run{n}", "number": n, "committed": (NOW - timedelta(days=age)).isoformat()}
        for n, age in enumerate(ages_in_days, start=1)
    ]


def _numbers(runs: list[Any]) -> list[int]:
    return [int(r["number"]) for r in runs]


def test_keep_last_lets_every_older_run_go() -> None:
    runs = _manifests([9, 5, 3, 1])
    assert _numbers(retired_runs(runs, keep_last=1, now=NOW)) == [1, 2, 3]
    assert _numbers(retired_runs(runs, keep_last=3, now=NOW)) == [1]
    assert _numbers(retired_runs(runs, keep_last=4, now=NOW)) == []
    assert _numbers(retired_runs(runs, keep_last=0, now=NOW)) == [1, 2, 3, 4]


def test_older_than_lets_the_old_runs_go_and_both_rules_must_agree() -> None:
    runs = _manifests([9, 5, 3, 1])
    assert _numbers(retired_runs(runs, older_than_days=4, now=NOW)) == [1, 2]
    assert _numbers(retired_runs(runs, older_than_days=0.5, now=NOW)) == [1, 2, 3, 4]
    # keep-last 3 keeps runs 2-4; older than 4 days lets 1 and 2 go: only run 1 goes.
    assert _numbers(retired_runs(runs, keep_last=3, older_than_days=4, now=NOW)) == [1]
    assert retired_runs(runs, now=NOW) == []  # no rule: nothing goes


@pytest.mark.parametrize(("keep_last", "older_than"), [(-1, None), (None, -2.0)])
def test_a_negative_rule_is_refused(keep_last: int | None, older_than: float | None) -> None:
    with pytest.raises(RetentionError, match="or more"):
        retired_runs(_manifests([1]), keep_last=keep_last, older_than_days=older_than, now=NOW)


def _three_runs(cli: Any, store: Path) -> list[str]:
    for _ in range(3):
        assert (
            cli(
                "import",
                store,
                "--triples",
                DATA / "paper_table4_triples.csv",
                "--values",
                DATA / "paper_table4_values.csv",
                "--quiet",
            ).code
            == 0
        )
    return [r["run_id"] for r in json.loads(cli("runs", store, "--json").out)]


def test_gc_keep_last_deletes_the_older_runs_and_a_dry_run_deletes_nothing(cli: Any, store_path: Path) -> None:
    ids = _three_runs(cli, store_path)
    preview = json.loads(cli("gc", store_path, "--keep-last", "1", "--dry-run", "--json").out)
    assert [(r["run_id"], r["deleted"]) for r in preview["runs"]] == [(ids[0], False), (ids[1], False)]
    assert [r["run_id"] for r in json.loads(cli("runs", store_path, "--json").out)] == ids
    done = cli("gc", store_path, "--keep-last", "1")
    assert done.code == 0 and f"deleted run 1 ({ids[0]}" in done.out and f"deleted run 2 ({ids[1]}" in done.out
    left = json.loads(cli("runs", store_path, "--json").out)
    assert [(r["run_id"], r["number"]) for r in left] == [(ids[2], 3)]  # numbers are never reused
    assert cli("gc", store_path, "--older-than", "0", "--keep-last", "1").out.count("deleted run") == 0


def test_gc_refuses_a_negative_rule_in_one_line(cli: Any, store_path: Path) -> None:
    _three_runs(cli, store_path)
    result = cli("gc", store_path, "--keep-last", "-1")
    assert result.code != 0 and result.err.strip().count("\n") == 0 and "--keep-last" in result.err
    assert len(json.loads(cli("runs", store_path, "--json").out)) == 3
