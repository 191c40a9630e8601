"""Every example and benchmark script still fits the library: it imports
(without running its ``main``), and every provplug name it uses exists —
including names imported inside functions and attributes of provplug
modules (``index_reader.cache_usage``), which an import alone does not touch.
A renamed or removed function then breaks the suite, not the next benchmark run."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import EXAMPLES

BENCHMARKS = EXAMPLES / "benchmarks"
# Scripts guarded by ``if __name__ == "__main__"``, so importing them runs nothing.
SCRIPTS = sorted(BENCHMARKS.glob("*.py")) + sorted(EXAMPLES.glob("*.py")) + [EXAMPLES / "sales_script" / "sales.py"]
OURS = ("provplug", "provplug_")


def _script_id(path: Path) -> str:
    return str(path.relative_to(EXAMPLES))


@pytest.fixture
def isolated_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """sys.path and sys.modules as they were after the test: the scripts put
    their own folder on the path and import their siblings."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if str(getattr(sys.modules[name], "__file__", "")).startswith(str(EXAMPLES)):
            del sys.modules[name]  # a script or a sibling it imported; libraries stay loaded


def _import_script(path: Path) -> ModuleType:
    name = f"_example_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the script runs
    sys.path.insert(0, str(path.parent))  # its siblings, as when it runs as a script
    spec.loader.exec_module(module)
    return module


def _imported(module: str) -> ModuleType | None:
    """``module``, or None when it does not exist (any more)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        return None


def _is_submodule(module: str, name: str) -> bool:
    parent = _imported(module)
    return hasattr(parent, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None


def _is_ours(module: str | None) -> bool:
    return module is not None and (module == "provplug" or module.startswith(OURS))


def _imported_names(tree: ast.AST) -> list[tuple[str, str, int]]:
    """``(module, name, line)`` of every ``from provplug... import name``, at any depth."""
    return [
        (node.module or "", alias.name, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and _is_ours(node.module)
        for alias in node.names
        if alias.name != "*"
    ]


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> provplug module, for the names a script binds to a module
    (``import provplug.x as y``, ``from provplug.query import index_reader``)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_ours(alias.name) and alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and _is_ours(node.module):
            for alias in node.names:
                if _is_submodule(node.module or "", alias.name):
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _attributes_used(tree: ast.AST, aliases: dict[str, str]) -> list[tuple[str, str, int]]:
    """``(module, attribute, line)`` of every ``alias.attribute`` read of a provplug module."""
    return [
        (aliases[node.value.id], node.attr, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
    ]


def _missing(path: Path) -> list[str]:
    """The provplug names ``path`` uses that do not exist."""
    tree = ast.parse(path.read_text(), str(path))
    used = _imported_names(tree) + _attributes_used(tree, _module_aliases(tree))
    missing = []
    for module, name, line in used:
        found = _imported(module)
        if found is None or (not hasattr(found, name) and not _is_submodule(module, name)):
            missing.append(f"{path.name}:{line}: {module}.{name}")
    return missing


def test_every_script_is_listed() -> None:
    assert len(list(BENCHMARKS.glob("*.py"))) >= 14 and {p.name for p in SCRIPTS} >= {
        "query_bench.py",
        "answer_size.py",
    }


@pytest.mark.parametrize("path", SCRIPTS, ids=_script_id)
def test_a_script_imports_without_running(path: Path, isolated_imports: None) -> None:
    module = _import_script(path)
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"


@pytest.mark.parametrize("path", SCRIPTS, ids=_script_id)
def test_every_provplug_name_a_script_uses_exists(path: Path) -> None:
    assert _missing(path) == []


def test_a_renamed_function_is_caught(tmp_path: Path) -> None:
    script = tmp_path / "stale.py"
    script.write_text(
        "from provplug.query import index_reader\n\n\n"
        "def main() -> None:\n"
        "    from provplug.index.mapped import _gather_ranges\n"
        "    index_reader.clear_all_caches()\n"
    )
    assert _missing(script) == [
        "stale.py:5: provplug.index.mapped._gather_ranges",
        "stale.py:6: provplug.query.index_reader.clear_all_caches",
    ]
