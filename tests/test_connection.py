"""provplug.plugin.connection: how a capture's S3 settings (the URI's query,
the engine's settings, the driver's environment) are written into the S3 URIs
its tasks receive, and which wins."""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlparse

import pyarrow.fs as pafs
import pytest

from provplug.errors import ConnectionSettingsError
from provplug.plugin.connection import Connection, completed, connecting, filesystem_of

LOCAL_S3 = Connection(endpoint="127.0.0.1:9000", region="eu-west-3", scheme="http")


def query(uri: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(uri).query).items()}


def test_settings_are_written_into_an_s3_uri_as_pyarrow_reads_them() -> None:
    uri = LOCAL_S3.applied("s3://bucket/people.prov")
    assert uri.startswith("s3://bucket/people.prov?")
    assert query(uri) == {"endpoint_override": "127.0.0.1:9000", "region": "eu-west-3", "scheme": "http"}


def test_hadoop_schemes_are_s3_and_other_uris_and_paths_are_left_as_they_are() -> None:
    assert LOCAL_S3.applied("s3a://bucket/in/part-0.parquet").startswith("s3://bucket/in/part-0.parquet?")
    assert LOCAL_S3.applied("S3N://bucket/x").startswith("s3://bucket/x?")
    for other in ("/data/people.prov", "people.prov", "file:///data/x", "gs://bucket/x", "hdfs://nn:8020/x"):
        assert LOCAL_S3.applied(other) == other


def test_the_uris_own_query_wins_setting_by_setting() -> None:
    uri = LOCAL_S3.applied("s3://bucket/p?region=us-east-1&endpoint_override=minio:9000")
    assert query(uri) == {"region": "us-east-1", "endpoint_override": "minio:9000", "scheme": "http"}


def test_the_engines_settings_win_over_the_environment_and_fill_from_it() -> None:
    engine = Connection.from_settings({"endpoint": "http://127.0.0.1:9000"}, "spark.provplug.fs.*")
    env = Connection.from_environment({"AWS_ENDPOINT_URL": "https://s3.example:443", "AWS_DEFAULT_REGION": "ap-1"})
    assert engine.over(env) == Connection("127.0.0.1:9000", "ap-1", "http")


def test_the_environment_names_endpoint_and_region_as_aws_tools_do() -> None:
    env = {
        "AWS_ENDPOINT_URL": "http://general:1",
        "AWS_ENDPOINT_URL_S3": "http://s3only:2",
        "AWS_DEFAULT_REGION": "default-region",
        "AWS_REGION": "region",
    }
    assert Connection.from_environment(env) == Connection("s3only:2", "region", "http")
    assert Connection.from_environment({}) == Connection()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"endpont": "127.0.0.1:9000"}, "unknown setting 'endpont' (known: endpoint, region, scheme)"),
        ({"scheme": "ftp"}, "scheme must be http or https, not 'ftp'"),
        ({"endpoint": "http://host:9000/bucket"}, "endpoint must be host:port or scheme://host:port"),
    ],
)
def test_a_bad_setting_is_a_one_line_error_naming_where_it_came_from(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConnectionSettingsError) as raised:
        Connection.from_settings(settings, "spark.provplug.fs.*")
    assert str(raised.value).startswith("spark.provplug.fs.*: ") and message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_malformed_environment_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """A local-disk capture must not fail over an AWS variable it never uses."""
    with caplog.at_level(logging.WARNING, logger="provplug.plugin.connection"):
        found = Connection.from_environment({"AWS_ENDPOINT_URL": "http://host/path", "AWS_REGION": "r"})
    assert found == Connection(region="r")
    assert "endpoint must be host:port" in caplog.text


def test_within_a_run_uris_are_completed_with_the_runs_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    assert completed("s3://bucket/x") == "s3://bucket/x"
    with connecting(LOCAL_S3):
        assert query(completed("s3a://bucket/x")) == {
            "endpoint_override": "127.0.0.1:9000",
            "region": "eu-west-3",
            "scheme": "http",
        }
    assert completed("s3://bucket/x") == "s3://bucket/x"


def test_the_filesystem_of_a_data_uri_carries_the_settings_to_whoever_unpickles_it() -> None:
    """What a Spark task receives: the pyarrow filesystem, pickled with its endpoint and region."""
    import pickle

    with connecting(LOCAL_S3):
        fs, path = filesystem_of("s3a://bucket/in/part-0.parquet")
    assert isinstance(fs, pafs.S3FileSystem) and path == "bucket/in/part-0.parquet"
    again = pickle.loads(pickle.dumps(fs))
    assert again.region == "eu-west-3"
    assert "127.0.0.1:9000" in repr(again.__reduce__())


def test_the_store_client_reads_a_uris_connection_as_the_capture_writes_it() -> None:
    """One parser for both sides: what :meth:`Connection.applied` writes into
    a URI, :meth:`Connection.of_uri` reads back (the store's boto3 client
    takes its endpoint and region from it)."""
    written = Connection("127.0.0.1:9000", "eu-west-1", "http").applied("s3://bucket/store.prov")
    assert Connection.of_uri(written) == Connection("127.0.0.1:9000", "eu-west-1", "http")
    assert Connection.of_uri(written).endpoint_url == "http://127.0.0.1:9000"
    assert Connection.of_uri("s3://b/s?endpoint_override=s3.example.com").endpoint_url == "https://s3.example.com"
    assert Connection.of_uri("s3://b/s").endpoint_url is None
    with pytest.raises(ConnectionSettingsError, match="the URI s3://b/s: scheme must be http or https"):
        Connection.of_uri("s3://b/s?endpoint_override=h:1&scheme=ftp")
