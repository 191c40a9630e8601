"""The README's commands and examples, run as written."""

from __future__ import annotations

import json
import os
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
