"""Import provenance captured by another system (``provplug import``).

Triples: Parquet or CSV with integer ``src``, ``dst`` and an ``op`` name.
Values (optional): ``value_id, table`` and an optional ``column``; values not
listed belong to the table ``unknown``. An optional ``row`` column (an
integer >= 0 per value, or empty) places each value in a row of its table:
what-if and dependency queries delete and follow rows.

Row lineage (optional, both files together; see :mod:`provplug.ingest.rowlineage`):
``--row-lineage``, Parquet or CSV with ``op`` (a name of the triples),
``out_table``, ``out_row``, ``in_table``, ``in_row`` and optionally
``member`` (default 0) and ``optional`` (default false), tables named as in
the values file; ``--row-rules``, a JSON list of
:class:`~provplug.rowrules.OpRowRules` objects with names for ids: ``op`` an op
name, ``out_table``, a column rule's ``table``, ``references`` ``[[TABLE,
COLUMN], ...]``, the keys of ``deciding`` and ``opaque_inputs`` table names.
Every (op, out_table) of the records needs its rules. An op with rules
records its input and output tables (they order the what-if).

The triples are held in memory as NumPy arrays (the peak is about 110 bytes
a triple: 2.2 GiB for 20M, see examples/benchmarks/import.md) because two
checks need the whole file at once: duplicates are dropped across the whole
file, and the cycle check is a topological sort over all values, joined by
the triples of earlier imported runs when these share a value with them.
Nothing is written until both checks have passed.
"""

from __future__ import annotations

import csv
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from provplug import ids, schema
from provplug.errors import ImportInputError
from provplug.ingest.recorder import StagedRun
from provplug.ingest.transaction import observed_run
from provplug.model import OpInfo, TableInfo, utc_now
from provplug.plugin.manager import Plugins, get_plugins
from provplug.plugin.protocols import Store, Transaction
from provplug.progress import SILENT, Progress
from provplug.store import files as storefiles

logger = logging.getLogger(__name__)  # what an import read and committed

if TYPE_CHECKING:
    # pyarrow.dataset imports pandas: imported lazily, only for the reads that need it.
    import pyarrow.dataset as pads

UNKNOWN_TABLE, VALUE_ROWS, VALUE_ROWS_SCHEMA = schema.UNKNOWN_TABLE, schema.VALUE_ROWS, schema.VALUE_ROWS_SCHEMA
BATCH_ROWS = 1 << 20
# Below this many values in the frontier, a NumPy round costs more than
# relaxing the edges one by one in Python (long chains have frontiers of one).
SMALL_FRONTIER = 64
# Values walked one by one before returning to the caller (for progress lines).
WALK_STEPS = 1 << 16
# Row groups of values.parquet: a cold query reads only the groups holding its values.
VALUES_ROW_GROUP = 1 << 16
# Ids are sorted in parts of about this many, with a progress line between.
PART_ROWS = 1 << 22


def import_provenance(
    store: Store[Transaction],
    triples_path: str | os.PathLike[str],
    values_path: str | os.PathLike[str] | None = None,
    progress: Progress = SILENT,
    plugins: Plugins | None = None,
    row_lineage: str | os.PathLike[str] | None = None,
    row_rules: str | os.PathLike[str] | None = None,
) -> dict[str, int | str]:
    """Import one triples file (its value mapping, its row lineage) as one atomic run."""
    triples = _open_input(os.fspath(triples_path), {"src": "int", "dst": "int", "op": "any"}, "triples")
    mapping = _load_mapping(os.fspath(values_path), progress) if values_path is not None else ValueMapping.empty()
    rows = _open_row_lineage(row_lineage, row_rules, mapping)
    store.exists()  # fails early on a store path that is a regular file
    with observed_run(store, plugins or get_plugins(), "import", "import") as (txn, _):
        graph = _read_triples(triples, os.fspath(triples_path), progress)
        read = graph.size
        graph = graph.deduplicated(progress)
        node_tables = _table_codes(graph.nodes, mapping)
        _check_acyclic(graph, node_tables, progress)
        _check_no_cycle_with_earlier_runs(store, graph, progress)
        if rows is not None:
            rows.check_ops(graph.op_names)
        written = _RunWriter(StagedRun(store, txn, store_rows=False), mapping, progress).write(graph, node_tables, rows)
        progress.update("committing", written, "triples", force=True)
    progress.done("import committed", written, "triples")
    logger.info(
        "imported %s into %s as run %s: %d triples (%d duplicates dropped)",
        os.fspath(triples_path),
        store.uri,
        txn.run_id,
        written,
        read - written,
    )
    return {"run_id": txn.run_id, "triples": written, "duplicates": read - written}


# -- input files ---------------------------------------------------------------


def _input_format(path: str) -> str:
    if not os.path.exists(path):
        raise ImportInputError(f"no such file: {path}")
    if os.path.isdir(path):
        return "parquet"
    with open(path, "rb") as f:
        return "parquet" if f.read(4) == b"PAR1" else "csv"


def _open_input(path: str, required: dict[str, str], what: str) -> pads.Dataset:
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads

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
    text = text[text.rindex(marker) + len(marker) :] if marker in text else text
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


