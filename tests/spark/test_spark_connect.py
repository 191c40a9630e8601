"""Spark Connect is refused by name (issue 27): a Connect session holds no
Catalyst plan for provplug to rewrite. (A session of Spark Connect's own
class, built without a server: refusing it needs no round trip.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.errors import CaptureError


def _connect_session() -> object:
    """An object whose class is Spark Connect's ``SparkSession`` (its module and name)."""
    cls = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    return cls()


def test_capture_refuses_a_spark_connect_session_in_one_line_naming_it(tmp_path: Path) -> None:
    store = tmp_path / "store.prov"
    with pytest.raises(CaptureError) as refused, provplug.capture(_connect_session(), store=store):
        pass
    message = str(refused.value)
    assert "Spark Connect" in message and "classic SparkSession" in message and "\n" not in message
    assert not store.exists() or provplug.open(store).store.runs() == []


def test_a_classic_session_is_not_taken_for_connect(spark: object) -> None:
    from provplug_spark.plugin import is_spark_connect

    assert not is_spark_connect(spark)
    assert is_spark_connect(_connect_session())


def test_provplug_run_under_spark_remote_refuses_after_the_scripts_writes(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SPARK_REMOTE=sc://... provplug run``: the script's writes go through
    Spark Connect, out of provplug's reach; the script runs (its own output is
    written) and provplug exits non-zero with the one-line refusal."""
    script = tmp_path / "writes.py"
    written = tmp_path / "out.txt"
    script.write_text(f"open({str(written)!r}, 'w').write('the script ran')\n")
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    store = tmp_path / "store.prov"
    result = cli("run", store, script)
    assert result.code != 0, result
    assert written.read_text() == "the script ran"
    line = result.err.strip()
    assert "Spark Connect" in line and "\n" not in line, result
    assert not store.exists() or provplug.open(store).store.runs() == []


def test_capture_writes_under_spark_remote_refuses_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    with pytest.raises(CaptureError, match="Spark Connect"), provplug.capture_writes(store=tmp_path / "s.prov"):
        pass
