"""Retention: which committed runs ``provplug gc --keep-last N`` and
``--older-than DAYS`` delete, and deleting them one by one as ``provplug
delete-run`` does (each atomically, the index followed the same way).

A run is deleted when every rule given lets it go: ``keep_last`` keeps the
``N`` latest runs (by run number), ``older_than`` keeps runs committed less
than that many days ago. With no rule nothing is deleted."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from provplug.errors import RetentionError
from provplug.explore.manage import DeletedRun, check_readers, delete_run
from provplug.model import utc_now
from provplug.plugin.protocols import Store
from provplug.store.runs import Manifest, numbered


def retired_runs(
    manifests: Sequence[Manifest],
    keep_last: int | None = None,
    older_than_days: float | None = None,
    now: datetime | None = None,
) -> list[Manifest]:
    """The runs the rules let go, oldest first (``now``: the time the age is measured at)."""
    if keep_last is not None and keep_last < 0:
        raise RetentionError(f"--keep-last must be 0 or more, not {keep_last}")
    if older_than_days is not None and older_than_days < 0:
        raise RetentionError(f"--older-than must be 0 or more days, not {older_than_days:g}")
    if keep_last is None and older_than_days is None:
        return []
    runs = numbered(list(manifests))
    kept_latest = {m["run_id"] for m in runs[len(runs) - keep_last :]} if keep_last else set()
    cutoff = None if older_than_days is None else (now or utc_now()) - timedelta(days=older_than_days)
    return [m for m in runs if m["run_id"] not in kept_latest and (cutoff is None or _committed(m) < cutoff)]


def _committed(manifest: Manifest) -> datetime:
    return datetime.fromisoformat(str(manifest["committed"]))


def retire(
    store: Store,
    keep_last: int | None = None,
    older_than_days: float | None = None,
    dry_run: bool = False,
    force: bool = False,
) -> list[dict[str, Any]]:
    """Delete (unless ``dry_run``) the runs the rules let go; what each was.
    A run whose written datasets a kept run read stops it all with a
    :class:`~provplug.errors.VersionInUseError` naming that run, unless ``force``."""
    manifests = store.runs()
    chosen = retired_runs(manifests, keep_last, older_than_days)
    check_readers(store, numbered(manifests), chosen, force)
    if dry_run:
        return [
            {"run_id": m["run_id"], "number": m["number"], "committed": m["committed"], "deleted": False}
            for m in chosen
        ]
    # Reads among the retired runs go with them; reads by kept runs were checked above.
    return [_deleted(store, m) for m in chosen]


def _deleted(store: Store, manifest: Manifest) -> dict[str, Any]:
    done: DeletedRun = delete_run(store, str(manifest["run_id"]), force=True)
    return {
        "run_id": done["run_id"],
        "number": manifest["number"],
        "committed": done["committed"],
        "deleted": True,
        "bytes": done["bytes"],
        "index_stale": done["index_stale"],
        "orphaned": done["orphaned"],
    }
