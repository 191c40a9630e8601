"""The README's commands and examples, run as written."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from conftest import REPO

README = (REPO / "README.md").read_text()


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, flags=re.S)


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


def test_readme_capture_example_runs_as_written(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import provplug

    capture_block, query_block = re.findall(r"```python\n(import provplug.*?)```", README, flags=re.S)
    monkeypatch.chdir(tmp_path)
    person1_df = spark.createDataFrame(
        [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)],
        "Name string, City string, Age int",
    ).coalesce(1)
    exec(compile(capture_block, "README.md", "exec"), {"spark": spark, "person1_df": person1_df})
    stats = provplug.open_store(tmp_path / "people.prov").stats()
    assert (stats["tables"], stats["ops"], stats["triples"]) == (3, 2, 15)

    from provplug.index.build import build_index

    build_index("people.prov", spark=spark)
    namespace: dict[str, object] = {}
    exec(compile(query_block, "README.md", "exec"), namespace)
    answer = namespace["answer"].to_dict()  # type: ignore[attr-defined]
    assert {(r["table"], r["column"], r["value"]) for r in answer["lineage"]} == {
        ("Person2", "Age", 30), ("Person2", "Age", 40), ("Person1", "Age", 30), ("Person1", "Age", 40)
    }
