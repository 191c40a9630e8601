"""Import provenance captured by another system (``provplug import``).

Triples: Parquet or CSV with integer ``src``, ``dst`` and an ``op`` name.
Values (optional): ``value_id, table`` and an optional ``column``; values not
listed belong to the table ``unknown``. The triples are streamed in batches
(bounded memory for the triples themselves); the value mapping is held as
sorted NumPy arrays for lookups.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from . import ids, schema
from .errors import ImportInputError
from .lifecycle import observed_run
from .model import OpInfo, TableInfo
from .plugins import Plugins, get_plugins
from .progress import SILENT, Progress
from .store import ParquetStore, RunTransaction

UNKNOWN_TABLE = "unknown"
BATCH_ROWS = 1 << 20
FILE_ROWS = 1 << 24


def import_provenance(
    store: ParquetStore,
    triples_path: str | os.PathLike[str],
    values_path: str | os.PathLike[str] | None = None,
    progress: Progress = SILENT,
    plugins: Plugins | None = None,
) -> dict[str, int | str]:
    """Import one triples file (and its value mapping) as one atomic run."""
    triples = _open_input(os.fspath(triples_path), {"src": "int", "dst": "int", "op": "any"}, "triples")
    mapping = _load_mapping(os.fspath(values_path)) if values_path is not None else ValueMapping.empty()
    store.exists()  # fails early on a store path that is a regular file
    with observed_run(store, plugins or get_plugins(), "import", "import") as (txn, _):
        written = _ImportWriter(txn, mapping, progress).run(triples)
    progress.done("import committed", written, "triples")
    return {"run_id": txn.run_id, "triples": written}


def _input_format(path: str) -> str:
    if not os.path.exists(path):
        raise ImportInputError(f"no such file: {path}")
    if os.path.isdir(path):
        return "parquet"
    with open(path, "rb") as f:
        return "parquet" if f.read(4) == b"PAR1" else "csv"


def _open_input(path: str, required: dict[str, str], what: str) -> pads.Dataset:
    fmt = _input_format(path)
    if fmt == "csv":
        types = {c: pa.int64() for c, kind in required.items() if kind == "int"}
        file_format: pads.FileFormat = pads.CsvFileFormat(convert_options=pacsv.ConvertOptions(column_types=types))
    else:
        file_format = pads.ParquetFileFormat()
    try:
        dataset = pads.dataset(path, format=file_format)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ImportInputError(f"cannot read {what} file {path}: {_arrow_message(exc, path)}") from exc
    names = dataset.schema.names
    for column, kind in required.items():
        if column not in names:
            raise ImportInputError(f"{what} file {path} has no '{column}' column (columns: {', '.join(names)})")
        if kind == "int" and not pa.types.is_integer(dataset.schema.field(column).type):
            raise ImportInputError(
                f"{what} file {path}: column '{column}' must hold integer ids, not {dataset.schema.field(column).type}"
            )
    return dataset


def _arrow_message(exc: BaseException, path: str | None = None) -> str:
    """The informative tail of an Arrow error, on one line, naming CSV columns."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    marker = "Invalid: "
    text = text[text.rindex(marker) + len(marker):] if marker in text else text
    found = re.search(r"CSV column #(\d+)", text)
    if found and path and _input_format(path) == "csv":
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        k = int(found.group(1))
        if k < len(header):
            text = text.replace(found.group(0), f"column '{header[k]}'")
    return text


def _batches(dataset: pads.Dataset, columns: list[str], what: str) -> Iterator[pa.RecordBatch]:
    path = dataset.files[0] if len(dataset.files) == 1 else None
    try:
        yield from dataset.to_batches(columns=columns, batch_size=BATCH_ROWS)
    except pa.ArrowInvalid as exc:
        raise ImportInputError(f"malformed {what} file: {_arrow_message(exc, path)}") from exc


@dataclass
class ValueMapping:
    """Imported value id -> (table name index, column name or None), sorted by id."""

    ids: np.ndarray
    table_codes: np.ndarray
    column_codes: np.ndarray
    tables: list[str]
    columns: list[list[str]]

    @classmethod
    def empty(cls) -> ValueMapping:
        e = np.empty(0, dtype=np.int64)
        return cls(e, e.astype(np.int32), e.astype(np.int32), [], [])

    def lookup(self, values: np.ndarray) -> np.ndarray:
        """Position in the mapping of each value, -1 where it is not listed."""
        pos = np.searchsorted(self.ids, values)
        pos = np.minimum(pos, max(len(self.ids) - 1, 0))
        found = (self.ids[pos] == values) if len(self.ids) else np.zeros(len(values), dtype=bool)
        return np.where(found, pos, -1)


