"""Python workers over Unix domain sockets for a context a captured script
starts (provplug_spark.unixsockets): set as a default through
PYSPARK_SUBMIT_ARGS while the capture lasts, never over the user's own
setting or a running context."""

from __future__ import annotations

import os
from typing import Any

import pytest
from provplug_spark.unixsockets import SUBMIT_ARGS, for_contexts_started_inside

from provplug.sparksession import DEFAULT_CONF, UNIX_SOCKETS_CONF

pytestmark = pytest.mark.skipif(os.name != "posix", reason="Unix domain sockets")


@pytest.fixture
def no_context(mocker: Any) -> None:
    """As before a script's first SparkSession (the suite's own is running)."""
    from pyspark import SparkContext

    mocker.patch.object(SparkContext, "_active_spark_context", None)


def test_a_context_started_inside_gets_unix_sockets_and_the_setting_goes_after(
    no_context: None, monkeypatch: Any
) -> None:
    monkeypatch.delenv(SUBMIT_ARGS, raising=False)
    with for_contexts_started_inside():
        assert os.environ[SUBMIT_ARGS] == f"--conf {UNIX_SOCKETS_CONF}=true pyspark-shell"
    assert SUBMIT_ARGS not in os.environ


def test_the_users_submit_arguments_are_kept_after_the_setting(no_context: None, monkeypatch: Any) -> None:
    monkeypatch.setenv(SUBMIT_ARGS, "--driver-memory 2g pyspark-shell")
    with for_contexts_started_inside():
        assert os.environ[SUBMIT_ARGS] == f"--conf {UNIX_SOCKETS_CONF}=true --driver-memory 2g pyspark-shell"
    assert os.environ[SUBMIT_ARGS] == "--driver-memory 2g pyspark-shell"


def test_a_users_own_choice_of_transport_is_left_alone(no_context: None, monkeypatch: Any) -> None:
    mine = f"--conf {UNIX_SOCKETS_CONF}=false pyspark-shell"
    monkeypatch.setenv(SUBMIT_ARGS, mine)
    with for_contexts_started_inside():
        assert os.environ[SUBMIT_ARGS] == mine


def test_a_running_context_is_left_as_it_is(spark: Any, monkeypatch: Any) -> None:
    monkeypatch.delenv(SUBMIT_ARGS, raising=False)
    with for_contexts_started_inside():
        assert SUBMIT_ARGS not in os.environ  # the suite's session runs: its settings are made


def test_provplugs_own_sessions_use_unix_sockets() -> None:
    assert DEFAULT_CONF[UNIX_SOCKETS_CONF] == "true"
