"""Helpers for the lineage tests (no tests here): a random layered DAG to
import, and the paper's Tables 1-4 as a store with rows. (The BFS oracle is
provplug.testing.TripleOracle.)"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from provplug import ids, schema
from provplug.model import OpInfo, TableInfo
from provplug.store.parquet import ParquetStore


def layered_dag(
    path: Path, seed: int, layers: int = 6, width: int = 300, fan_in: int = 2, tables_per_layer: int = 1
) -> tuple[Path, Path, list[tuple[int, int]]]:
    """A random layered DAG written as import CSVs: layer L's values form
    table ``T{L}``; each value of layer L>0 derives from ``fan_in`` random
    values of the layer below (so components are large)."""
    rng = random.Random(seed)
    ids = [[layer * width + i + 1 for i in range(width)] for layer in range(layers)]
    edges: set[tuple[int, int]] = set()
    for layer in range(1, layers):
        for d in ids[layer]:
            if rng.random() < 0.1:
                continue  # some values are sources: more than one component
            for s in rng.sample(ids[layer - 1], rng.randint(1, fan_in)):
                edges.add((s, d))
    triples = path / "triples.csv"
    values = path / "values.csv"
    ops = ["load", "clean", "join", "agg", "score", "rank", "emit"]
    triples.write_text(
        "src,dst,op\n" + "".join(f"{s},{d},{ops[(d - 1) // width % len(ops)]}\n" for s, d in sorted(edges))
    )
    values.write_text("value_id,table\n" + "".join(f"{v},T{layer}\n" for layer in range(layers) for v in ids[layer]))
    return triples, values, sorted(edges)


# The paper's Tables 1-3: (table, columns, rows, first paper id).
PAPER_TABLES = [
    (
        "Person1",
        ("Name", "City", "Age"),
        [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)],
        1,
    ),
    ("Person2", ("Name", "City", "Age"), [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40)], 13),
    ("AvgAge", ("City", "Age"), [("NY", 35.0), ("LA", 40.0)], 22),
]


def write_paper_store_with_rows(store: ParquetStore, triples_csv: Path) -> dict[int, int]:
    """Tables 1-4 as a capture would store them (packed ids, stored rows);
    return paper id -> packed value id."""
    packed: dict[int, int] = {}
    with store.transaction("capture") as txn:
        table_ids = []
        for name, columns, rows, first in PAPER_TABLES:
            tid = txn.reserve("tables")
            table_ids.append(tid)
            origin = "source" if name == "Person1" else "output"
            txn.add_table(TableInfo(tid, name, txn.run_id, origin, columns, len(rows), True))
            data = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
            data[schema.ROW_COLUMN] = list(range(len(rows)))
            folder = Path(txn.path("rows", str(tid)))
            folder.mkdir(parents=True)
            pq.write_table(pa.table(data), folder / "part-0.parquet")
            for r in range(len(rows)):
                for c in range(len(columns)):
                    packed[first + r * len(columns) + c] = ids.value_id(tid, c, r)
        txn.mark_dataset("rows")
        op_ids = {"R1": txn.reserve("ops"), "R2": txn.reserve("ops")}
        txn.add_op(OpInfo(op_ids["R1"], "R1", txn.run_id, "builtin", (table_ids[0],), (table_ids[1],)))
        txn.add_op(OpInfo(op_ids["R2"], "R2", txn.run_id, "builtin", (table_ids[1],), (table_ids[2],)))
        lines = [line.split(",") for line in triples_csv.read_text().split()[1:]]
        src = [packed[int(s)] for s, _, _ in lines]
        dst = [packed[int(d)] for _, d, _ in lines]
        Path(txn.path("triples")).mkdir()
        pq.write_table(
            pa.table(
                {
                    "src": pa.array(src, pa.int64()),
                    "dst": pa.array(dst, pa.int64()),
                    "op": pa.array([op_ids[o] for _, _, o in lines], pa.int64()),
                    "src_table": pa.array([s >> ids.TABLE_SHIFT for s in src], pa.int32()),
                    "dst_table": pa.array([d >> ids.TABLE_SHIFT for d in dst], pa.int32()),
                },
                schema=schema.TRIPLES,
            ),
            txn.path("triples", "part-0.parquet"),
        )
        txn.mark_dataset("triples")
    return packed


def write_store_with_rows(
    store: ParquetStore,
    tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[object]]]],
    edges: Sequence[tuple[tuple[int, int, int], tuple[int, int, int]]],
) -> list[int]:
    """One captured-like run: ``tables`` as ``(name, columns, rows)`` with
    stored rows, and one op whose triples are ``edges`` between cells given
    as ``(table index, column index, row)``. Return the tables' ids."""
    with store.transaction("capture") as txn:
        tids = [txn.reserve("tables") for _ in tables]
        for tid, (name, columns, rows) in zip(tids, tables, strict=True):
            txn.add_table(TableInfo(tid, name, txn.run_id, "source", tuple(columns), len(rows), True))
            data: dict[str, list[object]] = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
            data[schema.ROW_COLUMN] = list(range(len(rows)))
            folder = Path(txn.path("rows", str(tid)))
            folder.mkdir(parents=True)
            pq.write_table(pa.table(data), folder / "part-0.parquet")
        txn.mark_dataset("rows")
        op = txn.reserve("ops")
        txn.add_op(OpInfo(op, "op", txn.run_id, "builtin", tuple(tids), tuple(tids)))
        src = [ids.value_id(tids[t], c, r) for (t, c, r), _ in edges]
        dst = [ids.value_id(tids[t], c, r) for _, (t, c, r) in edges]
        Path(txn.path("triples")).mkdir()
        triples = {
            "src": pa.array(src, pa.int64()),
            "dst": pa.array(dst, pa.int64()),
            "op": pa.array([op] * len(edges), pa.int64()),
            "src_table": pa.array([tids[s[0]] for s, _ in edges], pa.int32()),
            "dst_table": pa.array([tids[d[0]] for _, d in edges], pa.int32()),
        }
        pq.write_table(pa.table(triples, schema=schema.TRIPLES), txn.path("triples", "part-0.parquet"))
        txn.mark_dataset("triples")
    return tids
