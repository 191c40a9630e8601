"""Session fixtures of the cluster tests (issue 27): an S3 API server and a
Spark standalone cluster on 127.0.0.1, started here, stopped after the
session. Run them as their own stage: ``pytest tests/cluster``.

The cluster's driver never lives in the pytest process (which holds the
local[2] session of tests/conftest.py): a cluster test runs a script with
``spark.master`` set to the cluster, in a subprocess of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .servers import S3Server, SparkCluster, java_missing, s3_server, spark_cluster, unshare_missing


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: starts a Spark standalone cluster (tests/cluster; needs java)")


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server with a fresh bucket, for the whole session."""
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def s3_env(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The S3 server's credentials in this process's environment (pyarrow and boto3 read them)."""
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    return s3


@pytest.fixture(scope="session")
def cluster(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A standalone master and two workers (1 core, 1 GiB each) whose executors reach the S3 server."""
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    with spark_cluster(tmp_path_factory.mktemp("cluster"), s3.env()) as running:
        yield running


@pytest.fixture(scope="session")
def isolated_cluster(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A standalone master and two workers that do not share the driver's
    disk: each worker runs in a mount namespace of its own over an empty
    tmpfs on ``hidden`` (a folder of this session's temporary directory), so
    a store under ``hidden`` is on the driver's disk only."""
    reason = java_missing() or unshare_missing()
    if reason:
        pytest.skip(reason)
    hidden = tmp_path_factory.mktemp("driver-disk")
    with spark_cluster(tmp_path_factory.mktemp("isolated-cluster"), s3.env(), hidden) as running:
        yield running


def child_env(s3: S3Server) -> dict[str, str]:
    """The environment of a driver script run in a subprocess."""
    return {
        **os.environ,
        **s3.env(),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    }
