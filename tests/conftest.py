"""Shared fixtures: one lazily started SparkSession for the whole run, stores
in temporary directories, and an in-process CLI runner."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Kedro's telemetry plugin comes with the kedro extra: no test may reach the network.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "true")

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
DATA = EXAMPLES / "data"
# HSQLDB's JDBC driver from Debian's libhsqldb-java (.ci/run installs it): the JDBC write tests' database.
HSQLDB_JAR = Path("/usr/share/java/hsqldb.jar")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession (UI off) shared by every test that asks for it."""
    from provplug.sparksession import local_spark

    conf = {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4", "spark.driver.memory": "2g"}
    if HSQLDB_JAR.is_file():  # on the driver's class path: JDBC finds the driver there
        conf |= {"spark.jars": str(HSQLDB_JAR), "spark.driver.extraClassPath": str(HSQLDB_JAR)}
    session = local_spark("provplug-tests", "local[2]", **conf)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _fresh_plugins() -> Iterator[None]:
    """Each test sees plugins loaded anew (and no state left by another test)."""
    from provplug.plugin.manager import reset_plugins

    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture(scope="session")
def demo_store(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The paper's running example captured from Spark as ``provplug demo`` does,
    indexed; shared read-only by the tests that query it."""
    from provplug.cli.demo import capture_people
    from provplug.index.build import build_index
    from provplug.store.open import open_store

    store = tmp_path_factory.mktemp("demo") / "people.prov"
    capture_people(spark, str(store))
    build_index(open_store(str(store)), engine="local")
    return store


@pytest.fixture
def paper_rows_store(tmp_path: Path) -> tuple[Path, dict[int, int]]:
    """The paper's Tables 1-4 imported with stored rows and packed ids (as a
    capture stores them), indexed; and the map from the paper's ids to them."""
    from test_lineage_support import write_paper_store_with_rows

    from provplug.index.build import build_index
    from provplug.store.open import open_store

    path = tmp_path / "people.prov"
    packed = write_paper_store_with_rows(open_store(path), DATA / "paper_table4_triples.csv")
    build_index(path, engine="local")
    return path, packed


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store.prov"


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"CliResult(code={self.code}, out={self.out!r}, err={self.err!r})"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """Run ``provplug ARGS`` in-process; return exit code and output."""
    from provplug.cli.main import main

    def run(*args: str | os.PathLike[str]) -> CliResult:
        capsys.readouterr()
        try:
            code = main([os.fspath(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def snapshot(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file and directory under ``root`` with a digest of its bytes."""
    if not root.exists():
        return {}
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in skip:
            continue
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def explore_every_way(cli: Any, store: Path, table: str, column: str, where: str, ops: set[str]) -> dict[str, Any]:
    """runs, tables, show, graph, export and lineage pictures on one store (issue 13 on engines'
    stores): each command succeeds and agrees with the run's ops and tables."""
    import json
    import xml.etree.ElementTree as ET

    runs = json.loads(cli("runs", store, "--json").out)
    assert [r["kind"] for r in runs] == ["capture"], runs
    tables = json.loads(cli("tables", store, "--json").out)
    assert table in {t["name"] for t in tables}, tables
    shown = json.loads(cli("show", store, table, "--limit", "2", "--json").out)
    assert column in shown["columns"] and len(shown["sample"]) <= 2, shown
    svg = cli("graph", store, "--format", "svg").out
    text = " ".join(t for t in ET.fromstring(svg).itertext())
    assert all(op in text for op in ops), (ops, text)
    events = json.loads(cli("export", store, "--format", "openlineage").out)
    assert {e["job"]["name"] for e in events} == ops, events
    picture = cli("lineage", store, f"{table}.{column}", "--where", where, "--format", "svg")
    assert picture.code == 0, picture
    ET.fromstring(picture.out)
    return {"runs": runs, "tables": tables, "show": shown, "events": events}