def _load_mapping(path: str) -> ValueMapping:
    dataset = _open_input(path, {"value_id": "int", "table": "any"}, "values")
    has_column = "column" in dataset.schema.names
    cols = ["value_id", "table", *(["column"] if has_column else [])]
    table = pa.Table.from_batches(
        list(_batches(dataset, cols, "values")), schema=pa.schema([dataset.schema.field(c) for c in cols])
    )
    if table.column("table").null_count:
        raise ImportInputError(f"values file {path}: 'table' is empty for some value")
    value_ids = table.column("value_id").to_numpy().astype(np.int64)
    _check_id_range(value_ids, path)
    tables = table.column("table").cast(pa.string()).dictionary_encode().combine_chunks()
    table_codes = tables.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    table_names: list[str] = tables.dictionary.to_pylist()
    columns: list[list[str]] = [[] for _ in table_names]
    column_codes = np.full(len(value_ids), -1, dtype=np.int32)
    if has_column:
        column_codes = _column_codes(table.column("column").cast(pa.string()), table_codes, columns)
    order = np.argsort(value_ids, kind="stable")
    sorted_ids = value_ids[order]
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if len(dup):
        raise ImportInputError(f"values file {path}: value id {sorted_ids[dup[0]]} is listed more than once")
    return ValueMapping(sorted_ids, table_codes[order], column_codes[order], table_names, columns)


def _column_codes(column: pa.ChunkedArray, table_codes: np.ndarray, columns: list[list[str]]) -> np.ndarray:
    """Index of each value's column within its own table's column list."""
    names = column.to_pylist()
    index: list[dict[str, int]] = [{} for _ in columns]
    codes = np.full(len(names), -1, dtype=np.int32)
    for i, (t, name) in enumerate(zip(table_codes.tolist(), names)):
        if name is None:
            continue
        code = index[t].get(name)
        if code is None:
            code = index[t][name] = len(columns[t])
            columns[t].append(name)
        codes[i] = code
    return codes


def _check_id_range(values: np.ndarray, path: str) -> None:
    bad = (values < 0) | (values >= ids.IMPORTED_ID_LIMIT)
    if bad.any():
        raise ImportInputError(
            f"{path}: value id {values[bad][0]} outside the imported id range 0..{ids.IMPORTED_ID_LIMIT - 1}"
        )


