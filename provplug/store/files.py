"""The one place that reads files of a store: a damaged file becomes one line.

A truncated Parquet file, a half-written JSON record or an unreadable byte is
not the user's input: it is damage to the store (a crash, a full disk, a
copy gone wrong). Every reader of store files goes through these functions,
so such damage is a :class:`~provplug.errors.DamagedStoreError` naming the
file, never an Arrow or JSON traceback, whichever command found it first.

The owner records that say which process holds part of a store, and whether
it is gone, are :mod:`provplug.store.liveness` (re-exported here for the
callers of this module's old home).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from provplug.errors import DamagedStoreError, StoreError
from provplug.store.liveness import process_gone as process_gone
from provplug.store.liveness import process_record as process_record

T = TypeVar("T")

# Errors that mean "the bytes are not what the format says", as opposed to a
# missing file (FileNotFoundError), which callers handle themselves.
_DAMAGE = (pa.ArrowInvalid, pa.ArrowNotImplementedError, json.JSONDecodeError, UnicodeDecodeError, EOFError)


def _one_line(exc: BaseException) -> str:
    printable = "".join(c if c.isprintable() else " " for c in str(exc))
    text = " ".join(printable.split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


@contextlib.contextmanager
def damage_reported(what: str) -> Iterator[None]:
    """Turn a damaged-file error raised inside the block into a one-line
    :class:`DamagedStoreError` about ``what`` (a path, or a named dataset).

    For lazy readers (a pyarrow dataset fails when it is scanned, not when it
    is opened) wrap the scan, not only the open.
    """
    try:
        yield
    except FileNotFoundError:
        raise
    except _DAMAGE as exc:
        raise DamagedStoreError(f"damaged store file {what}: {_one_line(exc)}") from exc
    except OSError as exc:
        # pyarrow reports some damage as an OSError of its own: a short footer
        # read (an ArrowException), or a page that does not deserialize (a
        # plain OSError without errno). An errno means the OS refused: not damage.
        if isinstance(exc, pa.ArrowException) or exc.errno is None:
            raise DamagedStoreError(f"damaged store file {what}: {_one_line(exc)}") from exc
        raise


def read_text(fs: pafs.FileSystem, path: str) -> str:
    with damage_reported(path), fs.open_input_stream(path) as f:
        data: bytes = f.read()
        return data.decode()


def read_json(fs: pafs.FileSystem, path: str) -> Any:
    """A JSON record of the store (marker, manifest, index metadata)."""
    text = read_text(fs, path)
    with damage_reported(path):
        return json.loads(text)


def read_parquet(fs: pafs.FileSystem, path: str, **kwargs: Any) -> pa.Table:
    """One Parquet file or directory (``pq.read_table`` keyword arguments)."""
    with damage_reported(path):
        return pq.read_table(path, filesystem=fs, **kwargs)


def parquet_metadata(fs: pafs.FileSystem, path: str) -> pq.FileMetaData:
    with damage_reported(path), fs.open_input_file(path) as f:
        return pq.ParquetFile(f).metadata


def scan(
    fs: pafs.FileSystem,
    paths: str | Sequence[str],
    what: str,
    schema: pa.Schema | None = None,
    **to_table: Any,
) -> pa.Table:
    """Read a Parquet dataset (one path or a list of files) eagerly, with
    ``Dataset.to_table`` keyword arguments (``columns``, ``filter``)."""
    import pyarrow.dataset as pads  # here: it imports pandas, which a cold query need not pay for

    source = paths if isinstance(paths, str) else list(paths)
    try:
        with damage_reported(what):
            dataset = pads.dataset(source, schema=schema, format="parquet", filesystem=fs)
            return dataset.to_table(**to_table)
    except DamagedStoreError:
        if isinstance(source, list):
            _name_the_damaged_file(fs, source)
        raise


def _name_the_damaged_file(fs: pafs.FileSystem, files: Sequence[str]) -> None:
    """A dataset scan does not say which file failed: read them one by one
    (only on this error path) so the error names it."""
    for path in files:
        read_parquet(fs, path)


def count_rows(fs: pafs.FileSystem, paths: str | Sequence[str], what: str) -> int:
    import pyarrow.dataset as pads

    with damage_reported(what):
        source = paths if isinstance(paths, str) else list(paths)
        return int(pads.dataset(source, format="parquet", filesystem=fs).count_rows())


def run_text_datasets(
    store: Any, name: str, parse: Callable[[str, str], list[T]], run_ids: Collection[str] | None = None
) -> list[T]:
    """The records of the small text dataset ``name`` (``locations.json``,
    ``coarse.json``, ...) of every committed run of ``store`` that lists it
    (of ``run_ids`` only, when given), oldest run first; ``parse(text, path)``
    reads one file. A listed file that is gone is a run deleted meanwhile
    (:class:`StoreError`) or damage (:class:`DamagedStoreError`)."""
    records: list[T] = []
    for manifest in store.runs():
        if name not in manifest.get("datasets", ()) or (run_ids is not None and manifest["run_id"] not in run_ids):
            continue
        path = store.path("runs", manifest["run_id"], name)
        try:
            records.extend(parse(read_text(store.fs, path), path))
        except FileNotFoundError:
            if not any(m["run_id"] == manifest["run_id"] for m in store.runs()):
                raise StoreError(
                    f"run {manifest['run_id']} of {store.uri} was deleted while this command read it: run it again"
                ) from None
            raise DamagedStoreError(f"damaged store {store.uri}: {path} is missing") from None
    return records
