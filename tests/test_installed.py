"""CI's third stage runs the suite against the installed wheel; these tests
check that it really does (and that the wheel holds every subpackage)."""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path

import pytest
from conftest import REPO

INSTALLED = os.environ.get("PROVPLUG_TEST_INSTALLED") == "1"


def _subpackages(root: Path) -> set[str]:
    return {f"provplug.{m.name}" for m in pkgutil.walk_packages([str(root)]) if m.ispkg}


@pytest.mark.skipif(not INSTALLED, reason="only when CI runs the suite against the installed wheel")
@pytest.mark.parametrize("name", ["provplug", "provplug_spark", "provplug_beam", "provplug_kedro"])
def test_package_is_imported_from_the_install_not_the_source_tree(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__file__ is not None
    assert REPO not in Path(module.__file__).resolve().parents, module.__file__


def test_every_subpackage_of_the_source_tree_is_importable() -> None:
    """A subpackage the wheel leaves out fails here under CI's installed run."""
    names = sorted(_subpackages(REPO / "provplug"))
    assert {"provplug.index", "provplug.query"} <= set(names)
    for name in names:
        module = importlib.import_module(name)
        assert module.__file__ is not None
        from_tree = REPO in Path(module.__file__).resolve().parents
        assert from_tree != INSTALLED, f"{name} imported from {module.__file__}"
