"""What each way of starting a run records as its context (issue 26):
``provplug run`` (script, arguments, git commit), the Kedro plugin (project,
pipeline, environment, parameters, label), and ``diff`` / ``whatif`` /
``graph`` / ``export`` naming the runs they used."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES

import provplug
from provplug.cli.demo import adults, average_age
from provplug.ingest.runcontext import git_state

SCRIPT = EXAMPLES / "sales_script" / "sales.py"
DATA = EXAMPLES / "sales_script" / "data"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "HOME": str(repo),
            "PATH": "/usr/bin:/bin",
        },
    )
    return done.stdout.strip()


def _repository(folder: Path) -> Path:
    """A git repository holding the sales script, committed once."""
    folder.mkdir()
    _git(folder, "init", "-q")
    shutil.copy(SCRIPT, folder / "sales.py")
    _git(folder, "add", "sales.py")
    _git(folder, "commit", "-q", "-m", "sales")
    return folder


# -- git -----------------------------------------------------------------------------------


def test_git_state_of_a_repository_clean_then_dirty(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    head = _git(repo, "rev-parse", "HEAD")
    assert git_state(str(repo / "sales.py")) == {"commit": head, "dirty": False}
    (repo / "sales.py").write_text((repo / "sales.py").read_text() + "\n# changed\n")
    assert git_state(str(repo / "sales.py")) == {"commit": head, "dirty": True}


def test_no_repository_or_no_git_is_no_commit_never_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # git must not find a repository above tmp_path
    assert git_state(str(tmp_path / "plain")) is None
    repo = _repository(tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "plain"))  # no git executable to be found
    assert git_state(str(repo)) is None


# -- provplug run --------------------------------------------------------------------------


def test_provplug_run_records_the_script_its_arguments_git_label_and_tags(spark: Any, cli: Any, tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "notes.txt").write_text("untracked: the tree stays clean")
    store, out = tmp_path / "sales.prov", tmp_path / "out"
    result = cli(
        "run", "--store", store, "--label", "daily", "--tag", "prod", "--tag", "eu", repo / "sales.py", DATA, out
    )
    assert result.code == 0, result
    assert "captured run 1 (" in result.err
    (run,) = json.loads(cli("runs", store, "--json").out)
    assert run["entry_point"] == {"type": "script", "path": str(repo / "sales.py"), "args": [str(DATA), str(out)]}
    assert run["git"] == {"commit": head, "dirty": False}
    assert (run["label"], run["tags"], run["engine"]) == ("daily", ["prod", "eu"], "spark")
    assert run["spark_app_id"] == spark.sparkContext.applicationId
    line = cli("runs", store).out.splitlines()[1]
    assert line.split()[:6] == ["1", "daily", "script", "sales.py", str(DATA), str(out)]
    assert head[:8] in line


def test_a_bad_label_fails_before_the_script_runs(cli: Any, tmp_path: Path) -> None:
    result = cli("run", "--store", tmp_path / "s.prov", "--label", "7", SCRIPT, DATA, tmp_path / "out")
    assert result.code == 2 and "run label" in result.err and result.err.count("\n") == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "s.prov").exists()


# -- Kedro -----------------------------------------------------------------------------------


def _doubled(df: Any) -> Any:
    return df.withColumn("x", df["x"] * 2)


def test_the_kedro_plugin_records_project_pipeline_env_parameters_and_label(spark: Any, tmp_path: Path) -> None:
    pytest.importorskip("kedro.io")
    from kedro.framework.hooks.manager import _create_hook_manager
    from kedro.io import DataCatalog, MemoryDataset
    from kedro.pipeline import node, pipeline
    from kedro.runner import SequentialRunner
    from provplug_kedro.hooks import ProvplugHooks

    settings = {"label": "nightly", "tags": ["kedro"]}
    catalog = DataCatalog(
        {
            "numbers": MemoryDataset(spark.createDataFrame([(1,), (2,)], "x int")),
            "params:provplug": MemoryDataset(settings),
            "parameters": MemoryDataset({"provplug": settings, "factor": 2}),
        }
    )
    flow = pipeline([node(_doubled, "numbers", "result", name="double")])
    store = tmp_path / "store.prov"
    manager = _create_hook_manager()
    manager.register(ProvplugHooks(store=store))
    run_params = {"project_path": str(tmp_path), "runner": "SequentialRunner", "pipeline_name": "maths", "env": "prod"}
    manager.hook.before_pipeline_run(run_params=run_params, pipeline=flow, catalog=catalog)
    result = SequentialRunner().run(flow, catalog, manager)
    manager.hook.after_pipeline_run(run_params=run_params, run_result=result, pipeline=flow, catalog=catalog)

    (run,) = provplug.open(store).runs()
    assert run["entry_point"] == {
        "type": "kedro",
        "project": str(tmp_path),
        "pipeline": "maths",
        "env": "prod",
        "params": {"factor": 2, "provplug": settings},
    }
    assert (run["label"], run["tags"], run["number"]) == ("nightly", ["kedro"], 1)


# -- the commands name their runs ------------------------------------------------------------------


@pytest.fixture(scope="module")
def ages(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of the people pipeline: Steve is 30, then 32 (label older)."""
    store = tmp_path_factory.mktemp("ages") / "people.prov"
    for age, label in ((30, None), (32, "older")):
        people = [("Steve", "NY", age), ("Mark", "NY", 40), ("Mary", "LA", 20)]
        with provplug.capture(spark, store=store, label=label) as run:
            average_age(
                adults(
                    run.source(
                        spark.createDataFrame(people, "Name string, City string, Age int").coalesce(1), "Person1"
                    )
                )
            )
    provplug.open(store).index(engine="local")
    return store