def _check_id_range(values: np.ndarray, path: str) -> None:
    bad = (values < 0) | (values >= ids.IMPORTED_ID_LIMIT)
    if bad.any():
        raise ImportInputError(
            f"{path}: value id {values[bad][0]} outside the imported id range 0..{ids.IMPORTED_ID_LIMIT - 1}"
        )


def _check_names(names: list[str], what: str) -> None:
    """Reject names a user could never type back (empty or whitespace only)."""
    if any(not name.strip() for name in names):
        raise ImportInputError(f"{what} is empty or blank for some row")


# -- the value mapping ---------------------------------------------------------


@dataclass
class ValueMapping:
    """Imported value id -> (table name index, column name or None), sorted by id."""

    ids: np.ndarray
    table_codes: np.ndarray
    column_codes: np.ndarray
    tables: list[str]
    columns: list[list[str]]
    rows: np.ndarray | None = None  # row number of each value in its table, -1 for none (no ``row`` column: None)

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


def _load_mapping(path: str, progress: Progress) -> ValueMapping:
    table = _read_values(path, progress)
    if table.column("table").null_count:
        raise ImportInputError(f"values file {path}: 'table' is empty for some value")
    value_ids = table.column("value_id").to_numpy().astype(np.int64)
    _check_id_range(value_ids, path)
    tables = table.column("table").cast(pa.string()).dictionary_encode().combine_chunks()
    table_codes = tables.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    table_names: list[str] = tables.dictionary.to_pylist()
    _check_names(table_names, f"values file {path}: 'table'")
    if "column" in table.column_names:
        column_codes, columns = _column_codes(table.column("column").cast(pa.string()), table_codes, len(table_names))
    else:
        column_codes, columns = np.full(len(value_ids), -1, dtype=np.int32), [[] for _ in table_names]
    rows = _value_rows(table, path) if "row" in table.column_names else None
    del table
    progress.update("sorting values", len(value_ids), "values", force=True)
    order, sorted_ids = _argsort_in_parts(value_ids, progress, "sorting values")
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if len(dup):
        raise ImportInputError(f"values file {path}: value id {sorted_ids[dup[0]]} is listed more than once")
    progress.done("read values", len(sorted_ids), "values")
    return ValueMapping(
        sorted_ids, table_codes[order], column_codes[order], table_names, columns, None if rows is None else rows[order]
    )


def _value_rows(table: pa.Table, path: str) -> np.ndarray:
    """The ``row`` column: integers >= 0, empty for a value without a row (-1)."""
    column = table.column("row")
    if not pa.types.is_integer(column.type) and column.null_count < len(column):
        raise ImportInputError(f"values file {path}: column 'row' must hold integer row numbers, not {column.type}")
    rows = pc.fill_null(column.cast(pa.int64()), -1).to_numpy()
    bad = (rows < -1) | ((rows == -1) & ~pc.is_null(column).to_numpy(zero_copy_only=False))
    if bad.any():
        raise ImportInputError(f"values file {path}: row {rows[bad][0]} is negative")
    if (rows >= ids.MAX_ROWS).any():
        raise ImportInputError(f"values file {path}: row {rows.max()} outside 0..{ids.MAX_ROWS - 1}")
    return np.asarray(rows, dtype=np.int64)


def _read_values(path: str, progress: Progress) -> pa.Table:
    dataset = _open_input(path, {"value_id": "int", "table": "any"}, "values")
    columns = [c for c in ("value_id", "table", "column", "row") if c in dataset.schema.names]
    batches = []
    for batch in _batches(dataset, columns, "values"):
        batches.append(batch)
        progress.update("reading values", sum(b.num_rows for b in batches), "values")
    return pa.Table.from_batches(batches, schema=pa.schema([dataset.schema.field(c) for c in columns]))


def _column_codes(
    column: pa.ChunkedArray, table_codes: np.ndarray, n_tables: int
) -> tuple[np.ndarray, list[list[str]]]:
    """Index of each value's column within its own table's column list (in
    order of first appearance), -1 for no column; and those lists."""
    encoded = column.dictionary_encode().combine_chunks()
    names: list[str] = encoded.dictionary.to_pylist()
    name_codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    codes = np.full(len(name_codes), -1, dtype=np.int32)
    columns: list[list[str]] = [[] for _ in range(n_tables)]
    named = np.flatnonzero(name_codes >= 0)
    # Arrow lists a dictionary in order of first appearance, in one hashing pass.
    pairs = pa.array(table_codes[named].astype(np.int64) * max(len(names), 1) + name_codes[named]).dictionary_encode()
    code_of_pair = np.empty(len(pairs.dictionary), dtype=np.int32)
    for k, pair in enumerate(pairs.dictionary.to_pylist()):
        table, name = divmod(pair, len(names))
        code_of_pair[k] = len(columns[table])
        columns[table].append(names[name])
    codes[named] = code_of_pair[pairs.indices.to_numpy(zero_copy_only=False)]
    return codes, columns


def _table_codes(nodes: np.ndarray, mapping: ValueMapping) -> np.ndarray:
    """Table code of each value: its index in ``mapping.tables``, or
    ``len(mapping.tables)`` (the table ``unknown``) when it is not listed."""
    pos = mapping.lookup(nodes)  # nodes are sorted: a cache-friendly search
    codes = np.full(len(nodes), len(mapping.tables), dtype=np.int32)
    listed = pos >= 0
    codes[listed] = mapping.table_codes[pos[listed]]
    return codes


