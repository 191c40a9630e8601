"""Dataset versions across runs: one small JSON file per run, ``versions.json``.

A run that writes a dataset (a table with an OpenLineage identity: namespace
and name, see :class:`provplug.model.TableInfo`) records, as the run ends,
the *fingerprint* of the files that write left: every file under the
dataset's path with its size and modification time. A later run that reads
the dataset looks up the latest committed write of that identity; when the
files are still the ones that write produced (same fingerprint), the read is
linked to the writing run's table and recorded here too. Files changed
outside provplug have another fingerprint: the read is a new source version.
Like ``coarse.json`` the file is listed among the run's datasets in its
manifest and committed (and deleted) with the run::

    {"format": "provplug-versions", "version": 1, "run_id": "...",
     "writes": [{"table": 4, "namespace": "file", "dataset": "/data/out",
                 "files": [["part-0.parquet", 1234, 1700000000000000000], ...]}],
     "reads": [{"table": 7, "namespace": "file", "dataset": "/data/out",
                "run_id": "<writing run>", "src_table": 4, "op": 9,
                "missing": null}]}

``missing`` is null while the writing run exists; when it was deleted with
``--force`` it holds that run's number and label (the version read is gone).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import pyarrow.fs as pafs

from provplug.errors import DamagedStoreError
from provplug.plugin.connection import filesystem_of
from provplug.plugin.protocols import Store
from provplug.plugin.writers import Destination
from provplug.store import files as storefiles

VERSIONS = "versions.json"  # the dataset name in a run's manifest, and the file's name
FORMAT = "provplug-versions"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class FileStamp:
    """One file of a written dataset: its path below the dataset's, size and mtime (ns)."""

    path: str
    size: int
    mtime_ns: int


@dataclasses.dataclass(frozen=True)
class WrittenVersion:
    """A dataset as a run's write left it."""

    table: int
    namespace: str
    dataset: str
    files: tuple[FileStamp, ...]

    @property
    def data_files(self) -> frozenset[str]:
        """The files a Spark read of the dataset reads (not ``_*`` or ``.*`` ones)."""
        return frozenset(f.path for f in self.files if not _hidden(f.path))


@dataclasses.dataclass(frozen=True)
class LinkedRead:
    """A source table of a run that is the version another run wrote."""

    table: int  # the reading run's source table
    namespace: str
    dataset: str
    run_id: str  # the writing run
    src_table: int  # its table
    op: int  # the reading run's op linking the two
    missing: dict[str, Any] | None = None  # the writing run's number and label, once it was deleted


@dataclasses.dataclass(frozen=True)
class RunVersions:
    """What one run wrote and read of datasets other runs see."""

    run_id: str
    writes: tuple[WrittenVersion, ...] = ()
    reads: tuple[LinkedRead, ...] = ()


def _hidden(path: str) -> bool:
    return any(part.startswith(("_", ".")) for part in path.split("/"))


# -- fingerprints -------------------------------------------------------------------
def dataset_location(namespace: str, dataset: str) -> tuple[Any, str] | None:
    """(pyarrow filesystem, path) of a dataset identity that is a path on a
    filesystem pyarrow opens; None for other datasets (catalog or JDBC tables)."""
    if namespace == "file":
        return pafs.LocalFileSystem(), dataset
    if "://" not in namespace:
        return None
    try:
        fs, path = filesystem_of(f"{namespace.rstrip('/')}/{dataset.lstrip('/')}")
    except (ValueError, OSError):  # pyarrow.ArrowInvalid is a ValueError
        return None
    return fs, str(path)


def fingerprint(namespace: str, dataset: str) -> tuple[FileStamp, ...] | None:
    """The files of a dataset now, sorted by path; None when it is no path or is missing."""
    located = dataset_location(namespace, dataset)
    if located is None:
        return None
    fs, path = located
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.File:
            return (FileStamp("", int(info.size), int(info.mtime_ns or 0)),)
        if info.type != pafs.FileType.Directory:
            return None
        found = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    except OSError:
        return None
    base = path.rstrip("/") + "/"
    stamps = [
        FileStamp(i.path.removeprefix(base), int(i.size), int(i.mtime_ns or 0))
        for i in found
        if i.type == pafs.FileType.File
    ]
    return tuple(sorted(stamps, key=lambda s: s.path))


