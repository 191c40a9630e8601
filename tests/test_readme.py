"""The README's commands and examples, run as written."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, explore_every_way

README = (REPO / "README.md").read_text()


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def python_block_after(heading: str) -> str:
    """The first python block after ``heading``."""
    start = README.index(heading)
    return re.search(r"```python\n(.*?)```", README[start:], flags=re.S).group(1)


def block_after(heading: str) -> str:
    """The first bash block after the paragraph that contains ``heading``."""
    start = README.index(heading)
    return re.search(r"```bash\n(.*?)```", README[start:], flags=re.S).group(1).strip()


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    command = block_after("**Run the whole test suite**")
    ci_lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert command in ci_lines


def test_readme_import_example_runs_as_written(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    block = block_after("The paper's Table 4 ships in")
    commands = [c.split("#")[0] for c in block.replace("\\\n", " ").splitlines() if c.strip()]
    outputs = []
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "provplug"
        result = cli(*argv[1:])
        assert result.code == 0, result
        outputs.append(result.out)
    stats = json.loads(outputs[-1])
    assert stats["triples"] == 15 and stats["tables"] == 3


def test_readme_main_job_runs_as_written(cli, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`provplug demo`: capture, index and the lineage of NY's average age."""
    command = block_after("**Run the main job**")
    install, main_job = (part.strip() for part in command.split("&&"))
    assert install.startswith("python3 -m pip install")
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(main_job)
    assert argv[:3] == ["python3", "-m", "provplug"]
    result = cli(*argv[3:])
    assert result.code == 0, result
    out = result.out
    assert "AvgAge.Age = 35.0" in out
    assert "Name=Steve" in out and "Name=Mark" in out
    assert "Shane" not in out and "Mary" not in out
    assert (tmp_path / "provplug-demo.prov" / "index").is_dir()
    again = cli(*argv[3:])
    assert again.code == 2 and "already exists" in again.err

    # "What if these rows had not been there?": the whatif example, then the depends one.
    block = re.search(r"^\$ (provplug whatif [^\n]*)\n(.*?)\n```", README, flags=re.M | re.S)
    whatif = cli(*shlex.split(block.group(1))[1:])
    assert whatif.code == 0, whatif
    assert whatif.out.strip().splitlines() == block.group(2).splitlines()
    example = re.search(r"^\$ (provplug depends .*)$", README, flags=re.M).group(1)
    result = cli(*shlex.split(example)[1:])
    assert result.code == 0, result
    lines = [line.strip() for line in result.out.splitlines()]
    assert lines[0].startswith("yes: AvgAge.Age = 35.0") and "depends on Person1.Age = 40" in lines[0], result.out
    assert lines[-2].startswith("-> R1 -> Person2 row Name=Mark") and lines[-2].endswith("vanishes")
    assert lines[-1].startswith("-> R2 -> AvgAge.Age = 35.0") and lines[-1].endswith("changes Age to 30.0")
    mary = cli(*shlex.split(example.replace("Mark", "Mary"))[1:])
    assert mary.code == 0 and mary.out.startswith("no"), mary


def test_readme_capture_example_runs_as_written(cli, tmp_path: Path) -> None:
    """The first capture example is a whole script: run it as a user would
    (`python3 people.py`, a fresh interpreter), then the commands after it."""
    import provplug

    capture_block = python_block_after("## Capturing provenance (Python API)")
    query_block = python_block_after("## Indexing and lineage queries")
    (tmp_path / "people.py").write_text(capture_block)
    run = subprocess.run([sys.executable, "people.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"\|\s*NY\|\s*35\.0\|", run.stdout) and re.search(r"\|\s*LA\|\s*40\.0\|", run.stdout), run.stdout
    stats = provplug.open_store(tmp_path / "people.prov").stats()
    assert (stats["tables"], stats["ops"], stats["triples"]) == (3, 2, 15)

    for command in block_after("Then index the store").splitlines():
        argv = shlex.split(command)
        assert argv[0] == "provplug"
        result = cli(*[str(tmp_path / a) if a == "people.prov" else a for a in argv[1:]])
        assert result.code == 0, result
    tree = result.out
    assert tree.startswith("AvgAge.Age = 35.0")
    assert "Person1.Age = 30" in tree and "Person1.Age = 40" in tree and "Shane" not in tree

    namespace: dict[str, object] = {}
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec(compile(query_block, "README.md", "exec"), namespace)
    finally:
        os.chdir(old)
    answer = namespace["answer"]
    assert {(r["table"], r["column"], r["value"]) for r in answer.lineage} == {  # type: ignore[attr-defined]
        ("Person2", "Age", 30), ("Person2", "Age", 40), ("Person1", "Age", 30), ("Person1", "Age", 40)
    }

    # "Browsing and managing a store": the notebook calls, on the same store.
    browse: dict[str, object] = {}
    os.chdir(tmp_path)
    try:
        exec(compile(python_block_after("## Browsing and managing a store"), "README.md", "exec"), browse)
    finally:
        os.chdir(old)
    store = browse["store"]
    assert [r["kind"] for r in store.runs()] == ["capture"]  # type: ignore[attr-defined]
    assert sorted(t["name"] for t in store.tables()) == ["AvgAge", "Person1", "Person2"]  # type: ignore[attr-defined]


def test_readme_script_capture_example_runs_as_written(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`provplug run` on the unmodified example script in a fresh interpreter,
    as a user runs it (the script's relative paths are the JVM's: its own
    working directory), then index and lineage."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    run, *queries = block_after("### An unmodified PySpark script").splitlines()
    argv = shlex.split(run)
    assert argv[:2] == ["provplug", "run"]
    done = subprocess.run([sys.executable, "-m", "provplug", *argv[1:]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "big_regions").is_dir()
    for command in queries:
        argv = shlex.split(command)
        assert argv[0] == "provplug"
        result = cli(*argv[1:])
        assert result.code == 0, result
    # north's average order comes from its orders' amounts and counts (orders 10, 12 and 13)
    tree = result.out
    assert tree.startswith("big_regions.avg_order = 4.0") and "source cells in orders" in tree, tree
    for order, amount in ((10, 5.0), (12, 3.0), (13, 4.0)):
        assert f"order_id = {order}, amount = {amount}" in tree, tree
    assert "6 ancestors (sources only)" in tree, tree
    # Browse, draw and export the store `provplug run` made.
    found = explore_every_way(cli, tmp_path / "sales.prov", "big_regions", "avg_order", "region = 'north'",
                              {"write:enriched", "write:by_region", "write:big_regions"})
    assert {t["name"] for t in found["tables"]} == {"orders", "customers", "enriched", "by_region", "big_regions"}