# -- the triples in memory -----------------------------------------------------


@dataclass
class _Graph:
    """The import's triples over dense value numbers: value ``k`` is
    ``nodes[k]`` (sorted); ``op`` indexes ``op_names``."""

    nodes: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    op: np.ndarray
    op_names: list[str]

    @property
    def size(self) -> int:
        return len(self.src)

    def deduplicated(self, progress: Progress) -> _Graph:
        """The unique triples, sorted by (src, dst, op): a sort, not a hash, so
        tens of millions of triples need a few seconds and little memory."""
        progress.update("deduplicating triples", self.size, "triples", force=True)
        src, dst, op = _unique_triples(self.src, self.dst, self.op, len(self.nodes), len(self.op_names))
        progress.done("deduplicated triples", len(src), f"unique triples ({self.size - len(src):,} duplicates)")
        return _Graph(self.nodes, src, dst, op, self.op_names)


def _read_triples(dataset: pads.Dataset, path: str, progress: Progress) -> _Graph:
    srcs: list[np.ndarray] = []
    dsts: list[np.ndarray] = []
    ops: list[np.ndarray] = []
    op_codes: dict[str, int] = {}
    read = 0
    for batch in _batches(dataset, ["src", "dst", "op"], "triples"):
        src, dst, op = _checked_batch(batch, path, op_codes)
        srcs.append(src)
        dsts.append(dst)
        ops.append(op)
        read += len(src)
        progress.update("reading triples", read, "triples")
    if read == 0:
        raise ImportInputError("the triples file holds no triple")
    progress.done("read triples", read, "triples")
    op = np.concatenate(ops)
    del ops
    nodes, src, dst = _number_values(srcs, dsts, progress)
    return _Graph(nodes, src, dst, op, list(op_codes))


