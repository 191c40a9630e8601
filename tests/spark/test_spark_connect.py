"""Spark Connect is refused by name (issue 27): a Connect session holds no
Catalyst plan for provplug to rewrite. (A session of Spark Connect's own
class, built without a server: refusing it needs no round trip.)"""

from __future__ import annotations

from pathlib import Path

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
