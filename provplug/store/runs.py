"""Choosing a run, and naming runs in messages and answers.

Every command that takes ``--run`` resolves it here (:func:`select_run`), so
a run is named the same way everywhere:

- its **number** (``3``; see ``provplug runs``),
- ``latest``, or ``latest~N`` (the run N before the latest),
- its **label** (the latest run carrying that label),
- its **id**, or a prefix of it only one run has.

Pure functions over the manifests :meth:`~provplug.plugin.protocols.Store.runs`
returns. Runs are ordered by number (the store gives each committed run one,
see :meth:`provplug.store.parquet.ParquetStore.reserve_run_number`); a manifest
without one (a store written before runs were numbered) is numbered here by
commit order, as the store numbers them (:func:`numbered`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provplug.errors import LineageQueryError

Manifest = Mapping[str, Any]

LATEST = "latest"
_LATEST = re.compile(r"latest(?:~(\d+))?")
# A label starts with a letter, so that it never reads as a number or a run id
# (ids begin with the date), and it is not "latest" (nor "latest~N").
LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_.:@+-]*")


def valid_label(label: str) -> bool:
    """Whether ``label`` can name a run (see :data:`LABEL`)."""
    return bool(LABEL.fullmatch(label)) and not _LATEST.fullmatch(label)


def numbered(manifests: Iterable[Manifest]) -> list[dict[str, Any]]:
    """The manifests ordered by run number, each with its ``number``.

    Runs committed before numbering existed have none: they are numbered 1,
    2, … in commit order (they are older than every numbered run, whose
    numbers start above them)."""
    runs = [dict(m) for m in manifests]
    legacy = sorted(
        (m for m in runs if not isinstance(m.get("number"), int)), key=lambda m: (m["committed"], m["run_id"])
    )
    for i, manifest in enumerate(legacy, start=1):
        manifest["number"] = i
    return sorted(runs, key=lambda m: (int(m["number"]), m["run_id"]))


def describe_run(manifest: Manifest) -> str:
    """``run 3 (label nightly, 20261126T190853-e982…)``: a run as messages name it."""
    label = f"label {manifest['label']}, " if manifest.get("label") else ""
    return f"run {manifest.get('number', '?')} ({label}{manifest['run_id']})"


def describe_runs(manifests: Iterable[Manifest]) -> str:
    return ", ".join(describe_run(m) for m in manifests) or "none"


def select_run(manifests: Sequence[Manifest], wanted: str) -> Manifest:
    """The manifest of run ``wanted``: a number, ``latest``, ``latest~N``, a
    label (its latest run), a whole run id or a prefix only one run has.
    Unknown or ambiguous: a one-line :class:`LineageQueryError`."""
    runs = numbered(manifests)
    wanted = str(wanted).strip()
    latest = _LATEST.fullmatch(wanted)
    if latest:
        return _back_from_latest(runs, int(latest.group(1) or 0), wanted)
    if wanted.isdigit():
        by_number = [m for m in runs if m["number"] == int(wanted)]
        if by_number:
            return by_number[0]
    labelled = [m for m in runs if m.get("label") == wanted]
    if labelled:
        return labelled[-1]
    return _by_id(runs, wanted)


def _back_from_latest(runs: list[dict[str, Any]], back: int, wanted: str) -> Manifest:
    if back >= len(runs):
        have = f"only {len(runs)} run{'s' if len(runs) != 1 else ''}" if runs else "no runs"
        raise LineageQueryError(f"no run {wanted!r}: the store has {have}")
    return runs[-1 - back]


def _by_id(runs: list[dict[str, Any]], wanted: str) -> Manifest:
    exact = [m for m in runs if m["run_id"] == wanted]
    if exact:
        return exact[0]
    matches = [m for m in runs if wanted and str(m["run_id"]).startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise LineageQueryError(f"run {wanted!r} is ambiguous: it begins {describe_runs(matches)}")
    raise LineageQueryError(
        f"unknown run {wanted!r} (runs: {_run_range(runs)}; give a number, latest, latest~N, a label or an id prefix)"
    )


def _run_range(runs: list[dict[str, Any]]) -> str:
    """The runs in a few words: ``1-4, labels nightly, test``."""
    if not runs:
        return "none"
    numbers = [m["number"] for m in runs]
    span = str(numbers[0]) if len(numbers) == 1 else f"{len(numbers)} numbered {numbers[0]}..{numbers[-1]}"
    labels = sorted({str(m["label"]) for m in runs if m.get("label")})
    return span + (f", labels {', '.join(labels)}" if labels else "")


# -- the run an answer used ----------------------------------------------------------


def run_summary(manifest: Manifest) -> dict[str, Any]:
    """``{id, number, label}``: a run as answers name it."""
    return {"id": manifest["run_id"], "number": manifest.get("number"), "label": manifest.get("label")}


def run_used(manifest: Manifest, writers: Sequence[Manifest], table: str | None, given: bool) -> dict[str, Any]:
    """The ``run`` object of an answer: the run it used, the table that run
    was chosen for, how many runs wrote that table (``of``) and how many
    others there are, and whether ``--run`` chose it (else it is the latest
    writer, the default)."""
    return {
        **run_summary(manifest),
        "table": table,
        "of": len(writers),
        "others": max(len(writers) - 1, 0),
        "chosen": "given" if given else "latest",
    }


def run_note(run: Mapping[str, Any] | None) -> str | None:
    """The line a text answer starts with when there was a run to choose:
    :func:`run_line` when several runs wrote the table or ``--run`` chose
    one; None otherwise (one run: nothing to tell apart; JSON answers carry
    the ``run`` object always)."""
    if not run or (not run.get("others") and run.get("chosen") != "given"):
        return None
    return run_line(run)


def run_line(run: Mapping[str, Any]) -> str:
    """The one line every answer prints about its run, e.g.
    ``run 2 (label nightly): the latest of 2 runs that wrote AvgAge; --run picks another``."""
    label = f" (label {run['label']})" if run.get("label") else ""
    table = f" that wrote {run['table']}" if run.get("table") else ""
    runs = f"{run['of']} run{'s' if run['of'] != 1 else ''}{table}"
    if run.get("chosen") == "given":
        how = f"chosen with --run; {runs}"
    elif run.get("others"):
        how = f"the latest of {runs}; --run picks another"
    else:
        how = f"the only run{table}"
    return f"run {run['number']}{label}: {how}"
