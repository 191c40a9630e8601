"""Fixtures of the Beam adapter's tests (``store_path``, ``cli`` and the
session-wide ``spark`` come from tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="package")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One step per transform kind captured in one pipeline run, read back
    (shared by the rule tests and the table tests)."""
    pytest.importorskip("apache_beam")
    from .helpers import capture_kinds

    return capture_kinds(tmp_path_factory.mktemp("beam") / "kinds.prov")