class _ImportWriter:
    """Streams triples into the staging dir, assigning table and op ids."""

    def __init__(self, txn: RunTransaction, mapping: ValueMapping, progress: Progress) -> None:
        self.txn = txn
        self.mapping = mapping
        self.progress = progress
        self.table_ids = np.array([txn.reserve("tables") for _ in mapping.tables], dtype=np.int32)
        self.unknown_id: int | None = None
        self.op_ids: dict[str, int] = {}
        self.op_counts: dict[str, int] = {}
        self.unlisted: list[np.ndarray] = []
        self.table_pairs: set[tuple[int, int]] = set()

    def run(self, triples: pads.Dataset) -> int:
        self.txn.store.fs.create_dir(self.txn.path("triples"))
        written, part, writer_rows = 0, 0, 0
        writer: pq.ParquetWriter | None = None
        try:
            for batch in _batches(triples, ["src", "dst", "op"], "triples"):
                if writer is None or writer_rows >= FILE_ROWS:
                    if writer is not None:
                        writer.close()
                    writer = pq.ParquetWriter(self.txn.path("triples", f"part-{part:05d}.parquet"), schema.TRIPLES)
                    part, writer_rows = part + 1, 0
                out = self._convert(batch)
                writer.write_table(out)
                writer_rows += out.num_rows
                written += out.num_rows
                self.progress.update("importing triples", written, "triples")
        finally:
            if writer is not None:
                writer.close()
        if written == 0:
            raise ImportInputError("the triples file holds no triple")
        self.txn.mark_dataset("triples")
        self._check_acyclic()
        self._finish_catalogue()
        return written

    def _convert(self, batch: pa.RecordBatch) -> pa.Table:
        for name in ("src", "dst", "op"):
            if batch.column(name).null_count:
                raise ImportInputError(f"triples file: '{name}' is empty in some row")
        src = batch.column("src").to_numpy().astype(np.int64)
        dst = batch.column("dst").to_numpy().astype(np.int64)
        _check_id_range(np.concatenate([src, dst]), "triples file")
        loops = np.flatnonzero(src == dst)
        if len(loops):
            raise ImportInputError(f"triples file: value {src[loops[0]]} is derived from itself (a cycle)")
        ops = self._op_ids(batch.column("op"))
        src_table, dst_table = self._tables_of(src), self._tables_of(dst)
        self.table_pairs.update(zip(*np.unique(np.stack([src_table, dst_table]), axis=1).tolist()))
        return pa.table(
            {"src": src, "dst": dst, "op": ops, "src_table": src_table, "dst_table": dst_table},
            schema=schema.TRIPLES,
        )

    def _op_ids(self, column: pa.Array) -> np.ndarray:
        encoded = pc.cast(column, pa.string()).dictionary_encode()
        names = encoded.dictionary.to_pylist()
        for name in names:
            if name not in self.op_ids:
                self.op_ids[name] = self.txn.reserve("ops")
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        per_name = np.bincount(codes, minlength=len(names))
        for name, n in zip(names, per_name.tolist()):
            self.op_counts[name] = self.op_counts.get(name, 0) + n
        return np.array([self.op_ids[n] for n in names], dtype=np.int64)[codes]

    def _tables_of(self, values: np.ndarray) -> np.ndarray:
        pos = self.mapping.lookup(values)
        listed = pos >= 0
        out = np.empty(len(values), dtype=np.int32)
        out[listed] = self.table_ids[self.mapping.table_codes[pos[listed]]]
        if not listed.all():
            if self.unknown_id is None:
                self.unknown_id = self.txn.reserve("tables")
            out[~listed] = self.unknown_id
            self.unlisted.append(np.unique(values[~listed]))
        return out

    def _check_acyclic(self) -> None:
        """Values of distinct tables can only form a cycle if the tables do;
        only then (or with edges inside one table) check value by value."""
        pairs = {(s, d) for s, d in self.table_pairs}
        if all(s != d for s, d in pairs) and _is_acyclic(np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)):
            return
        edges = pads.dataset(self.txn.path("triples"), format="parquet", filesystem=self.txn.store.fs)
        table = edges.to_table(columns=["src", "dst"])
        pairs_arr = np.stack([table.column("src").to_numpy(), table.column("dst").to_numpy()], axis=1)
        if not _is_acyclic(pairs_arr):
            raise ImportInputError("the triples contain a cycle: a value is among its own ancestors")

    def _finish_catalogue(self) -> None:
        txn, m = self.txn, self.mapping
        for name, table_id in zip(m.tables, self.table_ids.tolist()):
            txn.add_table(TableInfo(table_id, name, txn.run_id, "imported", tuple(m.columns[m.tables.index(name)])))
        if self.unknown_id is not None:
            txn.add_table(TableInfo(self.unknown_id, UNKNOWN_TABLE, txn.run_id, "imported"))
        now = dt.datetime.now(dt.timezone.utc)
        for name, op_id in self.op_ids.items():
            txn.add_op(OpInfo(op_id, name, txn.run_id, "imported", started=now, finished=now, triples=self.op_counts[name]))
        self._write_values()

    def _write_values(self) -> None:
        m = self.mapping
        unlisted = np.unique(np.concatenate(self.unlisted)) if self.unlisted else np.empty(0, np.int64)
        values = pa.table(
            {
                "value_id": np.concatenate([m.ids, unlisted]),
                "table_id": np.concatenate(
                    [self.table_ids[m.table_codes], np.full(len(unlisted), self.unknown_id or 0, np.int32)]
                ).astype(np.int32),
                "column_id": pa.array(
                    np.concatenate([m.column_codes, np.full(len(unlisted), -1, np.int32)]),
                    mask=np.concatenate([m.column_codes < 0, np.ones(len(unlisted), bool)]),
                ),
            },
            schema=schema.VALUES,
        )
        pq.write_table(values, self.txn.path("values.parquet"), filesystem=self.txn.store.fs)
        self.txn.mark_dataset("values.parquet")
        self.txn.values_count = values.num_rows


def _is_acyclic(edges: np.ndarray) -> bool:
    """Kahn's algorithm, vectorised: peel zero in-degree nodes until none remain."""
    if len(edges) == 0:
        return True
    nodes, inverse = np.unique(edges, return_inverse=True)
    src, dst = inverse.reshape(edges.shape).T
    alive = np.ones(len(src), dtype=bool)
    while alive.any():
        indeg = np.bincount(dst[alive], minlength=len(nodes))
        ready = indeg == 0
        removable = alive & ready[src]
        if not removable.any():
            return False
        alive &= ~removable
    return True
