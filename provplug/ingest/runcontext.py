"""What a run records about how it was started: its context.

A run's manifest carries (see :mod:`provplug.store.parquet`):

- ``engine``: the capture adapter (``spark``, ``beam``) or ``import``;
- ``entry_point``: how the run was started, one of
  ``{"type": "script", "path", "args"}`` (``provplug run``),
  ``{"type": "kedro", "project", "pipeline", "env", "params"}`` (the Kedro
  plugin) and ``{"type": "python", "module", "path"}`` (``provplug.capture``
  called from a Python module);
- ``git``: ``{"commit", "dirty"}`` of the repository holding the entry
  point's code, when it is in one (``git`` is asked, with a short timeout;
  no git, no repository or a slow one: no ``git`` entry, never an error);
- ``spark_app_id``: the Spark application that ran it, for a Spark capture;
- ``label`` and ``tags``: what the user named the run (``--label``/``--tag``,
  ``capture(label=..., tags=...)``, Kedro ``provplug: {label: ..., tags: [...]}``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from types import FrameType
from typing import Any

from provplug.errors import CaptureError
from provplug.store.runs import valid_label

GIT_TIMEOUT_S = 2.0
# Modules between a pipeline and the capture it opens (never its entry point).
MACHINERY = frozenset({"contextlib", "provplug.ingest.capture", "provplug.ingest.scripts"})


def git_state(path: str) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the git work tree holding ``path`` (a
    file or folder), or None when there is none or git cannot tell."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    commit = _git(folder, "rev-parse", "HEAD")
    if commit is None:
        return None
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _git(folder: str, *args: str) -> str | None:
    """The output of ``git -C folder ARGS``, or None when git is missing,
    fails (not a repository, no commit yet) or takes too long."""
    try:
        done = subprocess.run(
            ["git", "-C", folder, *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):  # no git executable, or a hung one: no commit recorded
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def spark_app_id(engine: object) -> str | None:
    """The application id of a SparkSession (None for another engine)."""
    context = getattr(engine, "sparkContext", None)
    app_id = getattr(context, "applicationId", None)
    return str(app_id) if app_id else None


def checked_label(label: str | None, tags: Iterable[str] | None) -> tuple[str | None, list[str]]:
    """The label and tags a user gave, checked: a :class:`CaptureError` for a
    label that could be read as a run number, id or ``latest``."""
    if label is not None and (not isinstance(label, str) or not valid_label(label)):
        raise CaptureError(
            f"a run label starts with a letter and holds letters, digits and _.:@+- "
            f"(and is not latest or latest~N), not {label!r}"
        )
    tag_list = [tags] if isinstance(tags, str) else list(tags or ())
    for tag in tag_list:
        if not isinstance(tag, str) or not tag.strip():
            raise CaptureError(f"a run tag is non-empty text, not {tag!r}")
    return label, tag_list


def script_entry(path: str, args: Sequence[str]) -> dict[str, Any]:
    return {"type": "script", "path": os.path.abspath(path), "args": list(args)}


def kedro_entry(
    project: str | None, pipeline: str | None, env: str | None, params: Mapping[str, Any] | None
) -> dict[str, Any]:
    # Parameters may hold any YAML value: kept as JSON text where JSON has no type for them.
    plain = json.loads(json.dumps(dict(params or {}), default=str, sort_keys=True))
    return {"type": "kedro", "project": project, "pipeline": pipeline or "__default__", "env": env, "params": plain}


def python_entry(frame: FrameType | None) -> dict[str, Any]:
    """The Python module that called ``provplug.capture``: the first frame
    from ``frame`` outwards outside the capture machinery (:data:`MACHINERY`)."""
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module not in MACHINERY:
            return {"type": "python", "module": module, "path": frame.f_code.co_filename}
        frame = frame.f_back
    return {"type": "python", "module": None, "path": None}


def entry_folder(entry: Mapping[str, Any]) -> str:
    """Where the entry point's code lies (its git repository is asked)."""
    place = entry.get("project") or entry.get("path")
    return str(place) if place and os.path.exists(str(place)) else os.getcwd()


def run_context(
    engine_name: str, engine: object, entry: Mapping[str, Any], label: str | None, tags: Sequence[str]
) -> dict[str, Any]:
    """The manifest entries of a run's context (see the module docstring)."""
    context: dict[str, Any] = {"engine": engine_name, "entry_point": dict(entry)}
    git = git_state(entry_folder(entry))
    if git is not None:
        context["git"] = git
    app_id = spark_app_id(engine)
    if app_id is not None:
        context["spark_app_id"] = app_id
    if label is not None:
        context["label"] = label
    context["tags"] = list(tags)
    return context