def relative_files(namespace: str, dataset: str, uris: Iterable[str]) -> frozenset[str] | None:
    """``uris`` (what a read reads) as paths below the dataset's; None when one is not below it."""
    located = dataset_location(namespace, dataset)
    if located is None:
        return None
    base = located[1].rstrip("/") + "/"
    found = set()
    for uri in uris:
        path = uri.removeprefix("file:").split("://", 1)[-1]
        path = "/" + path.lstrip("/") if namespace == "file" else path
        if path.rstrip("/") == base.rstrip("/"):
            found.add("")  # the dataset is this one file
            continue
        if not path.lstrip("/").startswith(base.lstrip("/")):
            return None
        found.add(path.lstrip("/")[len(base.lstrip("/")) :])
    return frozenset(found)


# -- the file -----------------------------------------------------------------------
def versions_json(versions: RunVersions) -> str:
    return json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "run_id": versions.run_id,
            "writes": [
                {
                    "table": w.table,
                    "namespace": w.namespace,
                    "dataset": w.dataset,
                    "files": [[f.path, f.size, f.mtime_ns] for f in w.files],
                }
                for w in versions.writes
            ],
            "reads": [dataclasses.asdict(r) for r in versions.reads],
        }
    )


def parse_versions(text: str, what: str) -> list[RunVersions]:
    """The versions of a ``versions.json`` text (one record); anything else is damage to ``what``."""
    try:
        record = json.loads(text)
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise ValueError("not a provplug versions file")
        if record.get("version") != VERSION:
            raise ValueError(f"unsupported version {record.get('version')!r}")
        writes = tuple(
            WrittenVersion(
                int(w["table"]),
                str(w["namespace"]),
                str(w["dataset"]),
                tuple(FileStamp(str(p), int(s), int(m)) for p, s, m in w["files"]),
            )
            for w in record["writes"]
        )
        reads = tuple(
            LinkedRead(
                int(r["table"]),
                str(r["namespace"]),
                str(r["dataset"]),
                str(r["run_id"]),
                int(r["src_table"]),
                int(r["op"]),
                r.get("missing"),
            )
            for r in record["reads"]
        )
        return [RunVersions(str(record["run_id"]), writes, reads)]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DamagedStoreError(f"damaged store file {what}: {exc}") from None


def write_versions(directory: Destination, versions: RunVersions) -> None:
    """Write ``versions.json`` into a run's directory (the recorder marks the dataset)."""
    directory.write_text(VERSIONS, versions_json(versions))


def versions_of(store: Store[Any], run_ids: Collection[str] | None = None) -> list[RunVersions]:
    """The versions of every committed run of ``store`` (of ``run_ids`` only), oldest run first."""
    return storefiles.run_text_datasets(store, VERSIONS, parse_versions, run_ids)


def latest_write(
    store: Store[Any], namespace: str, dataset: str, runs: Sequence[RunVersions] | None = None
) -> tuple[str, WrittenVersion] | None:
    """(run id, version) of the latest committed write of a dataset, or None.
    Runs are in commit order (:meth:`Store.runs`), so the last write found is the latest."""
    found = None
    for run in versions_of(store) if runs is None else runs:
        for write in run.writes:
            if (write.namespace, write.dataset) == (namespace, dataset):
                found = (run.run_id, write)
    return found


def readers_of(
    store: Store[Any], run_ids: Collection[str], runs: Sequence[RunVersions] | None = None
) -> list[tuple[str, LinkedRead]]:
    """(reading run id, read) of every linked read of a table of ``run_ids``
    by a run not among them (a deletion of ``run_ids`` takes those versions away)."""
    return [
        (run.run_id, read)
        for run in (versions_of(store) if runs is None else runs)
        if run.run_id not in run_ids
        for read in run.reads
        if read.run_id in run_ids and read.missing is None
    ]


def mark_missing(store: Store[Any], reader: str, deleted: str, about: dict[str, Any]) -> None:
    """Record in run ``reader`` that the versions it read from run ``deleted``
    are gone (``about``: that run's number and label), and drop the link's
    location edges so that no triple names a table no run defines."""
    from provplug.store.locations import LOCATIONS, edges_json, parse_edges

    [versions] = versions_of(store, {reader})
    gone = {r.op for r in versions.reads if r.run_id == deleted}
    reads = tuple(dataclasses.replace(r, missing=dict(about)) if r.op in gone else r for r in versions.reads)
    run_dir = store.path("runs", reader)
    _replace_text(store, f"{run_dir}/{VERSIONS}", versions_json(dataclasses.replace(versions, reads=reads)))
    path = f"{run_dir}/{LOCATIONS}"
    edges = parse_edges(storefiles.read_text(store.fs, path), path)
    _replace_text(store, path, edges_json(e for e in edges if e.op not in gone))


def _replace_text(store: Store[Any], path: str, text: str) -> None:
    """Replace a small file of a committed run: readers see the old or the new one whole."""
    scratch = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    store.write_text(scratch, text)
    store.fs.move(scratch, path)
