"""Every named error lives in provplug.errors (one place to read them all);
the modules that used to define some still export them."""

from __future__ import annotations

import importlib
import pkgutil
import warnings

import pytest

import provplug
from provplug import errors

MOVED = {
    "provplug.export.selection": ["ExportError"],
    "provplug.query.picture": ["PictureError"],
    "provplug.query.where": ["WherePredicateError", "WhereLimitError"],
    "provplug.index.splits": ["SplitsError"],
    "provplug.index.budget": ["MemoryBudgetError"],
    "provplug.cli.main": ["UsageError"],
    "provplug.cli.ui": ["MissingExtraError"],
    "provplug.ui.app": ["BadParameter"],
}


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    return found.union(*(_subclasses(c) for c in found)) if found else found


def test_every_provplug_error_is_defined_in_errors() -> None:
    for info in pkgutil.walk_packages(provplug.__path__, "provplug."):
        if info.name.endswith(".__main__"):
            continue  # it runs the CLI
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # the old paths' shims say so on import
                importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed: its module defines nothing we can see
            continue
    elsewhere = {
        f"{c.__module__}.{c.__qualname__}"
        for c in _subclasses(errors.ProvplugError)
        if c.__module__ != "provplug.errors" and c.__module__.startswith("provplug.")
    }
    assert elsewhere == set()


@pytest.mark.parametrize("module", sorted(MOVED))
def test_the_old_homes_still_export_them(module: str) -> None:
    if module == "provplug.ui.app":
        pytest.importorskip("starlette")  # the ui extra
    old = importlib.import_module(module)
    for name in MOVED[module]:
        assert getattr(old, name) is getattr(errors, name)
        assert issubclass(getattr(errors, name), errors.ProvplugError)
