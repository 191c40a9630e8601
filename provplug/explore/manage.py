"""Removing what a store no longer needs: one run (``provplug delete-run``),
and garbage (``provplug gc``).

Deleting a run is atomic (see :meth:`provplug.store.parquet.ParquetStore.delete_run`):
one rename hides it, then its files go. Every run stands alone — captured
value ids carry their own run's table ids, and every import maps each of its
values in its own ``values.parquet`` — so deleting one never leaves another
unreadable; lineage that crossed runs through a shared imported value simply
no longer crosses the deleted one. Ids are never reused (the deleted run's
reservations stay), so nothing that remembers an old id (a stale index, a
cached catalogue) can mistake a new table for it. The index records the runs
it covers: the deletion takes the run out of the index
(``incremental.update_after_delete``: its layer dropped or its triples trimmed
from the base) and the index stays current; only when that cannot be done
exactly, or a build holds the lock, do queries refuse it until ``provplug index``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from provplug.errors import ProvplugError, StoreError, VersionInUseError
from provplug.index import generation, incremental
from provplug.plugin.protocols import Store
from provplug.store import versions
from provplug.store.parquet import Garbage
from provplug.store.runs import Manifest, describe_run, numbered, run_summary, select_run


class DeletedRun(TypedDict):
    run_id: str
    kind: str
    committed: str
    counts: dict[str, int]
    bytes: int
    index_stale: bool
    # Runs whose lineage read a dataset version the deleted run wrote (--force):
    # their answers now mark that version missing.
    orphaned: list[dict[str, Any]]


class GcReport(TypedDict):
    dry_run: bool
    removed: list[dict[str, Any]]
    bytes: int
    skipped: list[str]


def delete_run(
    store: Store, run: str, before_removal: Callable[[], None] | None = None, force: bool = False
) -> DeletedRun:
    """Delete run ``run`` (an id or a unique prefix) from ``store``. A run
    whose written datasets another run read (:mod:`provplug.store.versions`)
    is kept with a :class:`VersionInUseError` naming the reading run, unless
    ``force``: the readers then record the version as missing first."""
    manifests = numbered(store.runs())
    chosen = select_run(manifests, run)
    readers = check_readers(store, manifests, [chosen], force)
    indexed = _indexed_runs(store)
    orphaned = _orphan(store, manifests, chosen, readers)
    done = store.delete_run(chosen["run_id"], before_removal)
    # An indexed reader's link to the deleted cells is in the index: it is not
    # followed incrementally, so queries refuse the index until a rebuild drops the link.
    linked = any(r in indexed for r in readers)
    followed = chosen["run_id"] in indexed and not linked and incremental.update_after_delete(store)
    return DeletedRun(
        run_id=done["run_id"],
        kind=str(done.get("kind", "?")),
        committed=done["committed"],
        counts={k: int(v) for k, v in done["counts"].items()},
        bytes=int(done["bytes"]),
        index_stale=(chosen["run_id"] in indexed and not followed) or linked,
        orphaned=orphaned,
    )


def check_readers(
    store: Store, manifests: Sequence[Manifest], deleted: Sequence[Manifest], force: bool
) -> dict[str, list[versions.LinkedRead]]:
    """The runs (not among ``deleted``) that read a dataset version one of
    ``deleted`` wrote, with those reads; a :class:`VersionInUseError` naming
    the first such reading run unless ``force``."""
    gone = {m["run_id"] for m in deleted}
    readers: dict[str, list[versions.LinkedRead]] = {}
    for reader, read in versions.readers_of(store, gone):
        readers.setdefault(reader, []).append(read)
    if readers and not force:
        reader, reads = next(iter(readers.items()))
        by_id = {m["run_id"]: m for m in manifests}
        raise VersionInUseError(
            f"{describe_run(by_id[reads[0].run_id])} wrote {reads[0].dataset}, which {describe_run(by_id[reader])} "
            "read: its lineage goes through that version; --force deletes it anyway (answers then mark it missing)"
        )
    return readers


def _orphan(
    store: Store, manifests: Sequence[Manifest], deleted: Manifest, readers: dict[str, list[versions.LinkedRead]]
) -> list[dict[str, Any]]:
    """Before ``deleted`` goes: each reader records the versions it read from
    it as missing (and stops linking to them); what each reader read."""
    about = {k: v for k, v in run_summary(deleted).items() if k != "id"}
    by_id = {m["run_id"]: m for m in manifests}
    orphaned = []
    for reader, reads in readers.items():
        versions.mark_missing(store, reader, deleted["run_id"], about)
        orphaned += [{"run": run_summary(by_id[reader]), "dataset": r.dataset} for r in reads]
    return orphaned


def _indexed_runs(store: Store) -> list[str]:
    """The runs the live index covers (none when there is no readable index)."""
    try:
        runs = (generation.read_meta(store) or {}).get("runs", [])
    except ProvplugError:
        return []  # a damaged index is refused by queries anyway
    return [str(r) for r in runs] if isinstance(runs, list) else []


def collect_garbage(store: Store, dry_run: bool = False, now: bool = False) -> GcReport:
    """Find (and unless ``dry_run``, remove) dead writers' staging, leftovers
    of interrupted deletions, and index generations no longer live. The
    previous generation is kept ``PREVIOUS_GRACE_S`` after a re-index; with
    ``now`` it goes at once unless a reader holds it. A dry run writes nothing."""
    store.check()
    items: list[Garbage] = list(store.garbage())
    skipped: list[str] = []
    generations = generation.garbage_generations(store, dry_run, now)
    if generations is None:
        skipped.append("index generations: an index build is running")
    else:
        items += [Garbage("index-generation", name, path, size) for name, path, size in generations]
        skipped += _kept_previous(store, {name for name, _, _ in generations}, now)
    removed = items if dry_run else _remove(store, items, now)
    return GcReport(
        dry_run=dry_run,
        removed=[{"kind": g.kind, "name": g.name, "path": g.path, "bytes": g.bytes} for g in removed],
        bytes=sum(g.bytes for g in removed),
        skipped=skipped,
    )


def _kept_previous(store: Store, listed: set[str], now: bool) -> list[str]:
    """Why the previous generation stays, if it does."""
    previous = generation.kept_previous(store)
    if previous is None or previous in listed:
        return []
    if now:
        why = "a query holds it" if store.local else "readers off local disk cannot be seen"
        return [f"index generation {previous}: {why}"]
    minutes = generation.PREVIOUS_GRACE_S / 60
    return [f"index generation {previous}: replaced less than {minutes:g} min ago, a query may still read it"]


def _remove(store: Store, items: list[Garbage], now: bool) -> list[Garbage]:
    removed = [g for g in items if g.kind != "index-generation" and store.remove_garbage(g)]
    names = {g.name for g in items if g.kind == "index-generation"}
    if names:
        try:
            gone = set(generation.remove_generations(store, names, now))
        except StoreError:
            gone = set()  # an index build started since the listing: its generations stay
        removed += [g for g in items if g.kind == "index-generation" and g.name in gone]
    return removed
