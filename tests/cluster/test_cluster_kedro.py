"""The Kedro example (examples/kedro_spaceflights) on the cluster with the
store on the S3 server (issue 27): ``kedro run`` captures and commits, and
every answer equals the same project's run captured under local[2] to local
disk (compared as JSON).

The example is not changed: the test's copy of the project gets a Kedro
configuration environment of its own, ``conf/cluster/spark.yml``, which
names the cluster's master (Kedro merges it over ``conf/base``), and runs
``kedro run --env cluster``, as a user points a project at a cluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .servers import S3Server, SparkCluster
from .test_cluster_capture import _unnumbered
from .test_s3_store import answers

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Kedro's telemetry plugin is installed with Kedro: it must never reach the network.
NO_TELEMETRY = {"DO_NOT_TRACK": "1", "KEDRO_DISABLE_TELEMETRY": "true"}

QUESTIONS: list[tuple[str, ...]] = [
    ("tables", "{store}", "--json"),
    ("stats", "{store}", "--json"),
    *(
        (
            "lineage",
            "{store}",
            "price_by_location.avg_price",
            "--where",
            "company_location = 'Niue'",
            "--method",
            m,
            "--json",
        )
        for m in ("csprov", "ccprov", "rq")
    ),
    *(
        ("lineage", "{store}", "shuttles.price", "--where", "id = 12", "--direction", "down", "--method", m, "--json")
        for m in ("csprov", "ccprov", "rq")
    ),
    ("lineage", "{store}", "top_shuttles.company_rating", "--where", "shuttle_id = 13", "--json"),
    ("whatif", "{store}", "--delete", "shuttles", "--where", "id = 12", "--json"),
    (
        "export",
        "{store}",
        "price_by_location.avg_price",
        "--where",
        "company_location = 'Niue'",
        "--format",
        "prov-json",
    ),
]


def _project(destination: Path) -> Path:
    """A fresh copy of the example project (its shipped inputs only)."""
    ignored = shutil.ignore_patterns("__pycache__", "03_primary", "08_reporting", "09_provenance", "*.prov")
    return Path(shutil.copytree(EXAMPLES / "kedro_spaceflights", destination, ignore=ignored))


def _kedro_run(project: Path, store: str, env: dict[str, str], *args: str) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "kedro", "run", *args],
        cwd=project,
        env={
            **{k: v for k, v in os.environ.items() if k != "PROVPLUG_STORE"},
            **NO_TELEMETRY,
            **env,
            "PROVPLUG_STORE": store,
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, f"kedro run {' '.join(args)}: exit {ran.returncode}\n{ran.stderr[-4000:]}"


def _on_the_cluster(project: Path, cluster: SparkCluster) -> None:
    """The project's Kedro environment ``cluster``: its Spark session on the cluster's master."""
    conf = project / "conf" / "cluster"
    conf.mkdir()
    (conf / "spark.yml").write_text(
        f"spark.master: {cluster.master}\nspark.cores.max: 2\nspark.executor.memory: 512m\n"
    )


@pytest.mark.cluster
def test_kedro_example_on_the_cluster_to_s3_answers_as_local(
    cli: Any, cluster: SparkCluster, s3_env: S3Server, tmp_path: Path
) -> None:
    # Both runs in one project folder (the answers name the datasets' paths).
    local, project = str(tmp_path / "local.prov"), tmp_path / "project"
    _kedro_run(_project(project), local, {})
    shutil.rmtree(project)
    remote = s3_env.uri("kedro-cluster")
    _on_the_cluster(_project(project), cluster)
    _kedro_run(project, remote, s3_env.env(), "--env", "cluster")

    def asked(store: str) -> dict[str, Any]:
        assert cli("index", store, "--local", "--quiet").code == 0
        return _by_value(_unnumbered(answers(cli, store, QUESTIONS)))

    expected = asked(local)
    assert expected["stats {store} --json"]["triples"] > 0
    assert asked(remote) == expected


def _by_value(answers: dict[str, Any]) -> dict[str, Any]:
    """Answers with the row numbers of ``model_input_table`` left out: a
    join's output rows come in the order its shuffle delivers them, which
    differs between runs (and masters); rows are compared by their values."""
    return {q: _export_by_value(a) if q.startswith("export") else _unordered(a) for q, a in answers.items()}


def _export_by_value(document: dict[str, Any]) -> Any:
    """A PROV-JSON document with each value entity named by what it holds (its
    id and its ``pp:rowNumber`` are the row's number) and relations unordered."""
    entities = {eid: {k: v for k, v in e.items() if k != "pp:rowNumber"} for eid, e in document["entity"].items()}
    names = {eid: json.dumps(e, sort_keys=True) if eid.startswith("ppv:") else eid for eid, e in entities.items()}

    def renamed(record: dict[str, Any]) -> dict[str, Any]:
        return {k: names.get(v, v) if isinstance(v, str) else v for k, v in record.items()}

    out: dict[str, Any] = {"entity": sorted(names[eid] for eid in entities)}
    for relation, records in document.items():
        if relation not in ("entity", "prefix", "activity"):
            out[relation] = sorted(json.dumps(renamed(r), sort_keys=True) for r in records.values())
    return {**out, "prefix": document["prefix"], "activity": document["activity"]}


def _unordered(answer: Any) -> Any:
    """``answer`` without ``row`` numbers, every list compared as a multiset."""
    if isinstance(answer, dict):
        return {k: _unordered(v) for k, v in answer.items() if k != "row"}
    if isinstance(answer, list):
        return sorted((_unordered(v) for v in answer), key=lambda v: json.dumps(v, sort_keys=True))
    return answer