def _checked_batch(
    batch: pa.RecordBatch, path: str, op_codes: dict[str, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    for name in ("src", "dst", "op"):
        if batch.column(name).null_count:
            raise ImportInputError(f"triples file {path}: '{name}' is empty in some row")
    src = batch.column("src").to_numpy().astype(np.int64)
    dst = batch.column("dst").to_numpy().astype(np.int64)
    _check_id_range(src, f"triples file {path}")
    _check_id_range(dst, f"triples file {path}")
    loops = np.flatnonzero(src == dst)
    if len(loops):
        raise ImportInputError(f"triples file {path}: value {src[loops[0]]} is derived from itself (a cycle)")
    encoded = pc.cast(batch.column("op"), pa.string()).dictionary_encode()
    names: list[str] = encoded.dictionary.to_pylist()
    _check_names(names, f"triples file {path}: 'op'")
    for name in names:
        op_codes.setdefault(name, len(op_codes))
    local = np.array([op_codes[n] for n in names], dtype=np.int32)
    return src, dst, local[encoded.indices.to_numpy(zero_copy_only=False)]


def _number_values(
    srcs: list[np.ndarray], dsts: list[np.ndarray], progress: Progress
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense numbers 0..V-1 for the sparse 64-bit ids (empties the input
    lists to free their memory early)."""
    both = np.concatenate(srcs + dsts)
    srcs.clear()
    dsts.clear()
    progress.update("numbering values", len(both) // 2, "triples", force=True)
    nodes, dense = _dense_numbers(both, progress, "numbering values")
    progress.done("numbered values", len(nodes), "values")
    half = len(dense) // 2
    return nodes, dense[:half], dense[half:]


def _dense_numbers(
    values: np.ndarray, progress: Progress = SILENT, stage: str = "numbering values"
) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, index of each value among them).

    Sorting keeps memory access sequential; np.unique without outputs hashes,
    which on tens of millions of ids is dominated by cache misses."""
    order, ordered = _argsort_in_parts(values, progress, stage)
    first = _run_starts(ordered)
    nodes = ordered[first]
    del ordered
    index_type = np.int32 if len(values) < np.iinfo(np.int32).max else np.int64
    dense = np.empty(len(values), dtype=index_type)
    dense[order] = np.cumsum(first, dtype=index_type) - 1
    return nodes, dense


def _argsort_in_parts(values: np.ndarray, progress: Progress, stage: str) -> tuple[np.ndarray, np.ndarray]:
    """(order, values[order]), sorted one value range at a time (ranges cut at
    sampled quantiles, about PART_ROWS values each) so that progress can be
    reported between them; as fast as one argsort."""
    parts = -(-len(values) // PART_ROWS)
    if parts <= 1:
        order = np.argsort(values)
        return order, values[order]
    sample = np.sort(values[:: max(1, len(values) // (parts * 256))])
    bounds = sample[np.arange(1, parts) * len(sample) // parts]
    part = np.searchsorted(bounds, values, side="right").astype(np.uint16 if parts < 1 << 16 else np.uint32)
    order = np.argsort(part, kind="stable")  # a radix sort on 16-bit keys
    ends = np.cumsum(np.bincount(part, minlength=parts)).tolist()
    del part
    ordered = values[order]
    start = 0
    for end in ends:
        within = np.argsort(ordered[start:end])
        order[start:end] = order[start:end][within]
        ordered[start:end] = ordered[start:end][within]
        start = end
        progress.update(stage, start, "ids sorted")
    return order, ordered


def _unique_triples(
    src: np.ndarray, dst: np.ndarray, op: np.ndarray, n_values: int, n_ops: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (src, dst, op), sorted by src first."""
    if n_values * n_values * max(n_ops, 1) < 1 << 63:
        return _unique_by_key(src, dst, op, n_values, n_ops)
    return _unique_by_lexsort(src, dst, op)


def _unique_by_key(
    src: np.ndarray, dst: np.ndarray, op: np.ndarray, n_values: int, n_ops: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One int64 key a triple, sorted in place: the fastest sort NumPy has."""
    key = src.astype(np.int64) * n_values
    key += dst
    key *= n_ops
    key += op
    key.sort()
    key = key[_run_starts(key)]
    pair, op_u = np.divmod(key, n_ops)
    src_u, dst_u = np.divmod(pair, n_values)
    return src_u.astype(src.dtype), dst_u.astype(dst.dtype), op_u.astype(op.dtype)


def _unique_by_lexsort(src: np.ndarray, dst: np.ndarray, op: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For value counts whose keys would not fit 63 bits."""
    order = np.lexsort((op, dst, src))
    src, dst, op = src[order], dst[order], op[order]
    keep = _run_starts(src) | _run_starts(dst) | _run_starts(op)
    return src[keep], dst[keep], op[keep]


def _run_starts(ordered: np.ndarray) -> np.ndarray:
    """True where a sorted array holds a value not seen before."""
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


# -- the cycle check -------------------------------------------------------------


@dataclass
class Ordering:
    """What a topological sort did: values it could order, edges it relaxed."""

    values: int
    ordered: int
    edges_relaxed: int
    rounds: int
    remaining_in_degree: np.ndarray

    @property
    def acyclic(self) -> bool:
        return self.ordered == self.values


def topological_order(
    src: np.ndarray, dst: np.ndarray, n_values: int, progress: Progress = SILENT, stage: str = "ordering values"
) -> Ordering:
    """Kahn's algorithm over the edges ``src -> dst`` (values 0..n_values-1).

    Each round takes the values whose predecessors are all ordered (the
    frontier) and relaxes only their out-edges, so the whole sort touches
    every edge once: O(values + edges) whatever the depth. Small frontiers
    are walked in Python, value by value (a chain of a million values would
    be a million NumPy rounds)."""
    progress.update(stage, 0, "values", force=True)
    indptr, targets = _csr(src, dst, n_values)
    in_degree = np.bincount(targets, minlength=n_values).astype(np.int32)
    frontier = np.flatnonzero(in_degree == 0).astype(targets.dtype)
    ordered = relaxed = rounds = 0
    while len(frontier):
        rounds += 1
        if len(frontier) < SMALL_FRONTIER:
            frontier, walked, edges = _walk_small_frontier(frontier, indptr, targets, in_degree)
            ordered += walked
        else:
            ordered += len(frontier)
            frontier, edges = _relax_frontier(frontier, indptr, targets, in_degree)
        relaxed += edges
        progress.update(stage, ordered, "values")
    return Ordering(n_values, ordered, relaxed, rounds, in_degree)


def _csr(src: np.ndarray, dst: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """Out-edges of value v: ``targets[indptr[v]:indptr[v + 1]]``."""
    if len(src) > 1 and not (src[1:] >= src[:-1]).all():
        order = np.argsort(src, kind="stable")
        src, dst = src[order], dst[order]
    indptr = np.zeros(n_values + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n_values), out=indptr[1:])
    return indptr, dst


def _relax_frontier(
    frontier: np.ndarray, indptr: np.ndarray, targets: np.ndarray, in_degree: np.ndarray
) -> tuple[np.ndarray, int]:
    """One vectorised round: the next frontier and the edges relaxed."""
    starts = indptr[frontier]
    counts = indptr[frontier + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return frontier[:0], 0
    # Positions of the frontier's out-edges: each start repeated, plus 0, 1, ...
    positions = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(total)
    reached = targets[positions]
    np.subtract.at(in_degree, reached, 1)
    ready = reached[in_degree[reached] == 0]
    # A value freed by several edges appears several times: tag each slot and
    # keep the one whose tag survived (O(frontier), no sort). Ordered values
    # are never read again, so their in-degree may hold the tag.
    tags = -1 - np.arange(len(ready), dtype=in_degree.dtype)
    in_degree[ready] = tags
    return ready[in_degree[ready] == tags], total


def _walk_small_frontier(
    frontier: np.ndarray, indptr: np.ndarray, targets: np.ndarray, in_degree: np.ndarray
) -> tuple[np.ndarray, int, int]:
    """Kahn's algorithm one value at a time until the work list is wide again
    (or a step budget is spent, so progress is still reported):
    (next frontier, values ordered, edges relaxed)."""
    # Memoryviews: indexing them yields Python ints, ten times faster than NumPy scalars.
    starts, ends, reached, degree = (a.data for a in (indptr[:-1], indptr[1:], targets, in_degree))
    work = frontier.tolist()
    ordered = relaxed = 0
    while work and len(work) < SMALL_FRONTIER and ordered < WALK_STEPS:
        value = work.pop()
        ordered += 1
        first, last = starts[value], ends[value]
        relaxed += last - first
        for k in range(first, last):
            target = reached[k]
            left = degree[target] - 1
            degree[target] = left
            if left == 0:
                work.append(target)
    return np.array(work, dtype=targets.dtype), ordered, relaxed


def a_value_on_a_cycle(src: np.ndarray, dst: np.ndarray, ordering: Ordering) -> int:
    """A value that is among its own ancestors, given a failed ordering.

    Every value left unordered has a predecessor left unordered; walking
    predecessors must come back to a value already seen, which is on a cycle."""
    left = ordering.remaining_in_degree > 0
    both_left = left[src] & left[dst]
    predecessor = np.full(ordering.values, -1, dtype=np.int64)
    predecessor[dst[both_left]] = src[both_left]
    step = predecessor.data
    value = int(np.flatnonzero(left)[0])
    seen = set()
    while value not in seen:
        seen.add(value)
        value = step[value]
    return value


def _check_acyclic(graph: _Graph, node_tables: np.ndarray, progress: Progress) -> None:
    """Values of distinct tables can only form a cycle if the tables do, so
    the table graph decides alone when it is acyclic and has no edge inside
    one table; otherwise a topological sort over the values decides."""
    if _table_graph_is_acyclic(node_tables[graph.src], node_tables[graph.dst], progress):
        return
    ordering = topological_order(graph.src, graph.dst, len(graph.nodes), progress, "cycle check: ordering values")
    progress.done("cycle check: ordered values", ordering.ordered, "values")
    if not ordering.acyclic:
        value = graph.nodes[a_value_on_a_cycle(graph.src, graph.dst, ordering)]
        raise ImportInputError(f"the triples contain a cycle: value {value} is among its own ancestors")


def _table_graph_is_acyclic(src_tables: np.ndarray, dst_tables: np.ndarray, progress: Progress) -> bool:
    n_tables = int(max(src_tables.max(), dst_tables.max())) + 1
    pairs = src_tables.astype(np.int64) * n_tables + dst_tables
    pairs.sort()
    pairs = pairs[_run_starts(pairs)]
    src, dst = np.divmod(pairs, n_tables)
    progress.done("cycle check: table graph", len(pairs), "table pairs")
    return not (src == dst).any() and topological_order(src, dst, n_tables).acyclic


def _check_no_cycle_with_earlier_runs(store: Store[Transaction], graph: _Graph, progress: Progress) -> None:
    """Reject triples that close a cycle through triples of earlier runs.

    Captured ids carry a table in their high bits and imported ids may not,
    so only earlier imported triples can share values with these. Both sets
    are acyclic, and a cycle through both passes through a shared value, so
    their union is sorted only when they share one (then all of the earlier
    triples count: a path between shared values may run through any).
    Whether they share one is decided from the row groups whose value range
    (Parquet statistics) holds a new value: an import unrelated to earlier
    runs reads none of their triples, so its cost does not grow with the store."""
    if not store.exists():
        return
    fragments = _imported_fragments(store)
    if not _earlier_runs_share_a_value(store, fragments, graph.nodes, progress):
        return
    earlier_src, earlier_dst = _read_earlier_triples(store, fragments, progress)
    stage = "cycle check: numbering values with earlier runs"
    progress.update(stage, len(earlier_src) + graph.size, "triples", force=True)
    nodes, dense = _dense_numbers(np.concatenate([earlier_src, earlier_dst, graph.nodes]), progress, stage)
    n_earlier = len(earlier_src)
    del earlier_src, earlier_dst
    new_index = dense[2 * n_earlier :]
    src = np.concatenate([new_index[graph.src], dense[:n_earlier]])
    dst = np.concatenate([new_index[graph.dst], dense[n_earlier : 2 * n_earlier]])
    del dense, new_index
    ordering = topological_order(src, dst, len(nodes), progress, "cycle check: ordering values with earlier runs")
    progress.done("cycle check: ordered values with earlier runs", ordering.ordered, "values")
    if not ordering.acyclic:
        value = nodes[a_value_on_a_cycle(src, dst, ordering)]
        raise ImportInputError(
            f"the triples close a cycle with triples of earlier runs: value {value} is among its own ancestors"
        )


def _imported_fragments(store: Store[Transaction]) -> list[pads.ParquetFileFragment]:
    """The committed triple files, each reduced to its row groups that may
    hold imported triples (by the statistics of ``src``)."""
    import pyarrow.dataset as pads

    dataset = pads.dataset(store.triple_files(), schema=schema.TRIPLES, format="parquet", filesystem=store.fs)
    imported = pc.field("src") < ids.IMPORTED_ID_LIMIT
    fragments = []
    for fragment in dataset.get_fragments():
        with storefiles.damage_reported(fragment.path):
            fragments += fragment.split_by_row_group(filter=imported, schema=schema.TRIPLES)
    return fragments


def _may_share_a_value(fragment: pads.ParquetFileFragment, sorted_nodes: np.ndarray) -> bool:
    """Whether a one-row-group fragment's value range (its ``src`` and ``dst``
    statistics) holds one of ``sorted_nodes``; True when statistics are missing."""
    (group,) = fragment.row_groups
    stats = group.statistics
    bounds = [stats.get(c, {}) for c in ("src", "dst")]
    if not all("min" in b and "max" in b for b in bounds):
        return True
    lo, hi = min(b["min"] for b in bounds), max(b["max"] for b in bounds)
    first = int(np.searchsorted(sorted_nodes, lo))
    return first < len(sorted_nodes) and bool(sorted_nodes[first] <= hi)


def _earlier_runs_share_a_value(
    store: Store[Transaction], fragments: list[pads.ParquetFileFragment], nodes: np.ndarray, progress: Progress
) -> bool:
    """Whether an earlier imported triple holds one of ``nodes`` (sorted),
    reading only the row groups whose value range holds one of them."""
    candidates = [f for f in fragments if _may_share_a_value(f, nodes)]
    read = 0
    for src, dst in _triple_batches(candidates):
        read += len(src)
        progress.update("cycle check: reading earlier triples in range", read, "triples")
        if _shares_a_value(nodes, np.concatenate([src, dst])):
            progress.done("cycle check: earlier runs share values", read, "triples read")
            return True
    progress.done(
        "cycle check: earlier runs share no value",
        read,
        f"triples read ({len(candidates):,} of {len(fragments):,} row groups in range)",
    )
    return False


def _read_earlier_triples(
    store: Store[Transaction], fragments: list[pads.ParquetFileFragment], progress: Progress
) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of all committed imported triples."""
    srcs, dsts, read = [], [], 0
    for src, dst in _triple_batches(fragments):
        srcs.append(src)
        dsts.append(dst)
        read += len(src)
        progress.update("cycle check: reading earlier imported triples", read, "triples")
    progress.done("cycle check: read earlier imported triples", read, "triples")
    empty = np.empty(0, dtype=np.int64)
    return np.concatenate([empty, *srcs]), np.concatenate([empty, *dsts])


def _triple_batches(fragments: list[pads.ParquetFileFragment]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(src, dst) of the imported triples of ``fragments``, batch by batch; a
    damaged file is named."""
    imported = pc.field("src") < ids.IMPORTED_ID_LIMIT
    for fragment in fragments:
        with storefiles.damage_reported(fragment.path):
            for batch in fragment.to_batches(
                schema=schema.TRIPLES, columns=["src", "dst"], filter=imported, batch_size=BATCH_ROWS
            ):
                yield batch.column("src").to_numpy(), batch.column("dst").to_numpy()


def _shares_a_value(sorted_nodes: np.ndarray, values: np.ndarray) -> bool:
    """Whether any of ``values`` is among ``sorted_nodes``; sorting the
    queries first keeps the search cache-friendly."""
    if not len(sorted_nodes) or not len(values):
        return False
    queries = np.sort(values)
    pos = np.minimum(np.searchsorted(sorted_nodes, queries), len(sorted_nodes) - 1)
    return bool((sorted_nodes[pos] == queries).any())


# -- writing the run -------------------------------------------------------------


class _RunWriter:
    """Writes the checked triples, the catalogue and the values of one import,
    through the run's triples writer like every adapter."""

    def __init__(self, run: StagedRun, mapping: ValueMapping, progress: Progress) -> None:
        self.run = run
        self.txn = run.txn
        self.mapping = mapping
        self.progress = progress

    def write(self, graph: _Graph, node_tables: np.ndarray, rows: RowLineageInput | None = None) -> int:
        unknown = node_tables == len(self.mapping.tables)
        table_ids = self._reserve_tables(bool(unknown.any()))
        op_ids = np.array([self.txn.reserve("ops") for _ in graph.op_names], dtype=np.int64)
        self._write_triples(graph, table_ids[node_tables], op_ids)
        op_tables = {} if rows is None else rows.write(self.run, graph.op_names, op_ids, table_ids)
        self._write_catalogue(graph, table_ids, op_ids, op_tables)
        self._write_values(graph.nodes[unknown], table_ids)
        self.run.finish()
        return graph.size

    def _reserve_tables(self, any_unknown: bool) -> np.ndarray:
        """Table ids by table code; the last code is ``unknown`` (0 if unused)."""
        ids_ = [self.txn.reserve("tables") for _ in self.mapping.tables]
        return np.array([*ids_, self.txn.reserve("tables") if any_unknown else 0], dtype=np.int32)

    def _write_triples(self, graph: _Graph, node_tables: np.ndarray, op_ids: np.ndarray) -> None:
        with self.run.triples_writer("part") as writer:
            for first in range(0, graph.size, BATCH_ROWS):
                rows = slice(first, min(first + BATCH_ROWS, graph.size))
                src, dst = graph.src[rows], graph.dst[rows]
                writer.write(
                    graph.nodes[src],
                    graph.nodes[dst],
                    op_ids[graph.op[rows]],
                    src_table=node_tables[src],
                    dst_table=node_tables[dst],
                )
                self.progress.update("writing triples", rows.stop, "triples", total=graph.size)
        self.progress.done("wrote triples", graph.size, "triples")

    def _write_catalogue(
        self,
        graph: _Graph,
        table_ids: np.ndarray,
        op_ids: np.ndarray,
        op_tables: dict[int, tuple[tuple[int, ...], tuple[int, ...]]],
    ) -> None:
        txn, m = self.txn, self.mapping
        for code, name in enumerate(m.tables):
            txn.add_table(TableInfo(int(table_ids[code]), name, txn.run_id, "imported", tuple(m.columns[code])))
        if table_ids[-1]:
            txn.add_table(TableInfo(int(table_ids[-1]), UNKNOWN_TABLE, txn.run_id, "imported"))
        now = utc_now()
        counts = np.bincount(graph.op, minlength=len(graph.op_names)).tolist()
        for name, op_id, n in zip(graph.op_names, op_ids.tolist(), counts, strict=True):
            inputs, outputs = op_tables.get(op_id, ((), ()))
            txn.add_op(
                OpInfo(op_id, name, txn.run_id, "imported", inputs, outputs, started=now, finished=now, triples=n)
            )

    def _write_values(self, unlisted: np.ndarray, table_ids: np.ndarray) -> None:
        m = self.mapping
        self.progress.update("writing values", len(m.ids) + len(unlisted), "values", force=True)
        values = pa.table(
            {
                "value_id": np.concatenate([m.ids, unlisted]),
                "table_id": np.concatenate([table_ids[m.table_codes], np.full(len(unlisted), table_ids[-1], np.int32)]),
                "column_id": pa.array(
                    np.concatenate([m.column_codes, np.full(len(unlisted), -1, np.int32)]),
                    mask=np.concatenate([m.column_codes < 0, np.ones(len(unlisted), bool)]),
                ),
            },
            schema=schema.VALUES,
        )
        pq.write_table(
            values, self.txn.path("values.parquet"), filesystem=self.run.store.fs, row_group_size=VALUES_ROW_GROUP
        )
        self.txn.mark_dataset("values.parquet")
        self.txn.values_count = values.num_rows
        if m.rows is not None:
            placed = m.rows >= 0
            value_rows = pa.table({"value_id": m.ids[placed], "row": m.rows[placed]}, schema=VALUE_ROWS_SCHEMA)
            pq.write_table(value_rows, self.txn.path(VALUE_ROWS), filesystem=self.run.store.fs)
            self.txn.mark_dataset(VALUE_ROWS)
        self.progress.done("wrote values", values.num_rows, "values")


# -- row lineage -------------------------------------------------------------------


@dataclass
class RowLineageInput:
    """The checked row-lineage records (table and op names as codes) and rules of an import."""

    records: pa.Table  # op (name), out_table, out_row, member, in_table, in_row, optional; tables as codes
    rules: list[dict[str, Any]]  # OpRowRules JSON with op names and table codes
    path: str

    def check_ops(self, op_names: list[str]) -> None:
        known = set(op_names)
        used = {r["op"] for r in self.rules} | set(self.records.column("op").unique().to_pylist())
        unknown = sorted(used - known)
        if unknown:
            raise ImportInputError(f"row lineage {self.path}: op {unknown[0]!r} is not an op of the triples")

    def write(
        self, run: StagedRun, op_names: list[str], op_ids: np.ndarray, table_ids: np.ndarray
    ) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        """Write records and rules; return op id -> (input tables, output tables)."""
        from provplug.rowrules import OpRowRules

        op_id = dict(zip(op_names, op_ids.tolist(), strict=True))
        tables: dict[int, tuple[set[int], set[int]]] = {}
        with run.row_lineage_writer("part") as writer:
            for key, group in _groups(self.records, ["op", "out_table"]):
                op, out = op_id[key[0]], int(table_ids[key[1]])
                writer.write(
                    op,
                    out,
                    group.column("out_row").to_numpy(),
                    group.column("member").to_numpy(),
                    table_ids[group.column("in_table").to_numpy()],
                    group.column("in_row").to_numpy(),
                    group.column("optional").to_numpy(zero_copy_only=False),
                )
                tables.setdefault(op, (set(), set()))[0].update(
                    int(table_ids[t]) for t in group.column("in_table").unique().to_pylist()
                )
        for rule in self.rules:
            data = _with_ids(rule, op_id, table_ids)
            run.record_row_rules(OpRowRules.from_json(data))
            inputs, outputs = tables.setdefault(data["op"], (set(), set()))
            outputs.add(data["out_table"])
            inputs.update(int(t) for t in data["deciding"])
        return {op: (tuple(sorted(i - o)), tuple(sorted(o))) for op, (i, o) in tables.items()}


def _groups(table: pa.Table, keys: list[str]) -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
    combos = table.group_by(keys).aggregate([]).to_pylist()
    for combo in combos:
        mask = None
        for k in keys:
            hit = pc.equal(table.column(k), combo[k])
            mask = hit if mask is None else pc.and_(mask, hit)
        yield tuple(combo[k] for k in keys), table.filter(mask)


def _open_row_lineage(
    lineage_path: str | os.PathLike[str] | None, rules_path: str | os.PathLike[str] | None, mapping: ValueMapping
) -> RowLineageInput | None:
    """Read and check the row-lineage files (names resolved against the values file)."""
    if lineage_path is None and rules_path is None:
        return None
    if lineage_path is None or rules_path is None:
        raise ImportInputError("--row-lineage and --row-rules go together: give both files")
    path = os.fspath(lineage_path)
    dataset = _open_input(
        path, {"op": "any", "out_table": "any", "out_row": "int", "in_table": "any", "in_row": "int"}, "row-lineage"
    )
    columns = [
        c
        for c in ("op", "out_table", "out_row", "member", "in_table", "in_row", "optional")
        if c in dataset.schema.names
    ]
    data = pa.Table.from_batches(
        list(_batches(dataset, columns, "row-lineage")), schema=pa.schema([dataset.schema.field(c) for c in columns])
    )
    for name in columns:
        if data.column(name).null_count:
            raise ImportInputError(f"row-lineage file {path}: '{name}' is empty in some row")
    code = {name: i for i, name in enumerate(mapping.tables)}
    records = pa.table(
        {
            "op": data.column("op").cast(pa.string()),
            "out_table": _table_codes_of(data.column("out_table"), code, path),
            "out_row": _rows_of(data.column("out_row"), path, "out_row"),
            "member": data.column("member").cast(pa.int32())
            if "member" in columns
            else pa.array(np.zeros(len(data), np.int32)),
            "in_table": _table_codes_of(data.column("in_table"), code, path),
            "in_row": _rows_of(data.column("in_row"), path, "in_row"),
            "optional": data.column("optional").cast(pa.bool_())
            if "optional" in columns
            else pa.array(np.zeros(len(data), bool)),
        }
    )
    rules = _read_rules(os.fspath(rules_path), code)
    covered = {(r["op"], r["out_table"]) for r in rules}
    for pair in records.group_by(["op", "out_table"]).aggregate([]).to_pylist():
        if (pair["op"], pair["out_table"]) not in covered:
            raise ImportInputError(
                f"row-rules file {rules_path}: no rules for op {pair['op']!r} writing "
                f"{mapping.tables[pair['out_table']]!r}, which the row lineage names"
            )
    return RowLineageInput(records, rules, path)


def _table_codes_of(column: pa.ChunkedArray, code: dict[str, int], path: str) -> pa.Array:
    names = column.cast(pa.string()).to_pylist()
    unknown = next((n for n in names if n not in code), None)
    if unknown is not None:
        raise ImportInputError(f"row-lineage file {path}: table {unknown!r} is not a table of the values file")
    return pa.array([code[n] for n in names], pa.int32())


def _rows_of(column: pa.ChunkedArray, path: str, name: str) -> pa.Array:
    rows = column.cast(pa.int64()).to_numpy()
    if len(rows) and (rows.min() < 0 or rows.max() >= ids.MAX_ROWS):
        raise ImportInputError(
            f"row-lineage file {path}: '{name}' {rows.min() if rows.min() < 0 else rows.max()} "
            f"outside 0..{ids.MAX_ROWS - 1}"
        )
    return pa.array(rows, pa.int64())


def _read_rules(path: str, code: dict[str, int]) -> list[dict[str, Any]]:
    """The rules JSON, tables as codes (checked by parsing them as OpRowRules)."""
    import json

    from provplug.rowrules import OpRowRules

    try:
        with open(path) as f:
            items = json.load(f)
    except OSError as exc:
        raise ImportInputError(f"cannot read row-rules file {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ImportInputError(f"row-rules file {path} is not JSON: {exc.msg} (line {exc.lineno})") from exc
    if not isinstance(items, list):
        raise ImportInputError(f"row-rules file {path}: expected a JSON list of op rules")
    out = []
    for i, item in enumerate(items):
        try:
            rule = _with_codes(item, code)
            OpRowRules.from_json({**rule, "op": 0})  # checks kinds, functions, fields
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImportInputError(f"row-rules file {path}: rule {i + 1}: {_rule_error(exc)}") from exc
        out.append(rule)
    return out


def _rule_error(exc: BaseException) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc)


def _with_codes(item: dict[str, Any], code: dict[str, int]) -> dict[str, Any]:
    """A rule with table names replaced by codes (unknown names: ValueError)."""

    def table(name: Any) -> int:
        if name not in code:
            raise ValueError(f"table {name!r} is not a table of the values file")
        return code[name]

    columns = {}
    for name, rule in item["columns"].items():
        rule = dict(rule)
        if rule.get("table") is not None:
            rule["table"] = table(rule["table"])
        rule["references"] = [[table(t), c] for t, c in rule.get("references", [])]
        columns[name] = rule
    return {
        "op": str(item["op"]),
        "out_table": table(item["out_table"]),
        "existence": item["existence"],
        "columns": columns,
        "deciding": {str(table(t)): cols for t, cols in item.get("deciding", {}).items()},
        "opaque_inputs": [table(t) for t in item.get("opaque_inputs", [])],
        "reason": item.get("reason", ""),
    }


def _with_ids(rule: dict[str, Any], op_id: dict[str, int], table_ids: np.ndarray) -> dict[str, Any]:
    def tid(c: Any) -> int:
        return int(table_ids[int(c)])

    columns = {
        name: {
            **r,
            **({"table": tid(r["table"])} if r.get("table") is not None else {}),
            "references": [[tid(t), c] for t, c in r.get("references", [])],
        }
        for name, r in rule["columns"].items()
    }
    return {
        **rule,
        "op": op_id[rule["op"]],
        "out_table": tid(rule["out_table"]),
        "columns": columns,
        "deciding": {tid(t): cols for t, cols in rule["deciding"].items()},
        "opaque_inputs": [tid(t) for t in rule["opaque_inputs"]],
    }
