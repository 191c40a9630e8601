"""The built-in store: a directory of Parquet datasets, written one run at a time.

Layout (documented in the README)::

    STORE/
      provplug-store.json          format marker
      _ids/{tables,ops}/N          id reservations (exclusive create)
      _staging/RUN/                a run being written: invisible to readers
      runs/RUN/                    committed runs, never rewritten
        _manifest.json             written last: the run's commit record
        tables.parquet  ops.parquet  values.parquet (imports)
        triples/*.parquet
        rows/TABLE_ID/*.parquet
      index/                       the lineage index (``provplug index``)

A run is staged under ``_staging`` and becomes visible by one rename into
``runs/`` (atomic on local and POSIX filesystems); readers only see runs whose
``_manifest.json`` exists, so a crash at any point leaves the store as it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from . import schema
from .errors import StoreError
from .hookspecs import hookimpl
from .model import OpInfo, TableInfo

FORMAT = "provplug-store"
FORMAT_VERSION = 1
MARKER = "provplug-store.json"
MANIFEST = "_manifest.json"
OWNER = "_owner.json"
RESERVATIONS = "_reservations"
ID_KINDS = ("tables", "ops")
SKELETON = (MARKER, "runs", "_staging", "_ids")


@hookimpl(trylast=True)
def provplug_store_backend(uri: str) -> ParquetStore:
    return ParquetStore(uri)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ParquetStore:
    """A provenance store in a directory (local path or filesystem URI)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        try:
            self.fs, path = pafs.FileSystem.from_uri(uri)
        except (pa.ArrowInvalid, ValueError):
            self.fs, path = pafs.LocalFileSystem(), os.path.abspath(uri)
        self.local = isinstance(self.fs, pafs.LocalFileSystem)
        self.root = os.path.abspath(path) if self.local else path.rstrip("/")

    # -- paths ---------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def spark_path(self, *parts: str) -> str:
        """The same location as a URI Spark can read and write."""
        p = self.path(*parts)
        return p if self.local else f"{self.uri.split('://', 1)[0]}://{p}"

    def _info(self, path: str) -> pafs.FileInfo:
        return self.fs.get_file_info(path)

    # -- existence -----------------------------------------------------------
    def exists(self) -> bool:
        info = self._info(self.root)
        if info.type == pafs.FileType.NotFound:
            return False
        if info.type != pafs.FileType.Directory:
            raise StoreError(f"store path {self.uri} is a file, not a store directory")
        if self._info(self.path(MARKER)).type != pafs.FileType.File:
            # Only an empty dir, or a store another writer is creating right now, may become one.
            entries = {i.base_name for i in self.fs.get_file_info(pafs.FileSelector(self.root))}
            if entries - set(SKELETON):
                raise StoreError(f"{self.uri} is a non-empty directory that is not a provplug store")
            return False
        return True

    def check(self) -> None:
        """Raise unless the store exists and has a format this code reads."""
        if not self.exists():
            raise StoreError(f"no provplug store at {self.uri}")
        marker = json.loads(self._read_text(self.path(MARKER)))
        if marker.get("format") != FORMAT or marker.get("version") != FORMAT_VERSION:
            raise StoreError(f"{self.uri}: unsupported store format {marker}")

    def create(self) -> bool:
        """Create the store if missing; return True if this call created it."""
        if self.exists():
            self.check()
            return False
        self.fs.create_dir(self.root, recursive=True)
        for sub in ("runs", "_staging", *(f"_ids/{k}" for k in ID_KINDS)):
            self.fs.create_dir(self.path(sub), recursive=True)
        self._write_text(self.path(MARKER), json.dumps({"format": FORMAT, "version": FORMAT_VERSION}))
        return True

    def remove_if_unused(self) -> None:
        """Undo :meth:`create` after a failed first write, unless another
        writer has started or committed a run in the meantime."""
        busy = any(
            self.fs.get_file_info(pafs.FileSelector(self.path(sub)))
            for sub in ("runs", "_staging")
        )
        if not busy:
            self.fs.delete_dir(self.root)

    # -- small files ---------------------------------------------------------
    def _read_text(self, path: str) -> str:
        with self.fs.open_input_stream(path) as f:
            return f.read().decode()

    def _write_text(self, path: str, text: str) -> None:
        with self.fs.open_output_stream(path) as f:
            f.write(text.encode())

    # -- id reservations -----------------------------------------------------
    def reserve_id(self, kind: str, first: int = 1) -> int:
        """Reserve the next free id of ``kind`` for this process, store-wide.

        Exclusive file creation makes concurrent writers safe on local/POSIX
        filesystems; on object stores provplug assumes one writer at a time.
        """
        folder = self.path("_ids", kind)
        taken = [int(i.base_name) for i in self.fs.get_file_info(pafs.FileSelector(folder))]
        candidate = max([first - 1, *taken]) + 1
        while True:
            if self._create_exclusive(f"{folder}/{candidate}"):
                return candidate
            candidate += 1

    def release_id(self, kind: str, ident: int) -> None:
        self.fs.delete_file(self.path("_ids", kind, str(ident)))

    def _create_exclusive(self, path: str) -> bool:
        if self.local:
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                return True
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    return False
                raise
        if self._info(path).type != pafs.FileType.NotFound:
            return False
        self._write_text(path, "")
        return True

    # -- writing -------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self, kind: str) -> Iterator[RunTransaction]:
        """Stage a run; commit it if the block succeeds, else leave no trace.

        If the store did not exist it is created, and removed again when the
        block fails, so a failed first write leaves nothing behind.
        """
        created = self.create()
        self.collect_garbage()
        txn = RunTransaction(self, kind)
        try:
            yield txn
            txn.commit()
        except BaseException:
            txn.abort()
            if created:
                self.remove_if_unused()
            raise

    def collect_garbage(self) -> list[str]:
        """Remove runs left staged by writers that died (their process is gone)
        and release their id reservations; return the removed run ids."""
        removed = []
        for info in self.fs.get_file_info(pafs.FileSelector(self.path("_staging"))):
            owner = f"{info.path}/{OWNER}"
            if self._info(owner).type != pafs.FileType.File:
                continue
            record = json.loads(self._read_text(owner))
            if record.get("host") != socket.gethostname() or _pid_alive(int(record["pid"])):
                continue
            log = f"{info.path}/{RESERVATIONS}"
            lines = self._read_text(log).split() if self._info(log).type == pafs.FileType.File else []
            for line in lines:
                kind, ident = line.split(":")
                with contextlib.suppress(FileNotFoundError, OSError):
                    self.release_id(kind, int(ident))
            self.fs.delete_dir(info.path)
            removed.append(info.base_name)
        return removed

    # -- reading -------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        """Manifests of committed runs, oldest first."""
        self.check()
        manifests = []
        for info in self.fs.get_file_info(pafs.FileSelector(self.path("runs"))):
            manifest = f"{info.path}/{MANIFEST}"
            if info.type == pafs.FileType.Directory and self._info(manifest).type == pafs.FileType.File:
                manifests.append(json.loads(self._read_text(manifest)))
        return sorted(manifests, key=lambda m: (m["committed"], m["run_id"]))

    def run_paths(self, dataset: str) -> list[str]:
        """Paths of ``dataset`` (e.g. ``"triples"``) in every committed run that has it."""
        return [
            self.path("runs", m["run_id"], dataset)
            for m in self.runs()
            if dataset in m.get("datasets", ())
        ]

    def _concat(self, dataset: str, arrow_schema: pa.Schema) -> pa.Table:
        paths = self.run_paths(dataset)
        if not paths:
            return arrow_schema.empty_table()
        return pa.concat_tables(pq.read_table(p, filesystem=self.fs, schema=arrow_schema) for p in paths)

    def tables(self) -> pa.Table:
        return self._concat("tables.parquet", schema.TABLES)

    def ops(self) -> pa.Table:
        return self._concat("ops.parquet", schema.OPS)

    def values(self) -> pa.Table:
        return self._concat("values.parquet", schema.VALUES)

    def triple_files(self) -> list[str]:
        """Every Parquet file of committed triples (filesystem paths, sorted)."""
        return sorted(
            f.path
            for p in self.run_paths("triples")
            for f in self.fs.get_file_info(pafs.FileSelector(p, recursive=True))
            if f.path.endswith(".parquet") and not f.base_name.startswith(("_", "."))
        )

    def triples(self) -> pads.Dataset:
        """All committed triples as one pyarrow dataset (read lazily)."""
        return pads.dataset(self.triple_files(), schema=schema.TRIPLES, format="parquet", filesystem=self.fs)

    def read_rows(self, run_id: str, table_id: int, where: pc.Expression | None = None) -> pa.Table | None:
        """The stored rows of a table with their row numbers (ROW_COLUMN), in
        either layout (see :mod:`provplug.schema`); None when none are stored."""
        directory = self.path("runs", run_id, "rows", str(table_id))
        infos = self.fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True, recursive=True))
        files = sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(".parquet"))
        if not files:
            return None
        offsets = [schema.positional_offset(f) for f in files]
        if None in offsets:
            return pads.dataset(files, format="parquet", filesystem=self.fs).to_table(filter=where)
        parts = []
        for path, offset in zip(files, offsets):
            part = pq.read_table(path, filesystem=self.fs)
            assert offset is not None
            part = part.append_column(schema.ROW_COLUMN, pa.array(np.arange(offset, offset + part.num_rows, dtype=np.int64)))
            parts.append(part if where is None else part.filter(where))
        return pa.concat_tables(parts, promote_options="default")

    def stats(self) -> dict[str, int]:
        runs = self.runs()
        return {
            "runs": len(runs),
            **{k: sum(int(m["counts"][k]) for m in runs) for k in ("tables", "ops", "values", "triples")},
        }


