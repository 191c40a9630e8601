"""The README's people pipeline captured on a Spark standalone cluster with
the store on the S3 server (issue 27): it commits, and every answer equals
the same pipeline's captured under local[2] to local disk (as JSON).

The cluster's driver is a subprocess (people_driver.py): the pytest process
keeps its own local[2] session."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .servers import REGION, WORKERS, S3Server, SparkCluster, free_port
from .test_s3_store import QUESTIONS as S3_QUESTIONS
from .test_s3_store import _comparable, answers

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# The questions of test_s3_store that one run can answer (no diff between runs;
# runs lists what differs by nature between two captures), and its tables.
QUESTIONS: list[tuple[str, ...]] = [
    *(q for q in S3_QUESTIONS if q[0] not in ("diff", "runs")),
    ("tables", "{store}", "--json"),
]


def _answers(cli: Any, store: str) -> dict[str, Any]:
    assert cli("index", store, "--local", "--quiet").code == 0
    return answers(cli, store, QUESTIONS)


@pytest.mark.cluster
def test_people_on_the_cluster_to_s3_answers_as_local(
    cli: Any, spark: Any, cluster: SparkCluster, s3_env: S3Server, tmp_path: Path
) -> None:
    from provplug.cli.demo import capture_people

    local = str(tmp_path / "people.prov")
    capture_people(spark, local)
    remote = s3_env.uri("people-cluster")
    driver = _drive(cluster, s3_env, remote)
    assert driver.returncode == 0, driver.stderr[-3000:]
    # Each worker ran an executor of the driver: its tasks ran in two processes, as on two machines.
    assert all(any((cluster.work_dir / f"worker-{n}").glob("app-*")) for n in range(WORKERS))
    expected = _answers(cli, local)
    assert json.loads(cli("stats", local, "--json").out)["triples"] == 15
    assert _answers(cli, remote) == expected
    # The run can go again, with no rename: delete-run, then gc.
    assert cli("delete-run", remote, "1", "--quiet").code == 0
    assert json.loads(cli("runs", remote, "--json").out) == []
    assert cli("gc", remote, "--now", "--quiet").code == 0


@pytest.mark.cluster
def test_spark_provplug_fs_settings_reach_executors_that_know_no_endpoint(
    cli: Any, spark: Any, cluster: SparkCluster, s3_env: S3Server, tmp_path: Path
) -> None:
    """Where S3 is, said by ``spark.provplug.fs.*`` alone: the store URI has no
    query, and the driver's and the executors' AWS_ENDPOINT_URL name a closed
    port (a request that missed the settings fails, and none can reach a real
    cloud). The run commits and answers as the local[2] capture does."""
    from provplug.cli.demo import capture_people

    local = str(tmp_path / "people.prov")
    capture_people(spark, local)
    closed = f"http://127.0.0.1:{free_port()}"
    prefix = "people-fs-settings"
    driver = _drive(
        cluster,
        s3_env,
        f"s3a://{s3_env.bucket}/{prefix}",
        *("--conf", f"spark.provplug.fs.endpoint={s3_env.url}", "--conf", f"spark.provplug.fs.region={REGION}"),
        *("--conf", f"spark.executorEnv.AWS_ENDPOINT_URL={closed}"),
        env={"AWS_ENDPOINT_URL": closed, "AWS_DEFAULT_REGION": ""},
    )
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert _answers(cli, s3_env.uri(prefix)) == _answers(cli, local)


def _drive(
    cluster: SparkCluster, s3: S3Server, store: str, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """people_driver.py on the cluster, as a driver process of its own (``env``: variables changed)."""
    return subprocess.run(
        [sys.executable, str(HERE / "people_driver.py"), cluster.master, store, *options],
        env={**s3.env(), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
    )


def _driver_disk(cluster: SparkCluster, name: str) -> Path:
    """A fresh folder on the driver's disk that the cluster's worker does not see."""
    assert cluster.hidden is not None
    folder = cluster.hidden / name
    folder.mkdir()
    return folder


@pytest.mark.cluster
def test_a_local_path_store_on_the_cluster_is_refused_before_the_pipeline_runs(
    isolated_cluster: SparkCluster, s3: S3Server
) -> None:
    store = _driver_disk(isolated_cluster, "refused") / "people.prov"
    driver = _drive(isolated_cluster, s3, str(store))
    assert driver.returncode != 0
    assert "spark.provplug.sharedStore=true" in driver.stderr, driver.stderr[-2000:]
    assert isolated_cluster.master in driver.stderr, driver.stderr[-2000:]
    assert not store.exists() or not any((store / "runs").iterdir())


@pytest.mark.cluster
def test_a_store_declared_shared_that_is_not_fails_at_commit_and_commits_nothing(
    isolated_cluster: SparkCluster, s3: S3Server
) -> None:
    """The silent loss of issue 27 made loud: the executors write the run's
    files onto their own disk (a tmpfs the driver does not see); the run
    fails naming a file it lacks, and nothing is committed."""
    from provplug.store.open import open_store

    store = _driver_disk(isolated_cluster, "not-shared") / "people.prov"
    driver = _drive(isolated_cluster, s3, str(store), "--shared")
    assert driver.returncode != 0
    lost = re.search(
        r"file\(s\) Spark's tasks wrote for the run are not in the store \S+ \(first: (\S+)\)", driver.stderr
    )
    assert lost, driver.stderr[-3000:]
    assert lost.group(1).startswith(str(store)) and not Path(lost.group(1)).exists()
    # The failed run leaves no store when it made the store, else the store without it.
    assert not store.exists() or open_store(str(store)).runs() == []


SALES = REPO / "examples" / "sales_script"
SALES_QUESTIONS = [
    ("tables", "{store}", "--json"),
    ("stats", "{store}", "--json"),
    ("lineage", "{store}", "big_regions.total", "--where", "total > 0", "--json"),
    ("lineage", "{store}", "orders.amount", "--where", "amount > 0", "--direction", "down", "--json"),
]


@pytest.mark.cluster
def test_provplug_run_of_the_sales_example_on_the_cluster_to_s3_answers_as_local(
    cli: Any, spark: Any, cluster: SparkCluster, s3_env: S3Server, tmp_path: Path
) -> None:
    local, remote = str(tmp_path / "sales.prov"), s3_env.uri("sales-cluster")
    assert cli("run", local, SALES / "sales.py", SALES / "data", tmp_path / "out", "--quiet").code == 0
    submit = f"--master {cluster.master} --conf spark.cores.max=2 --conf spark.executor.memory=512m pyspark-shell"
    script = [
        str(SALES / "sales.py"),
        str(SALES / "data"),
        str(tmp_path / "out"),
    ]  # the same: answers name the datasets
    ran = subprocess.run(
        [sys.executable, "-m", "provplug", "run", remote, *script, "--quiet"],
        env={**os.environ, **s3_env.env(), "PYSPARK_SUBMIT_ARGS": submit},
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0 and "coarse" not in ran.stderr, ran.stderr[-3000:]

    def answers(store: str) -> dict[str, Any]:
        assert cli("index", store, "--local", "--quiet").code == 0
        out = {}
        for question in SALES_QUESTIONS:
            result = cli(*[a.format(store=store) for a in question])
            assert result.code == 0, (question, result)
            out[" ".join(question)] = _comparable(json.loads(result.out), store)
        return out

    tables = {store: json.loads(cli("tables", store, "--json").out) for store in (local, remote)}
    assert [t["name"] for t in tables[remote]] == [t["name"] for t in tables[local]], tables
    assert _unnumbered(answers(remote)) == _unnumbered(answers(local))


def _unnumbered(answers: dict[str, Any]) -> dict[str, Any]:
    """Answers without the row numbers of the sales example's CSV sources:
    they are numbered as Spark splits the files (local[2] and a 1-core
    cluster split them differently), so a lineage answer is compared by the
    rows it reaches (their values), its edges per op, and its counts."""
    out = {}
    for question, answer in answers.items():
        if isinstance(answer, dict) and "edges" in answer:
            answer = {
                "rows": sorted(json.dumps(row, sort_keys=True) for row in answer["rows"].values()),
                "edges": sorted(e["op"] for e in answer["edges"]),
                "stats": answer["stats"],
                "run": answer["run"],
            }
        out[question] = answer
    return out
