"""Fixtures of the Spark adapter's tests (the session-wide ``spark`` and
``store_path`` come from tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(params=["global", "always"])
def group_joins(request: Any, spark: Any, mocker: Any) -> Any:
    """Aggregates' provenance both ways: member lists (keyed aggregates by
    default) and group joins (``spark.provplug.groupJoins=always``). Yields a
    spy on the group-join writer."""
    from provplug_spark import session as spark_session
    from provplug_spark.groupjoin import GROUP_JOINS_CONF

    spark.conf.set(GROUP_JOINS_CONF, request.param)
    yield request.param, mocker.spy(spark_session.SparkCaptureSession, "_write_groups")
    spark.conf.unset(GROUP_JOINS_CONF)
