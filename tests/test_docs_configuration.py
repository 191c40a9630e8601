"""docs/configuration.md lists every setting the code reads: each ``PROVPLUG_*``
environment variable and ``spark.provplug.*`` setting named anywhere in the
package or the adapters, and each key the Kedro hooks read under ``provplug:``;
and it lists none the code no longer reads."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

PAGE = REPO / "docs" / "configuration.md"
CODE = (REPO / "provplug", REPO / "adapters")
KEDRO_HOOKS = REPO / "adapters" / "kedro" / "provplug_kedro" / "hooks.py"
# A setting's whole dotted name; a family named with ``.*`` (``spark.provplug.fs.*``) is not one.
SETTING = re.compile(r"\bPROVPLUG_[A-Z0-9_]*[A-Z0-9]\b|\bspark\.provplug(?:\.[A-Za-z][A-Za-z0-9]*)++(?!\.\*)")
KEDRO_KEY = re.compile(r"""\bsettings\.get\(["'](\w+)["']\)""")


def settings_in(folders: tuple[Path, ...]) -> set[str]:
    """Every environment variable and Spark setting of provplug named in the Python files under ``folders``."""
    return {name for folder in folders for path in folder.rglob("*.py") for name in SETTING.findall(path.read_text())}


def documented(section: str) -> str:
    """The text of ``## section`` of the page (up to the next ``## ``)."""
    text = PAGE.read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def table_names(text: str) -> set[str]:
    """The names in the first cell of each table row of ``text``."""
    return set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))


def test_the_scan_finds_settings_where_the_code_reads_them() -> None:
    """Not vacuous: the scan finds names the code is known to read (the Kedro store, the group joins)."""
    found = settings_in(CODE)
    assert {"PROVPLUG_STORE", "PROVPLUG_WHERE_TIMEOUT", "spark.provplug.groupJoins"} <= found
    assert {"store", "reduce", "reduce_mode", "label", "tags"} <= set(KEDRO_KEY.findall(KEDRO_HOOKS.read_text()))


def test_every_environment_variable_and_spark_setting_is_documented() -> None:
    found = settings_in(CODE)
    tables = table_names(documented("Environment variables")) | table_names(documented("Spark settings"))
    listed = {name for name in tables if SETTING.fullmatch(name)}  # not PYSPARK_PYTHON, CI: other tools' variables
    assert sorted(found - listed) == [], "add them to docs/configuration.md"
    assert sorted(listed - found) == [], "docs/configuration.md lists settings the code no longer reads"


def test_every_kedro_key_is_documented() -> None:
    keys = set(KEDRO_KEY.findall(KEDRO_HOOKS.read_text()))
    listed = table_names(documented("Kedro parameters"))
    assert sorted(keys - listed) == [] and sorted(listed - keys) == []
