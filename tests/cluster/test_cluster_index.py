"""The Spark index engine on the cluster, the store on the S3 server (issue
27): the engine's tasks read the triples and write the generation with
pyarrow (the pyspark wheel has no Hadoop S3 connector), every answer equals
the local engine's (as JSON), and the generation holds as many files as the
local engine's (one per bucket)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pyarrow.fs as pafs
import pytest

from provplug.index import current_dir
from provplug.store.open import open_store

from .servers import S3Server, SparkCluster
from .test_s3_store import answers, write_paper_run


def _generation_files(uri: str) -> list[str]:
    """The live generation's files (objects on S3), relative to its folder."""
    store = open_store(uri)
    folder = current_dir(store)
    listed = store.fs.get_file_info(pafs.FileSelector(folder, recursive=True))
    return sorted(i.path[len(folder) + 1 :] for i in listed if i.type == pafs.FileType.File)


@pytest.mark.cluster
def test_spark_index_engine_on_the_cluster_to_s3_answers_as_the_local_engine(
    cli: Any, cluster: SparkCluster, s3_env: S3Server
) -> None:
    uri = s3_env.uri("people-spark-index")
    store = open_store(uri)
    write_paper_run(store, older=True)
    write_paper_run(store)
    assert cli("index", uri, "--local", "--quiet").code == 0
    expected, local_files = answers(cli, uri), _generation_files(uri)

    built = subprocess.run(
        [sys.executable, "-m", "provplug", "index", uri, "--spark", "--full", "--json"],
        env={**os.environ, **s3_env.env(), "PROVPLUG_SPARK_MASTER": cluster.master},
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert json.loads(built.stdout)["engine"] == "spark"
    assert answers(cli, uri) == expected
    spark_files = _generation_files(uri)
    assert len(spark_files) == len(local_files), (spark_files, local_files)
