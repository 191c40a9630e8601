"""Index statistics for ``provplug stats`` (empty until the store is indexed)."""

from __future__ import annotations

from typing import Any

from ..store import ParquetStore


def index_stats(store: ParquetStore) -> dict[str, Any]:
    return {}
