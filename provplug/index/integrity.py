"""An index generation's files: recorded when it is built, checked when it is opened.

A query reads only the buckets it needs, so a lost bucket folder or a lost
``value_sets/`` would otherwise read as "no triples there" and give a wrong
answer (e.g. "0 ancestors") with success. Every generation therefore records
in ``meta.json`` (``files``) each of its files with its size; opening it for
queries compares one recursive listing with that record (a few milliseconds),
and readers take their file lists from the record, never from a listing.

Generations written before the record existed (``meta.json`` format 1) are
checked against what the layout guarantees: ``sets.parquet`` and
``components.parquet`` exist and every ``bucket=K`` folder holds a data file.
That catches a lost folder, not a lost file among several Spark part files;
re-indexing gives them the full record.

Any damage is a :class:`~provplug.errors.DamagedIndexError` that names what
is wrong and says to re-run ``provplug index``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow.fs as pafs

from provplug.errors import DamagedIndexError, DamagedStoreError
from provplug.index import layout

FILES = "files"  # the meta.json key: {relative path: size in bytes}
SINGLE_FILES = ("sets.parquet", "components.parquet")
BUCKETED = ("triples", "setdeps", "rsetdeps", "value_sets")
_SHOWN = 3  # names quoted in a message before "and N more"


def is_data_file(path: str) -> bool:
    """A Parquet file readers use (names starting with ``_`` or ``.`` are not data)."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".parquet") and not name.startswith(("_", "."))


def listing(fs: pafs.FileSystem, gen_dir: str) -> dict[str, int]:
    """Every file under ``gen_dir`` but ``meta.json``: relative path -> size."""
    infos = fs.get_file_info(pafs.FileSelector(gen_dir, recursive=True, allow_not_found=True))
    prefix = len(gen_dir.rstrip("/")) + 1
    return {
        i.path[prefix:]: int(i.size or 0)
        for i in infos
        if i.type == pafs.FileType.File and i.path[prefix:] != layout.META
    }


def damaged(uri: str, generation: str | None, problem: str) -> DamagedIndexError:
    which = f" (generation {generation})" if generation else ""
    return DamagedIndexError(f"the lineage index of {uri} is damaged{which}: {problem}; re-run `provplug index {uri}`")


@contextlib.contextmanager
def index_damage(uri: str, generation: str) -> Iterator[None]:
    """Turn a damaged or vanished index file read inside the block (a
    :class:`DamagedStoreError` from :mod:`provplug.store.files`, or a missing
    file) into :class:`DamagedIndexError`: the cure is re-indexing."""
    try:
        yield
    except DamagedStoreError as exc:
        raise damaged(uri, generation, str(exc)) from exc
    except FileNotFoundError as exc:
        raise damaged(uri, generation, f"a file is missing: {exc.filename or exc.strerror or exc}") from exc


def check(fs: pafs.FileSystem, gen_dir: str, meta: Mapping[str, Any], uri: str) -> None:
    """Raise :class:`DamagedIndexError` unless the generation's files are as recorded."""
    found = listing(fs, gen_dir)
    recorded = meta.get(FILES)
    if isinstance(recorded, dict):
        problems = _against_record(found, recorded)
    else:
        problems = _against_layout(found, _bucket_counts(meta))
    if problems:
        raise damaged(uri, str(meta.get("generation", gen_dir.rsplit("/", 1)[-1])), "; ".join(problems))


def _against_record(found: dict[str, int], recorded: dict[str, Any]) -> list[str]:
    missing = _collapse(set(recorded) - set(found), found)
    changed = sorted(p for p in set(recorded) & set(found) if found[p] != int(recorded[p]))
    extra = sorted(p for p in set(found) - set(recorded) if is_data_file(p))
    return [
        text
        for names, what in ((missing, "missing"), (changed, "changed size"), (extra, "not written by the build"))
        if (text := _names(names, what))
    ]


def _against_layout(found: dict[str, int], buckets: dict[str, int]) -> list[str]:
    """What the layout guarantees, for generations without a file record."""
    holding = {p.rsplit("/", 1)[0] for p in found if is_data_file(p)}
    missing = [name for name in SINGLE_FILES if name not in found]
    missing += [
        f"{dataset}/bucket={k}/"
        for dataset in BUCKETED
        for k in range(buckets[dataset])
        if f"{dataset}/bucket={k}" not in holding
    ]
    return [text for text in [_names(_collapse(set(missing), found), "missing or empty")] if text]


def _bucket_counts(meta: Mapping[str, Any]) -> dict[str, int]:
    recorded = meta.get("buckets")
    defaults = {
        "triples": layout.TRIPLE_BUCKETS,
        "setdeps": layout.SETDEP_BUCKETS,
        "rsetdeps": layout.SETDEP_BUCKETS,
        "value_sets": layout.VALUE_BUCKETS,
    }
    if not isinstance(recorded, dict):
        return defaults
    return {k: int(recorded.get(k, v)) for k, v in defaults.items()}


def _collapse(missing: set[str], found: dict[str, int]) -> list[str]:
    """Missing paths, a folder standing for all of them when nothing under it is left."""
    present = {p.rsplit("/", i)[0] for p in found for i in range(1, p.count("/") + 1)}
    out = set()
    for path in missing:
        parts = path.rstrip("/").split("/")
        folders = ("/".join(parts[:i]) for i in range(1, len(parts)))
        out.add(next((f"{f}/" for f in folders if f not in present), path))
    return sorted(out)


def _names(paths: list[str], what: str) -> str:
    if not paths:
        return ""
    shown = ", ".join(paths[:_SHOWN])
    more = f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else ""
    return f"{what}: {shown}{more}"