def test_diff_of_a_table_compares_its_two_latest_runs(ages: Path, cli: Any) -> None:
    result = cli("diff", ages, "AvgAge", "--key", "City", "--json")
    assert result.code == 0, result
    diff = json.loads(result.out)
    assert (diff["runs"]["a"]["number"], diff["runs"]["b"]["number"], diff["runs"]["chosen"]) == (1, 2, "latest two")
    (table,) = diff["tables"]
    assert [(c["column"], c["old"], c["new"]) for c in table["changed"]] == [("Age", 35.0, 36.0)]
    text = cli("diff", ages, "AvgAge", "--key", "City").out.splitlines()[0]
    assert text.startswith("run 1 [") and "→ run 2 (label older) [" in text
    assert text.endswith("the two latest runs that wrote the table")
    named = json.loads(cli("diff", ages, "older", "1", "AvgAge.Age", "--key", "City", "--json").out)
    assert [(c["old"], c["new"]) for c in named["tables"][0]["changed"]] == [(36.0, 35.0)]


def test_diff_of_a_table_no_run_wrote_is_a_one_line_error(ages: Path, cli: Any) -> None:
    result = cli("diff", ages, "Nope")
    assert result.code == 2 and "no run wrote a table 'Nope'" in result.err and result.err.count("\n") == 1


def test_whatif_graph_and_export_name_the_run_they_used(ages: Path, cli: Any) -> None:
    whatif = cli("whatif", ages, "--delete", "Person1", "--where", "Name = 'Mark'")
    assert whatif.code == 0, whatif
    assert (
        whatif.out.splitlines()[0]
        == "run 2 (label older): the latest of 2 runs that wrote Person1; --run picks another"
    )
    chosen = json.loads(
        cli("whatif", ages, "--delete", "Person1", "--where", "Name = 'Mark'", "--run", "1", "--json").out
    )
    assert (chosen["run"]["number"], chosen["run"]["chosen"]) == (1, "given")
    graph = cli("graph", ages, "--run", "latest~1")
    assert graph.code == 0 and graph.out.splitlines()[0] == "run 1 of 2 runs"
    exported = cli("export", ages, "AvgAge.Age", "--where", "City = 'NY'", "--format", "prov-json")
    assert exported.code == 0, exported
    assert "provplug: run 2 (label older): the latest of 2 runs that wrote AvgAge" in exported.err
    json.loads(exported.out)


def test_metrics_names_the_runs_it_compared(ages: Path, cli: Any) -> None:
    result = cli("metrics", ages, ages, "AvgAge", "--run-full", "1", "--key", "City")
    assert result.code == 0, result
    full, reduced = result.out.splitlines()[:2]
    assert full == "full: run 1, chosen with --run-full"
    assert reduced == "reduced: run 2 (label older), the latest of 2 captures"
    data = json.loads(cli("metrics", ages, ages, "AvgAge", "--run-full", "latest~1", "--key", "City", "--json").out)
    assert (data["full"]["run_number"], data["reduced"]["run_number"], data["reduced"]["run_label"]) == (1, 2, "older")