class RunTransaction:
    """One run being staged. Use through :meth:`ParquetStore.transaction`."""

    def __init__(self, store: ParquetStore, kind: str) -> None:
        self.store = store
        self.kind = kind
        self.started = _now()
        self.run_id = f"{self.started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}"
        self.staging = store.path("_staging", self.run_id)
        store.fs.create_dir(self.staging, recursive=True)
        store._write_text(self.path(OWNER), json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
        self.reserved: list[tuple[str, int]] = []
        self.tables: list[TableInfo] = []
        self.ops: list[OpInfo] = []
        self.datasets: set[str] = set()
        self.values_count = 0

    def path(self, *parts: str) -> str:
        return "/".join([self.staging, *parts])

    def spark_path(self, *parts: str) -> str:
        return self.store.spark_path("_staging", self.run_id, *parts)

    def reserve(self, kind: str) -> int:
        ident = self.store.reserve_id(kind)
        self.reserved.append((kind, ident))
        # Logged in the staging dir so garbage collection can release it if we die.
        self.store._write_text(self.path(RESERVATIONS), "\n".join(f"{k}:{i}" for k, i in self.reserved))
        return ident

    def add_table(self, table: TableInfo) -> None:
        self.tables.append(table)

    def add_op(self, op: OpInfo) -> None:
        self.ops.append(op)

    def mark_dataset(self, name: str) -> None:
        """Record that the caller wrote dataset ``name`` into the staging dir."""
        self.datasets.add(name)

    # -- commit / abort ------------------------------------------------------
    def commit(self) -> None:
        fs = self.store.fs
        self._write_catalogue()
        counts = {
            "tables": len(self.tables),
            "ops": len(self.ops),
            "values": self.values_count
            or sum(len(t.columns) * (t.rows or 0) for t in self.tables if t.origin != "imported"),
            "triples": self._row_count("triples"),
        }
        manifest = {
            "run_id": self.run_id,
            "kind": self.kind,
            "started": self.started.isoformat(),
            "committed": _now().isoformat(),
            "datasets": sorted(self.datasets),
            "counts": counts,
        }
        for bookkeeping in (OWNER, RESERVATIONS):
            if self.store._info(self.path(bookkeeping)).type == pafs.FileType.File:
                fs.delete_file(self.path(bookkeeping))
        self.store._write_text(self.path(MANIFEST), json.dumps(manifest, indent=1))
        target = self.store.path("runs", self.run_id)
        if self.store.local:
            os.rename(self.staging, target)  # the commit point
        else:
            fs.move(self.staging, target)

    def _write_catalogue(self) -> None:
        fs = self.store.fs
        pq.write_table(_tables_table(self.tables), self.path("tables.parquet"), filesystem=fs)
        pq.write_table(_ops_table(self.ops), self.path("ops.parquet"), filesystem=fs)
        self.datasets.update({"tables.parquet", "ops.parquet"})

    def _row_count(self, dataset: str) -> int:
        if dataset not in self.datasets:
            return 0
        return int(pads.dataset(self.path(dataset), format="parquet", filesystem=self.store.fs).count_rows())

    def abort(self) -> None:
        with contextlib.suppress(FileNotFoundError, OSError):
            self.store.fs.delete_dir(self.staging)
        for kind, ident in self.reserved:
            with contextlib.suppress(FileNotFoundError, OSError):
                self.store.release_id(kind, ident)


def _tables_table(tables: Sequence[TableInfo]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "table_id": t.table_id,
                "name": t.name,
                "run_id": t.run_id,
                "origin": t.origin,
                "columns": list(t.columns),
                "rows": t.rows,
                "stored_rows": t.stored_rows,
            }
            for t in tables
        ],
        schema=schema.TABLES,
    )


def _ops_table(ops: Sequence[OpInfo]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "op_id": o.op_id,
                "name": o.name,
                "run_id": o.run_id,
                "kind": o.kind,
                "inputs": list(o.inputs),
                "outputs": list(o.outputs),
                "operations": list(o.operations),
                "params": json.dumps(dict(o.params), default=str, sort_keys=True),
                "started": o.started,
                "finished": o.finished,
                "triples": o.triples,
            }
            for o in ops
        ],
        schema=schema.OPS,
    )


def open_store(uri: str | os.PathLike[str]) -> ParquetStore:
    """The store for ``uri`` as chosen by the store-backend hook."""
    from .plugins import get_plugins

    store = get_plugins().store(os.fspath(uri))
    return store  # type: ignore[return-value]
