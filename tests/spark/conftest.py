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
    from provplug_spark.groupjoin import GROUP_JOINS_CONF, LIST_BYTES_CONF

    spark.conf.set(GROUP_JOINS_CONF, request.param)
    spark.conf.set(LIST_BYTES_CONF, "0")  # a global aggregate over these tiny inputs joins, not lists
    yield request.param, mocker.spy(spark_session.SparkCaptureSession, "_write_groups")
    spark.conf.unset(GROUP_JOINS_CONF)
    spark.conf.unset(LIST_BYTES_CONF)


@pytest.fixture
def joined_global_aggregates(spark: Any) -> Any:
    """Every aggregate without keys gets a group join, however small its
    input (``spark.provplug.groupJoins.listBytes=0``): the tests' inputs are
    all small enough to be listed otherwise."""
    from provplug_spark.groupjoin import LIST_BYTES_CONF

    spark.conf.set(LIST_BYTES_CONF, "0")
    yield
    spark.conf.unset(LIST_BYTES_CONF)
