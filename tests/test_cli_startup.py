"""The command line starts without loading the heavy libraries: ``provplug
--help`` and every command's argument parsing must not pay for pandas,
pyarrow, NumPy, DuckDB or Spark (issue 13)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "pandas",
    "pyarrow",
    "numpy",
    "duckdb",
    "pyspark",
    "graphviz",
    "prov",
    "openlineage",
    "kedro",
    "starlette",
    "uvicorn",
    "anyio",
    "playwright",
)

PROBE = """
import json, sys
import provplug.cli.main
parser = provplug.cli.main.build_parser()  # every command module's add_parser
import provplug  # the public names that load on first use must not load here
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})))
"""


def _heavy_modules_after(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_importing_the_cli_and_building_every_parser_loads_no_heavy_library() -> None:
    assert _heavy_modules_after(PROBE.format(heavy=set(HEAVY))) == []


def test_the_probe_sees_a_heavy_import() -> None:
    # The same probe, after a lazily loaded name is used: it must report pyarrow,
    # or the test above could not fail.
    code = PROBE.format(heavy=set(HEAVY)).replace("import provplug  #", "provplug.open  #")
    assert "pyarrow" in _heavy_modules_after(code)


def test_help_runs_and_lists_every_command() -> None:
    from provplug.cli.main import build_parser
    from provplug.cli.reference import commands

    result = subprocess.run([sys.executable, "-m", "provplug", "--help"], capture_output=True, text=True, check=True)
    for command, _, _ in commands(build_parser()):
        assert command in result.stdout


def test_version_loads_no_heavy_library() -> None:
    code = PROBE.format(heavy=set(HEAVY)).replace(
        "parser = provplug.cli.main.build_parser()",
        "try:\n    provplug.cli.main.build_parser().parse_args(['--version'])\nexcept SystemExit:\n    pass",
    )
    assert _heavy_modules_after(code) == []
