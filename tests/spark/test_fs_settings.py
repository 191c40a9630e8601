"""``spark.provplug.fs.*`` (issue 27): the session's S3 settings are read when
a capture starts, a typo among them fails the capture before anything is
written, and they are what the capture writes into the store URI its tasks
receive."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.errors import ConnectionSettingsError
from provplug.plugin.connection import Connection
from provplug.plugin.manager import get_plugins


@pytest.fixture
def fs_conf(spark: Any) -> Iterator[Any]:
    """The session, its ``spark.provplug.fs.*`` settings unset again after the test."""
    yield spark
    for key in [k for k in spark.conf.getAll if k.startswith("spark.provplug.fs.")]:
        spark.conf.unset(key)


def test_the_spark_plugin_answers_with_the_sessions_settings(fs_conf: Any) -> None:
    assert get_plugins().filesystem_settings(fs_conf) == Connection()
    fs_conf.conf.set("spark.provplug.fs.endpoint", "http://127.0.0.1:9000")
    fs_conf.conf.set("spark.provplug.fs.region", "eu-west-3")
    assert get_plugins().filesystem_settings(fs_conf) == Connection("127.0.0.1:9000", "eu-west-3", "http")
    fs_conf.conf.set("spark.provplug.fs.scheme", "https")  # said on its own, it wins over the endpoint's
    assert get_plugins().filesystem_settings(fs_conf) == Connection("127.0.0.1:9000", "eu-west-3", "https")


def test_other_engines_get_no_answer_from_the_spark_plugin() -> None:
    assert get_plugins().filesystem_settings(object()) is None


def test_a_misspelt_setting_fails_the_capture_before_anything_is_written(fs_conf: Any, tmp_path: Path) -> None:
    fs_conf.conf.set("spark.provplug.fs.endpont", "127.0.0.1:9000")
    store = tmp_path / "never.prov"
    refused = pytest.raises(ConnectionSettingsError, match=r"spark\.provplug\.fs\.\*: unknown setting 'endpont'")
    with refused, provplug.capture(fs_conf, store=str(store)):
        raise AssertionError("the block must not run")
    assert not store.exists()


def test_the_store_uri_of_the_run_carries_the_settings(fs_conf: Any, mocker: Any) -> None:
    """What tasks receive is the run's store URI: it holds the session's settings
    (the store itself is faked here; tests/cluster reaches a real S3 server with them)."""
    from provplug.store import open as store_open

    fs_conf.conf.set("spark.provplug.fs.endpoint", "127.0.0.1:9")
    fs_conf.conf.set("spark.provplug.fs.scheme", "http")
    opened = mocker.patch.object(store_open, "open_store", side_effect=RuntimeError("stop here"))
    stopped = pytest.raises(RuntimeError, match="stop here")
    with stopped, provplug.capture(fs_conf, store="s3a://bucket/people.prov?region=us-east-1"):
        raise AssertionError("the block must not run")
    (uri, _plugins), _ = opened.call_args
    assert uri == "s3://bucket/people.prov?region=us-east-1&endpoint_override=127.0.0.1:9&scheme=http"
