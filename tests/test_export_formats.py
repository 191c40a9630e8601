"""Export formats are a registry (``provplug_register_export_formats``): the
built-in ones are registered through the hook like any plugin's, and a format
defined here, in the test, shows in ``provplug export --help`` and exports."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provplug import hookimpl
from provplug.errors import PluginError
from provplug.plugin.manager import Plugins, reset_plugins


@dataclass(frozen=True)
class EdgeList:
    """A test format: one ``src -> dst (op)`` line per triple of the selection."""

    name: str = "edge-list"
    description: str = "every triple as a line src -> dst (op), for this test"
    media_type: str = "text/plain"
    extension: str = "txt"
    requires: tuple[str, ...] = ()
    lists_values: bool = True

    def render(self, store: Any, selection: Any, namespace: str | None) -> str:
        lines = [f"{src} -> {dst} ({op})" for src, dst, op in sorted(selection.edges)]
        return "\n".join([f"# {len(selection.values)} values of {store.uri}", *lines])


@dataclass(frozen=True)
class EdgeCount(EdgeList):
    """A binary test format: the number of triples as 8 little-endian bytes."""

    name: str = "edge-count"
    description: str = "the number of triples as 8 bytes"
    media_type: str = "application/octet-stream"
    extension: str = "bin"

    def render(self, store: Any, selection: Any, namespace: str | None) -> bytes:
        return len(selection.edges).to_bytes(8, "little")


class FormatsPlugin:
    def __init__(self, *formats: Any) -> None:
        self.formats = formats

    @hookimpl
    def provplug_register_export_formats(self, register: Any) -> None:
        for export_format in self.formats:
            register(export_format)


def _with(*formats: Any) -> Plugins:
    plugins = Plugins.load(autoload=False)
    plugins.pm.register(FormatsPlugin(*formats), name="test-formats")
    return Plugins(plugins.pm)  # built again: the load-time checks see the new plugin


@pytest.fixture
def imported(cli: Any, store_path: Path) -> Path:
    """The paper's Table 4 as an imported store: 25 values, 15 triples (no Spark needed)."""
    from conftest import DATA

    result = cli(
        "import",
        store_path,
        "--triples",
        DATA / "paper_table4_triples.csv",
        "--values",
        DATA / "paper_table4_values.csv",
        "--quiet",
    )
    assert result.code == 0, result
    return store_path


def test_the_builtin_formats_come_through_the_hook() -> None:
    plugins = Plugins.load(autoload=False, blocked=["provplug.export.formats"])
    assert plugins.export_formats() == {}
    assert list(Plugins.load(autoload=False).export_formats()) == ["prov-json", "prov-n", "openlineage"]


def test_a_plugin_format_shows_in_export_help(cli: Any) -> None:
    reset_plugins(_with(EdgeList()))
    out = " ".join(cli("export", "--help").out.split())  # argparse wraps the help to the terminal
    assert "edge-list: every triple as a line src -> dst (op), for this test" in out
    assert "prov-json: W3C PROV-JSON" in out
    reset_plugins(Plugins.load(autoload=False))
    assert "edge-list" not in cli("export", "--help").out


def test_a_plugin_format_exports_the_store(cli: Any, imported: Path, tmp_path: Path) -> None:
    from provplug.store.open import open_store

    reset_plugins(_with(EdgeList()))
    triples = open_store(imported).triples().to_table().to_pylist()
    result = cli("export", imported, "--format", "edge-list")
    assert result.code == 0, result
    header, *lines = result.out.splitlines()
    assert header.startswith("# 25 values of ")
    edges = sorted((t["src"], t["dst"], t["op"]) for t in triples)
    assert lines == [f"{src} -> {dst} ({op})" for src, dst, op in edges] and len(lines) == 15
    out = tmp_path / "edges.txt"
    result = cli("export", imported, "--format", "edge-list", "-o", out)
    assert result.code == 0 and out.read_text().splitlines()[1:] == lines
    assert f"wrote {out} ({out.stat().st_size:,} bytes)" in result.err


def test_a_binary_format_is_written_as_bytes(cli: Any, imported: Path, tmp_path: Path) -> None:
    reset_plugins(_with(EdgeCount()))
    out = tmp_path / "count.bin"
    assert cli("export", imported, "--format", "edge-count", "-o", out).code == 0
    assert out.read_bytes() == (15).to_bytes(8, "little")


def test_an_unregistered_format_is_a_usage_error(cli: Any, imported: Path) -> None:
    reset_plugins(Plugins.load(autoload=False))
    result = cli("export", imported, "--format", "edge-list")
    assert result.code == 2 and result.err.splitlines()[-1] == (
        "provplug export: error: argument --format: invalid choice: 'edge-list' "
        "(choose from 'prov-json', 'prov-n', 'openlineage')"
    )


def test_two_formats_with_one_name_fail_at_load() -> None:
    with pytest.raises(PluginError, match="export format name 'edge-list' is registered twice"):
        _with(EdgeList(), EdgeList())
    with pytest.raises(PluginError, match="export format name 'prov-json' is registered by plugins"):
        _with(EdgeList(name="prov-json"))


def test_building_the_export_parser_reads_no_registry() -> None:
    # The registry loads every plugin (pyarrow with the built-in store): only
    # --help and a parsed --format may read it, never the parser's construction.
    code = (
        "import argparse, sys\n"
        "import provplug.plugin.manager as m\n"
        "from provplug.cli import export\n"
        "heavy = lambda: {x for x in sys.modules if x.split('.')[0] in ('pyarrow', 'prov', 'openlineage')}\n"
        "before = heavy()\n"
        "export.add_parser(argparse.ArgumentParser().add_subparsers())\n"
        "print(m._default is None, 'provplug.export.formats' in sys.modules, sorted(heavy() - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True False []"
