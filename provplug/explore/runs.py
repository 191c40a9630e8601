"""Choosing a run by its id or a unique prefix of it, and naming runs in messages.

Pure functions over the manifests :meth:`~provplug.protocols.Store.runs`
returns, so the catalogue, the browse commands and ``delete-run`` select
runs the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import LineageQueryError

Manifest = Mapping[str, Any]


def describe_run(manifest: Manifest) -> str:
    """``<id> (capture, 2026-05-01T10:00:00+00:00)``: a run as messages name it."""
    return f"{manifest['run_id']} ({manifest.get('kind', '?')}, {manifest.get('committed', '?')})"


def describe_runs(manifests: Iterable[Manifest]) -> str:
    return ", ".join(describe_run(m) for m in manifests) or "none"


def select_run(manifests: Sequence[Manifest], wanted: str) -> Manifest:
    """The manifest of run ``wanted``: a whole run id or a prefix only one run has."""
    exact = [m for m in manifests if m["run_id"] == wanted]
    if exact:
        return exact[0]
    matches = [m for m in manifests if wanted and str(m["run_id"]).startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise LineageQueryError(f"run {wanted!r} is ambiguous: it begins {describe_runs(matches)}")
    raise LineageQueryError(f"unknown run {wanted!r} (runs: {describe_runs(manifests)})")
